"""The MNIST program: a LeNet-style Gluon CNN, data-parallel with Horovod. The user-facing contract (data,
outputs, SIGTERM, exit codes) is the docstring of entrypoints/mnist.py.

Epochs are counted from 0 in code, like every program here; MNIST's log lines and metrics.json number them
from 1 (``epoch=1`` is the first), as its documentation and examples show.
"""

import math
import os
import time

from mxnet_programs import hyperparameters as hp
from mxnet_programs import sagemaker_env as sm
from mxnet_programs.files import atomic_write_json, export_hybrid_block
from mxnet_programs.metrics import format_metrics
from mxnet_programs.mnist_data import IMAGE_SIDE, DataPlan
from mxnet_programs.process import ProgramError, log, run_main
from mxnet_programs.session import Session, start_position

PROG = "mnist"
NUM_CLASSES = 10
EVAL_BATCH_SIZE = 1000

_NUMBER = r"([0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?)"
# For the estimator's metric_definitions. Each regex matches only the per-epoch line (batch progress
# lines start "epoch=N batch=..."), and captures one number.
METRIC_DEFINITIONS = [
    {"Name": "train:loss", "Regex": r"epoch=\d+ train_loss=" + _NUMBER},
    {"Name": "train:accuracy", "Regex": r"epoch=\d+ train_loss=\S+ train_accuracy=" + _NUMBER},
    {"Name": "validation:accuracy",
     "Regex": r"epoch=\d+ train_loss=\S+ train_accuracy=\S+ val_accuracy=" + _NUMBER},
    {"Name": "train:samples_per_sec",
     "Regex": r"epoch=\d+ train_loss=\S+ train_accuracy=\S+ val_accuracy=\S+ samples_per_sec=" + _NUMBER},
]


def build_parser():
    parser = hp.HyperparameterParser(
        prog=PROG, description="Train a LeNet-style CNN on MNIST with Horovod (one process per rank).")
    p = parser.add_argument
    p("--epochs", type=hp.positive_int, default=5, help="number of epochs")
    p("--batch-size", type=hp.positive_int, default=64, help="batch size per rank")
    p("--lr", type=hp.non_negative_float, default=0.01,
      help="learning rate per rank; the optimizer uses lr x number of ranks")
    p("--momentum", type=hp.non_negative_float, default=0.9, help="SGD momentum")
    p("--wd", type=hp.non_negative_float, default=0.0001, help="weight decay")
    p("--seed", type=int, default=42, help="random seed (initialisation, shuffling)")
    p("--log-interval", type=int, default=100, help="log progress every N batches (0: only per epoch)")
    p("--train-dir", default=None, help="train channel dir [default: $SM_CHANNEL_TRAIN or "
      "$SM_INPUT_DIR/data/train]")
    p("--test-dir", default=None,
      help="test channel dir [default: $SM_CHANNEL_TEST or $SM_INPUT_DIR/data/test]")
    p("--model-dir", default=None,
      help=f"model output dir [default: $SM_MODEL_DIR or {sm.SM_MODEL_DIR_DEFAULT}]")
    p("--checkpoint-dir", default=None,
      help=f"checkpoint dir [default: $SM_CHECKPOINT_DIR, else checkpointconfig.json's LocalPath, else "
           f"{sm.SM_CHECKPOINT_DIR_DEFAULT}]")
    p("--save-checkpoints", type=hp.str2bool, default=True,
      help="checkpoint after every epoch and on SIGTERM")
    p("--resume", type=hp.str2bool, default=True,
      help="resume from the newest checkpoint in the checkpoint dir")
    p("--keep-checkpoints", type=hp.positive_int, default=2, help="how many checkpoints to keep")
    p("--tensorboard-dir", default=None, help="TensorBoard log dir [default: tensorboardoutputconfig.json's "
      f"LocalPath, else {sm.SM_TENSORBOARD_DIR_DEFAULT}]")
    p("--tensorboard", type=hp.str2bool, default=True, help="write TensorBoard scalars (needs tensorboardX)")
    hp.add_kvstore_argument(parser)
    return parser


