"""Zero-code-change SageMaker Debugger for a user's Gluon script, as AWS's MXNet images had: when the job has a hook
configuration, a script that makes no smdebug hook of its own gets one at its first training step.

How: the image's site-packages holds sagemaker_mxnet_debugger.pth, which calls install() in every Python process
when the hook configuration file exists (one stat otherwise). install() waits for mxnet.gluon.block to be imported
and then wraps gluon.Block.__call__. A top-level call (a block called by the script, not by another block) made
while autograd records is a training step's forward: at the first one the hook is made (hook.open_hook) and the
block is registered as the model (its weights, gradients, outputs), and every Loss block called at top level is
registered as it comes (the losses collection, what SageMaker's default configuration saves). From then on each
top-level call of the model sets the hook's mode: TRAIN while autograd records, EVAL otherwise.

It stands down, for good, when the script made its own smdebug hook by its first training step (smdebug's API
works unchanged), when a built-in program opened its hook (stand_down()), or when the hook cannot be made (a
warning says why). Calls outside training steps (a forward to infer shapes, inference) never make a hook.

Under MXNet's parameter servers (a worker: DMLC_ROLE=worker) smdebug sees no Horovod and names every worker
worker_0, so every host's files would take the same names under the one S3OutputPath: only the launcher's worker 0
(SMMH_WORKER_RANK) makes the hook, as in the built-in programs. And at the interpreter's exit the hook is closed and
let go of: through the model's parameters it holds the Trainer and so a dist kvstore, whose destructor is ps-lite's
barrier at exit; held by smdebug's globals past the modules' teardown, the kvstore is never freed, the worker aborts
("terminate called without an active exception") and the others wait in the barrier for it.
"""

from __future__ import annotations

import atexit
import os
import sys

from sagemaker_mxnet_import_hooks.after_import import after_import

# Imported at every interpreter start of a job with a hook configuration (the .pth file): the standard library's
# cheapest modules only; the rest when Gluon is imported (docs/debugger.md: what it costs).
WHO = "zero-code-change"
BLOCK_MODULE = "mxnet.gluon.block"


class Registration:
    """The hook of a script that made none, and the blocks registered with it."""

    def __init__(self):
        self.active = True
        self.hook = None
        self.model = None
        self.losses = set()
        self.nesting = None  # a threading.local: Block.__call__'s nesting in each thread (0 outside any block)
        self.gluon = None  # (autograd, Loss, ModeKeys), imported at the first top-level call: Gluon is complete then

    def stand_down(self):
        self.active = False

    def release(self):
        """At the interpreter's exit, before the modules' teardown: close the hook (smdebug's own exit handler, run
        now: the last step's weights, the end of training) and let go of it, the model and the losses, here and in
        smdebug's globals (its hook singleton, its error-handling agent)."""
        hook, self.hook, self.model, self.losses = self.hook, None, None, set()
        self.stand_down()
        if hook is None:
            return
        from smdebug.core.singleton_utils import del_hook
        from smdebug.core.utils import error_handling_agent

        atexit.unregister(hook._cleanup)
        try:
            hook.close()
        finally:
            del_hook()
            if error_handling_agent.hook is hook:
                error_handling_agent.set_hook(None)

    def top_level_call(self, block):
        if self.gluon is None:
            from mxnet import autograd
            from mxnet.gluon.loss import Loss
            from smdebug.core.modes import ModeKeys

            self.gluon = (autograd, Loss, ModeKeys)
        autograd, loss_class, modes = self.gluon
        recording = autograd.is_recording()
        if self.hook is None and not (recording and self.start()):
            return
        if isinstance(block, loss_class):
            if block not in self.losses:
                self.losses.add(block)
                self.hook.register_block(block)
            return
        if self.model is None:
            self.model = block
            self.hook.register_block(block)
        if block is self.model:
            self.hook.set_mode(modes.TRAIN if recording else modes.EVAL)

    def start(self):
        """At the first training step: the hook, unless the script made its own by now."""
        from smdebug.core import singleton_utils

        from sagemaker_mxnet_debugger.hook import open_hook

        if singleton_utils._ts_hook is not None or not saves_here(os.environ):  # the script's own hook; a worker
            self.stand_down()
            return False
        self.hook = open_hook(WHO)
        if self.hook is None:
            self.stand_down()
            return False
        atexit.register(self.release)  # after smdebug's own exit handlers: it runs before them
        return True


def saves_here(env) -> bool:
    """Whether this process's hook saves: not a parameter-server worker other than the launcher's worker 0."""
    return env.get("DMLC_ROLE") != "worker" or env.get("SMMH_WORKER_RANK", "0") == "0"


REGISTRATION = Registration()


def stand_down():
    """A built-in program opened its own hook: leave Gluon's calls alone."""
    REGISTRATION.stand_down()


def wrap_block_call(block_class, registration=REGISTRATION):
    import threading

    registration.nesting = threading.local()
    registration.nesting.depth = 0
    original = block_class.__call__

    def __call__(self, *args, **kwargs):
        nesting = registration.nesting
        depth = getattr(nesting, "depth", 0)  # 0 in a thread that has not called a block yet
        if depth == 0 and registration.active:
            try:
                registration.top_level_call(self)
            except Exception as error:  # noqa: BLE001 - a Debugger feature must never stop a training step
                registration.stand_down()
                sys.stderr.write(f"{WHO}: warning: SageMaker Debugger: registration failed, training goes on "
                                 f"without the hook ({type(error).__name__}: {error})\n")
        nesting.depth = depth + 1
        try:
            return original(self, *args, **kwargs)
        finally:
            nesting.depth = depth

    __call__.__wrapped__ = original
    block_class.__call__ = __call__


def install(env=None):
    """Called by sagemaker_mxnet_debugger.pth at every interpreter start: arm the wrap when the job has a hook
    configuration (SMDEBUG_ZERO_CODE_CHANGE=0 turns it off)."""
    env = os.environ if env is None else env
    path = env.get("SMDEBUG_CONFIG_FILE_PATH") or "/opt/ml/input/config/debughookconfig.json"  # config.py's
    if env.get("SMDEBUG_ZERO_CODE_CHANGE", "1") == "0" or not os.path.exists(path):
        return
    after_import(BLOCK_MODULE, lambda module: wrap_block_call(module.Block))
