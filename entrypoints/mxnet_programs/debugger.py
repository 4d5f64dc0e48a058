"""SageMaker Debugger in the built-in programs: the hook the job's configuration asks for (debughookconfig.json),
with the program's model and loss blocks registered, its mode following training and validation.

What the hook saves is smdebug's: the configured collections (SageMaker's default: losses) every save_interval
steps, to LocalPath (/opt/ml/output/tensors, uploaded by SageMaker), by the ranks smdebug's Horovod support
chooses (worker_<Horovod rank>; rank 0 only unless include_workers is "all"). Under MXNet's parameter servers
smdebug sees no Horovod and would name every worker worker_0: only worker 0 opens the hook there. Without a
configuration every method does nothing; a configuration that cannot be used is one warning and no hook
(sagemaker_mxnet_debugger.hook).
"""


class DebuggerHook:
    def __init__(self, hook=None):
        self.hook = hook

    @classmethod
    def open(cls, prog, rank, parameter_servers):
        """The job's hook for this rank, after Horovod is initialised (smdebug names the worker by its rank)."""
        from sagemaker_mxnet_debugger import zero_code_change
        from sagemaker_mxnet_debugger.hook import open_hook

        zero_code_change.stand_down()  # this program registers its own blocks
        if parameter_servers and rank != 0:
            return cls()
        return cls(open_hook(prog))

    @property
    def enabled(self):
        return self.hook is not None

    def register(self, net, losses):
        """The model (weights, gradients, its outputs) and the loss blocks (the losses collection)."""
        if self.hook is not None:
            self.hook.register_block(net)
            for loss in losses:
                self.hook.register_block(loss)

    def training(self, on=True):
        """The hook's mode for the forward passes that follow: TRAIN, or EVAL for validation."""
        if self.hook is not None:
            from smdebug.core.modes import ModeKeys

            self.hook.set_mode(ModeKeys.TRAIN if on else ModeKeys.EVAL)

    def close(self):
        """Writes the last step's weights and gradients and the end-of-training marker. The programs end with
        os._exit, which skips smdebug's atexit handler."""
        if self.hook is not None:
            hook, self.hook = self.hook, None
            hook.close()