def parse_config(argv=None, environ=None):
    """The frozen config: hyperparameters plus the resolved output dirs."""
    args = build_parser().parse_args(argv)
    model_dir, checkpoint_dir = sm.output_dirs(PROG, args.model_dir, args.checkpoint_dir, environ)
    return hp.frozen_config("MnistConfig", args, model_dir=model_dir, checkpoint_dir=checkpoint_dir,
                            tensorboard_dir=sm.tensorboard_dir(args.tensorboard_dir, environ),
                            kvstore=sm.kvstore(args.kvstore, environ))


def build_net(mx):
    nn = mx.gluon.nn
    # Fixed prefix: parameter names must match across ranks for broadcast and across runs for resume.
    net = nn.HybridSequential(prefix="mnist_")
    with net.name_scope():
        net.add(nn.Conv2D(20, kernel_size=5, activation="relu"), nn.MaxPool2D(pool_size=2, strides=2),
                nn.Conv2D(50, kernel_size=5, activation="relu"), nn.MaxPool2D(pool_size=2, strides=2),
                nn.Flatten(), nn.Dense(500, activation="relu"), nn.Dense(NUM_CLASSES))
    return net


class MnistTraining:
    """One rank's training: model, resume, epochs, checkpoints, export."""

    def __init__(self, config, plan, first_train, session):
        self.config, self.plan, self.session = config, plan, session
        self.first_train = first_train  # pass 0's training data, read (and checked) before MPI init
        self.pass_index = 0  # Pipe-mode FIFO number: counts epochs run by this process
        mx = self.mx = session.mx
        self.np = session.np
        s = session
        # On a GPU, MXNet's cuDNN autotuning (MXNET_CUDNN_AUTOTUNE_DEFAULT=1, its default) runs once per input shape
        # and is kept for the process: here a handful of shapes (the batch, an epoch's last partial batch, the
        # validation batches), so it is a first-step cost paid once, not repeated; left on (not measured: no GPU here).
        self.ctx = mx.gpu(s.local_rank) if mx.context.num_gpus() > 0 else mx.cpu()
        mx.random.seed(config.seed)
        self.net = build_net(mx)
        self.net.initialize(mx.init.Xavier(magnitude=2.24), ctx=self.ctx)
        self.net.hybridize(static_alloc=True)
        self.net(mx.nd.zeros((1, 1, IMAGE_SIDE, IMAGE_SIDE), ctx=self.ctx))  # allocate deferred-shape params
        self.lr = config.lr * s.size  # linear scaling: the global batch is size x batch_size
        # One grouped allreduce per step instead of one per parameter (8): one negotiation, one MPI call.
        # With 1 core per rank Horovod's per-tensor work competes with the compute: on 2 hosts x 1 rank,
        # batch 64, Python's thread took 1.5-2.5 ms and Horovod's 2-4 ms less CPU per step and the job ran a
        # median 0.03 closer to the control (12 rounds side by side; docs/benchmarks/horovod-tuning.md). The sums
        # are the same.
        self.trainer = s.trainer(self.net.collect_params(), "sgd",
                                 {"learning_rate": self.lr, "momentum": config.momentum, "wd": config.wd},
                                 gradient_groups=1)
        self.loss_fn = mx.gluon.loss.SoftmaxCrossEntropyLoss()
        s.debugger.register(self.net, [self.loss_fn])
        s.open_checkpoints(config.checkpoint_dir, "checkpoint", config.keep_checkpoints)
        state, stem = s.resume(self.net, self.trainer, self.ctx) if config.resume else (None, None)
        self.start_epoch, self.skip_batches = start_position(state)
        if state is not None:
            self.trainer.set_learning_rate(self.lr)  # the states file carries the old run's optimizer settings
            at = f"epoch {self.start_epoch + 1}" + (f" batch {self.skip_batches}" if self.skip_batches else "")
            s.log(f"resumed from checkpoint {stem}.params at {at}")
        s.broadcast_parameters(self.net.collect_params())
        s.open_tensorboard(config.tensorboard_dir, config.tensorboard)

    def save_checkpoint(self, epochs_done, batch=None, extra=None):
        if self.config.save_checkpoints:
            state = {"lr": self.lr, "seed": self.config.seed, **(extra or {})}
            self.session.save_checkpoint(self.net, self.trainer, epochs_done, state, batch=batch)

    def train_epoch(self, epoch, data, skip):
        """One epoch from batch `skip`. Returns global (loss sum, correct, samples), seconds, and the batch
        count at an agreed mid-epoch stop (else None)."""
        mx, np, config, s = self.mx, self.np, self.config, self.session
        # Equal step counts on all ranks, or the gradient allreduces would wait forever.
        counts = s.allreduce_sum(np.eye(s.size)[s.rank] * len(data), f"mnist.counts.{epoch}")
        usable = int(counts.min())
        if usable == 0:
            raise ProgramError(f"a rank has no training samples in epoch {epoch + 1} (per-rank counts "
                               f"{counts.astype(int).tolist()})")
        steps = math.ceil(usable / config.batch_size)
        # Seeded by the 1-based epoch number, as before epochs were counted from 0 in code: same shuffles.
        order = np.random.default_rng([config.seed, epoch + 1, s.rank]).permutation(len(data))[:usable]
        loss_sum = mx.nd.zeros((1,), ctx=self.ctx)
        correct = mx.nd.zeros((1,), ctx=self.ctx)
        samples = 0
        previous_loss = stopped_at = None
        vote = s.stop_vote("mnist.stop")
        s.debugger.training()
        start = interval_start = time.time()
        for batch in range(skip, steps):
            idx = np.sort(order[batch * config.batch_size:(batch + 1) * config.batch_size])
            x = mx.nd.array(data.images[idx], ctx=self.ctx)
            y = mx.nd.array(data.labels[idx], ctx=self.ctx)
            with mx.autograd.record():
                out = self.net(x)
                loss = self.loss_fn(out, y)
            loss.backward()
            self.trainer.step(len(idx))
            loss_sum += loss.sum()
            correct += (out.argmax(axis=1) == y).sum()
            samples += len(idx)
            # Keep the engine at most one batch behind Python: bounded memory, honest timings.
            if previous_loss is not None:
                previous_loss.wait_to_read()
            previous_loss = loss
            if vote.after_step() and batch + 1 < steps:
                stopped_at = batch + 1
                break
            if config.log_interval and (batch + 1) % config.log_interval == 0:
                now = time.time()
                rate = config.log_interval * config.batch_size * s.size / max(now - interval_start, 1e-9)
                interval_start = now
                batch_loss = float(loss.mean().asscalar())
                s.log(format_metrics([("epoch", epoch + 1), ("batch", f"{batch + 1}/{steps}"),
                                      ("loss", batch_loss), ("samples_per_sec", rate)]))
                s.tb.scalars(epoch * steps + batch + 1, {"train/batch_loss": batch_loss})
        if stopped_at is None and vote.final():
            stopped_at = "end"
        totals = s.allreduce_sum([loss_sum.asscalar(), correct.asscalar(), samples], f"mnist.totals.{epoch}")
        return totals[0], totals[1], totals[2], time.time() - start, stopped_at

    def evaluate(self, data, name):
        """Accuracy over the whole test set: per-rank shard counts summed over ranks."""
        mx = self.mx
        self.session.debugger.training(False)
        correct = mx.nd.zeros((1,), ctx=self.ctx)
        for lo in range(0, len(data), EVAL_BATCH_SIZE):
            x = mx.nd.array(data.images[lo:lo + EVAL_BATCH_SIZE], ctx=self.ctx)
            y = mx.nd.array(data.labels[lo:lo + EVAL_BATCH_SIZE], ctx=self.ctx)
            correct += (self.net(x).argmax(axis=1) == y).sum()
        total_correct, total = self.session.allreduce_sum([correct.asscalar(), len(data)], name)
        return total_correct / max(total, 1), int(total)

    def run(self):
        config, s = self.config, self.session
        s.log(f"mnist: world_size={s.size} context={self.ctx} per_rank_batch={config.batch_size} "
              f"lr={self.lr:g} epochs={config.epochs} {self.plan.describe()}")
        for line in self.plan.sharding:
            s.log(f"mnist: {line}")
        history = []
        val_accuracy = None
        for epoch in range(self.start_epoch, config.epochs):
            train = self.plan.train_data(self.pass_index) if self.pass_index else self.first_train
            skip = self.skip_batches if epoch == self.start_epoch else 0
            loss, correct, samples, seconds, stopped_at = self.train_epoch(epoch, train, skip)
            if stopped_at not in (None, "end"):
                self.save_checkpoint(epoch + 1, batch=stopped_at)
                s.finish_stopped()
            test = self.plan.test_data(self.pass_index)
            self.pass_index += 1
            val_accuracy, val_total = self.evaluate(test, f"mnist.val.{epoch}")
            rate = samples / max(seconds, 1e-9)
            train_loss, train_accuracy = loss / max(samples, 1), correct / max(samples, 1)
            history.append({"epoch": epoch + 1, "train_loss": train_loss, "train_accuracy": train_accuracy,
                            "val_accuracy": val_accuracy, "samples_per_sec": rate, "seconds": seconds,
                            "train_samples": int(samples), "val_samples": val_total})
            s.log(format_metrics([
                ("epoch", epoch + 1), ("train_loss", train_loss), ("train_accuracy", train_accuracy),
                ("val_accuracy", val_accuracy), ("samples_per_sec", rate), ("lr", self.lr),
                ("val_samples", val_total), ("train_samples", int(samples)), ("time_sec", seconds)]))
            s.tb.scalars(epoch + 1, {"train/loss": train_loss, "train/accuracy": train_accuracy,
                                     "validation/accuracy": val_accuracy, "train/learning_rate": self.lr,
                                     "train/samples_per_sec": rate})
            self.save_checkpoint(epoch + 1, extra={"val_accuracy": val_accuracy})
            if stopped_at == "end" and epoch + 1 < config.epochs:
                s.finish_stopped()
        if val_accuracy is None:
            # Resumed after the last epoch: nothing to train, still report and export.
            val_accuracy, _ = self.evaluate(self.plan.test_data(self.pass_index), "mnist.val.final")
        if s.rank == 0:
            self.export(val_accuracy, history)
        s.close()

    def export(self, val_accuracy, history):
        model_dir = self.config.model_dir
        export_hybrid_block(self.net, model_dir, name="model", epoch=0)
        rates = [h["samples_per_sec"] for h in history]
        resumed = self.start_epoch > 0 or self.skip_batches
        metrics = {
            "val_accuracy": val_accuracy,
            "epochs": self.config.epochs,
            "epochs_run": len(history),
            "resumed_from_epoch": self.start_epoch + 1 if resumed else None,
            "world_size": self.session.size,
            "batch_size_per_rank": self.config.batch_size,
            "learning_rate": self.lr,
            "samples_per_sec": sum(rates) / len(rates) if rates else None,
            "history": history,
        }
        atomic_write_json(os.path.join(model_dir, "metrics.json"), metrics)
        log(f"mnist: done val_accuracy={val_accuracy:.4f} model={model_dir}/model-symbol.json")


def main(argv=None):
    def train(stop):
        config = parse_config(argv)
        env = sm.dist_env()
        sm.check_single_process(PROG, f"--kvstore {config.kvstore}", config.kvstore, env)
        # Everything up to the Session is local: a bad input fails on every rank before any collective.
        plan = DataPlan(PROG, config.train_dir, config.test_dir, env, stop)
        first_train = plan.train_data(0)
        sm.limit_cpu_threads(env.local_size)  # before mxnet is imported
        MnistTraining(config, plan, first_train, Session(PROG, env, stop, kvstore=config.kvstore)).run()

    run_main(PROG, train)
