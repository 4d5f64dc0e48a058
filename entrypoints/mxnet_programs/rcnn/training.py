"""An R-CNN training run on one rank, from setup to the saved model, and `main`, which the faster_rcnn and
mask_rcnn entrypoints call with their model.

Epochs are counted from 0, in code and in the log lines (``epoch=0 iter=1 ...``), like GluonCV's scripts;
``iter`` counts the iterations done in the current epoch (1-based).
"""

import dataclasses
import time
import warnings

from mxnet_programs import host_once
from mxnet_programs import sagemaker_env as sm
from mxnet_programs.metrics import format_metrics
from mxnet_programs.process import ProgramError, run_main, warn
from mxnet_programs.rcnn import (
    anchors,
    cli,
    cpu_ops,
    data,
    evaluation,
    finetune,
    inputs,
    launch,
    model_files,
    pretrained,
)
from mxnet_programs.rcnn.best_weights import BestCopies
from mxnet_programs.rcnn.parameters import cast_to_float16, decay_biases
from mxnet_programs.rcnn.schedule import learning_rate
from mxnet_programs.rcnn.train_step import TrainStep
from mxnet_programs.session import Session, start_position

# The side of the square input that builds the network's graphs (materialize, export): at 256 px the C4 RPN has 3840
# anchors, enough for its proposal counts (the model zoo's 2000 in training, 1000 in inference), whatever the
# data's size.
GRAPH_SIDE = 256
# Known, harmless noise of MXNet / GluonCV / pycocotools on this model family.
IGNORED_WARNINGS = (r".*Recorded .* out of .* validation images", r"Constant parameter .* grad_req",
                    r"Parameter .* is not used by any computation", r"Mean of empty slice",
                    r"invalid value encountered in")


class RcnnTraining:
    def __init__(self, model, config, session, train, val, shard, pretrained_path, source=None):
        self.model, self.config, self.session = model, config, session
        self.train_data, self.val_data = train, val
        self.classes = train.class_names  # the network's classes: the train annotation file's categories, in order
        self.shard = shard  # which part of the train images this rank trains on (channel_sharding.Shard)
        self.pretrained_path = pretrained_path
        self.source = source  # the weights to fine-tune from (finetune.Source) or None
        mx = self.mx = session.mx
        self.np = session.np
        num_gpus = mx.context.num_gpus()
        import gluoncv

        self.gcv = gluoncv
        # Horovod: one device per rank; one process over every device of its host otherwise (with several
        # parameter-server workers per host, one device each).
        if session.one_device_per_rank:
            self.ctx = [mx.gpu(session.local_rank)] if num_gpus else [mx.cpu()]
        else:
            self.ctx = [mx.gpu(i) for i in range(num_gpus)] or [mx.cpu()]
        # On CPU, the image's operators in place of MXNet's ROIAlign and box_nms: the same values, in less time.
        # float32 only (amp casts the network to float16).
        routed = config.cpu_ops and not num_gpus and not config.amp and cpu_ops.route(mx)
        self.cpu_ops_in_use = ",".join(cpu_ops.OPERATORS) if routed else "none"
        self.per_rank_batch = config.batch_size * len(self.ctx)
        self.global_batch = self.per_rank_batch * session.size
        self.base_lr = config.lr * self.global_batch / cli.LR_REFERENCE_BATCH
        gluoncv.utils.random.seed(config.seed)
        self.amp = None
        if config.amp:
            from mxnet.contrib import amp

            amp.init()
            self.amp = amp
        self.net_name = model.model_name(config.network, config.use_fpn)
        self.net = self.build_net()
        self.build_data()
        anchors.check(mx, self.net, self.train_ds.image_sizes, self.val_ds.image_sizes if self.val_ds is not None else [],
                      config.short, config.max_size)
        optimizer_params = {"learning_rate": self.base_lr, "wd": config.wd, "momentum": config.momentum}
        if config.amp:
            optimizer_params["multi_precision"] = True
        if config.clip_gradient > 0:  # GluonCV's rule: the optimizer clips each element (--clip-gradient)
            optimizer_params["clip_gradient"] = config.clip_gradient
        local_kvstore = config.kvstore if config.kvstore in ("device", "local") and len(self.ctx) > 1 else None
        self.trainer = session.trainer(self.net.collect_train_params(), "sgd", optimizer_params, kvstore=local_kvstore)
        if self.amp is not None:
            self.amp.init_trainer(self.trainer)
        self.train_step = TrainStep(mx, model, self.net, self.trainer, self.ctx, self.amp)
        session.debugger.register(self.net, self.train_step.loss_blocks())
        session.open_checkpoints(config.checkpoint_dir, self.net_name, config.keep_checkpoints)
        self.best_map, self.best_epoch, self.history = -1.0, None, []
        self.best_copies = BestCopies(config.checkpoint_dir, self.net_name)  # the best weights, for a restarted job
        state, stem = session.resume(self.net, self.trainer, self.ctx) if config.resume else (None, None)
        self.start_epoch, self.skip_batches = start_position(state)
        if state is not None:
            self.restore(state, stem)
        elif source is not None:
            self.start_from(source)
        session.broadcast_parameters(self.net.collect_params())
        session.open_tensorboard(config.tensorboard_dir, config.tensorboard)

    # ---- setup

    def build_net(self):
        config, model_zoo = self.config, self.gcv.model_zoo
        try:
            net = model_zoo.get_model(self.net_name, pretrained=False, pretrained_base=self.pretrained_path is not None,
                                      per_device_batch_size=config.batch_size)
        except ValueError:
            if self.net_name not in model_zoo.get_model_list():
                known = sorted(n for n in model_zoo.get_model_list()
                               if n.startswith(self.model.family) and n.endswith("_coco"))
                raise ProgramError(f"GluonCV has no model {self.net_name} (--network {config.network}, "
                                   f"--use-fpn {config.use_fpn}); COCO models: {', '.join(known)}") from None
            raise
        # Validation cost on CPU is dominated by the number of proposals: make it a knob.
        if config.rpn_test_post_nms != net._rpn_test_post_nms:
            net._rpn_test_post_nms = config.rpn_test_post_nms
            net.rpn._test_post_nms = config.rpn_test_post_nms
            if hasattr(net, "_rcnn_max_dets"):
                net._rcnn_max_dets = min(net._rcnn_max_dets, config.rpn_test_post_nms)
        for param in net.collect_params().values():
            if param._data is None:  # not loaded from the pretrained backbone
                param.initialize()
        self.zoo_classes = list(net.classes) == self.classes
        if not self.zoo_classes:
            # GluonCV's own way to give a model zoo network other classes: new class, box (and mask) predictors
            net.reset_class(self.classes)
        net.collect_params().reset_ctx(self.ctx)
        self.materialize(net)
        if config.amp:
            cast_to_float16(net)  # after the float32 forward that gave every parameter its shape
        net.collect_params().setattr("grad_req", "null")
        net.collect_train_params().setattr("grad_req", "write")
        decay_biases(net, config.bias_decay)
        return net

    def materialize(self, net):
        """One tiny forward pass so that no parameter is left with a deferred shape: checkpoints,
        broadcasts and saves then see every parameter. In training mode (without recording):
        MKLDNN reorders convolution weights in place in inference mode, and Horovod cannot send
        such arrays."""
        mx = self.mx
        ctx = self.ctx[0]
        x = mx.nd.zeros((1, 3, GRAPH_SIDE, GRAPH_SIDE), ctx=ctx)
        gt_box = mx.nd.array([[[16, 16, 160, 160]]], ctx=ctx)
        gt_label = mx.nd.zeros((1, 1, 1), ctx=ctx)
        if self.config.batch_size > 1:
            x, gt_box, gt_label = (mx.nd.repeat(a, self.config.batch_size, axis=0) for a in (x, gt_box, gt_label))
        with mx.autograd.train_mode():
            net(x, gt_box, gt_label)  # FPN variants return nested lists: wait for everything
        mx.nd.waitall()

    def build_data(self):
        config, s = self.config, self.session
        self.train_ds, self.val_ds = data.make_datasets(self.model, self.train_data, self.val_data, self.gcv.data)
        if len(self.train_ds) == 0:
            raise ProgramError(f"empty train set: no usable image in {self.train_data.annotation_file}")
        self.steps = data.steps_per_epoch(len(self.train_ds), self.shard.count, self.per_rank_batch,
                                          config.max_iterations_per_epoch)
        if self.shard.per_host:
            # Hosts hold parts of different sizes: every rank runs as many iterations as the smallest allows.
            self.steps = min(s.allgather_object(self.steps, "rcnn.steps"))
        if self.steps == 0:
            ranks = f"{self.shard.count} ranks per host" if self.shard.per_host else f"{s.size} ranks"
            raise ProgramError(
                f"train set too small: {len(self.train_ds)} usable images (on some host, for a ShardedByS3Key channel) "
                f"cannot give each of {ranks} a batch of {self.per_rank_batch} images "
                f"({self.train_data.annotation_file})")
        short = config.short
        val_short = short[-1] if isinstance(short, tuple) else short
        train_tf, self.train_batchify, self.val_tf, self.val_batchify = self.model.transforms(
            self.net, short, val_short, config.max_size, config.use_fpn, len(self.ctx))
        self.train_transformed = self.train_ds.transform(train_tf)
        self.aspect_ratios = self.np.asarray(self.train_ds.get_im_aspect_ratio(), dtype=self.np.float64)

    def train_loader(self, epoch, skip):
        batches = data.epoch_batches(self.np, len(self.train_ds), self.aspect_ratios, self.config.seed, epoch,
                                     self.shard.index, self.shard.count, self.per_rank_batch, self.steps)
        return self.mx.gluon.data.DataLoader(self.train_transformed, batch_sampler=data.ListBatchSampler(batches[skip:]),
                                             batchify_fn=self.train_batchify, num_workers=self.config.num_workers)

    def restore(self, state, stem):
        s = self.session
        self.best_map = float(state.get("best_map", -1.0))
        self.best_epoch = state.get("best_epoch")
        self.history = list(state.get("history", []))
        best = model_files.params_path(self.config.model_dir, self.net_name, "best")
        if s.rank == 0 and self.best_epoch is not None and not self.best_copies.restore(best, self.best_epoch):
            warn(self.model.prog, f"the best epoch's weights (epoch {self.best_epoch}) are in neither the checkpoints "
                                  f"nor {best}: the best is taken from the epochs from here")
            self.best_map, self.best_epoch = -1.0, None
        if state.get("world_size") != s.size or state.get("per_rank_batch") != self.per_rank_batch:
            warn(self.model.prog, f"checkpoint was written with {state.get('world_size')} ranks x "
                                  f"{state.get('per_rank_batch')} images; now {s.size} x {self.per_rank_batch}: "
                                  "the epoch position is approximate")
        at = f"epoch {self.start_epoch}" + (f" iteration {self.skip_batches}" if self.skip_batches else "")
        s.log(f"{self.model.prog}: resumed from checkpoint {stem}.params at {at}"
              + (f"; the fine-tuning weights are not used ({self.source.given}): the checkpoint holds the network"
                 if self.source is not None else ""))

    def start_from(self, source):
        """The network from an earlier detector's weights (finetune.py), on every rank; the start log says which
        classes took their rows from it."""
        source_classes, mapping = finetune.start_from(self.mx, self.net, source, self.classes, self.model.class_rows)
        reused = [repr(self.classes[k]) for k in sorted(mapping)]
        fresh = [repr(name) for k, name in enumerate(self.classes) if k not in mapping]
        self.session.log(
            f"{self.model.prog}: fine-tuning from {source.describe()} ({len(source_classes)} classes): every weight "
            f"but the class rows comes from it; classes reused{' with the background row' if mapping else ''}: "
            f"{', '.join(reused) or 'none'}; classes that start fresh: {', '.join(fresh) or 'none'}")

    # ---- the run

    def run(self):
        config, model, s = self.config, self.model, self.session
        s.log(f"{model.prog}: model={self.net_name} world_size={s.size} devices_per_rank={len(self.ctx)} "
              f"context={self.ctx[0]} batch_per_device={config.batch_size} global_batch={self.global_batch} "
              f"base_lr={config.lr:g}/{cli.LR_REFERENCE_BATCH}img effective_lr={self.base_lr:g} "
              f"train_images={len(self.train_ds)} iterations_per_epoch={self.steps} "
              f"val_images={len(self.val_ds) if self.val_ds is not None else 0} short={config.short} "
              f"max_size={config.max_size} pretrained_base={self.pretrained_path or False} "
              f"static_alloc={config.static_alloc} "
              f"clip_gradient={config.clip_gradient if config.clip_gradient > 0 else 'none'} "
              f"bias_decay={config.bias_decay} amp={config.amp} "
              f"loader_workers={config.num_workers} cpu_ops={self.cpu_ops_in_use}")
        s.log(self.train_data.describe())
        s.log(f"{model.prog}: {inputs.describe_classes(self.train_data)}")
        s.log(f"{model.prog}: {self.shard.describe()}")
        if self.val_data is not None:
            s.log(self.val_data.describe())
        else:
            s.log(f"{model.prog}: no validation data (no val channel, no val* split next to the train split)")
        last_epoch = config.epochs - 1
        for epoch in range(self.start_epoch, config.epochs):
            skip = self.skip_batches if epoch == self.start_epoch else 0
            stopped_at, stop_now = self.train_epoch(epoch, skip)
            if stopped_at is not None:
                self.save_checkpoint(epoch + 1, batch=stopped_at)
                s.finish_stopped()
            record = {"epoch": epoch}
            # A stop requested during the epoch's last iteration skips validation: SageMaker allows
            # about two minutes between SIGTERM and SIGKILL.
            if not stop_now and self.val_ds is not None and \
                    ((epoch + 1) % config.val_interval == 0 or epoch == last_epoch):
                s.debugger.training(False)
                record.update(evaluation.validate(s, model, self.net, self.val_ds, self.val_tf, self.val_batchify,
                                                  self.ctx, config, epoch))
                stop_now = s.agree_stop("rcnn.stop.val")
            self.history.append(record)
            if record.get(model.main_metric) is not None and record[model.main_metric] > self.best_map:
                self.best_map, self.best_epoch = record[model.main_metric], epoch
                self.save_model("best")
                if s.rank == 0:
                    self.best_copies.keep(self.net, epoch)
            if epoch == last_epoch or stop_now or (config.save_interval and (epoch + 1) % config.save_interval == 0):
                self.save_checkpoint(epoch + 1)
            if stop_now and epoch < last_epoch:
                s.finish_stopped()
        self.save_model("final")
        if s.rank == 0:
            self.export()
        s.log(f"{model.prog}: done; model in {config.model_dir}")
        s.close()

    def train_epoch(self, epoch, skip):
        """One epoch from iteration `skip`. Returns (iterations done at an agreed mid-epoch stop or None,
        whether a stop was agreed at the epoch's end)."""
        config, model, s = self.config, self.model, self.session
        if config.hybridize:
            self.net.hybridize(static_alloc=config.static_alloc)  # (re)build the training graph
        vote = s.stop_vote("rcnn.stop")
        s.debugger.training()
        sums = [0.0] * len(model.loss_names)
        count = 0
        epoch_loss, epoch_count = 0.0, 0
        epoch_start = interval_start = time.time()
        iteration = skip
        for batch in self.train_loader(epoch, skip):
            lr = learning_rate(self.base_lr, epoch, iteration, self.steps, config.lr_decay_epoch, config.lr_decay,
                               config.lr_warmup, config.lr_warmup_factor)
            self.trainer.set_learning_rate(lr)
            values = self.train_step(batch, self.per_rank_batch, f"epoch {epoch} iteration {iteration + 1}")
            sums = [a + v for a, v in zip(sums, values)]
            count += 1
            iteration += 1
            epoch_loss += sum(values)
            epoch_count += 1
            if (config.log_interval and iteration % config.log_interval == 0) or iteration == self.steps:
                self.log_iterations(epoch, iteration, lr, [a / count for a in sums], count, interval_start)
                sums, count, interval_start = [0.0] * len(sums), 0, time.time()
            if vote.after_step() and iteration < self.steps:
                return iteration, True
        seconds = time.time() - epoch_start
        if epoch_count:
            loss, rate = s.mean_over_ranks([epoch_loss / epoch_count, epoch_count / max(seconds, 1e-9)], "rcnn.epoch")
            s.log(format_metrics([("epoch", epoch), ("train_loss", float(loss)),
                                  ("samples_per_sec", f"{rate * self.global_batch:.3f}"),
                                  ("epoch_sec", float(seconds))]))
        return None, vote.final()

    def log_iterations(self, epoch, iteration, lr, means, count, interval_start):
        s, names = self.session, self.model.loss_names
        means = s.mean_over_ranks(means, "rcnn.log")
        rate = count * self.global_batch / max(time.time() - interval_start, 1e-9)
        pairs = [("epoch", epoch), ("iter", iteration), ("loss", float(sum(means)))]
        pairs += [(name, float(v)) for name, v in zip(names, means)]
        pairs += [("lr", f"{lr:.6g}"), ("samples_per_sec", f"{rate:.3f}")]
        s.log(format_metrics(pairs))
        scalars = {"train/loss": float(sum(means)), "train/lr": lr, "train/samples_per_sec": rate}
        scalars.update({f"train/{n}": float(v) for n, v in zip(names, means)})
        s.tb.scalars(epoch * self.steps + iteration, scalars)

    # ---- outputs

    def save_checkpoint(self, epochs_done, batch=None):
        state = {"net": self.net_name, "per_rank_batch": self.per_rank_batch, "steps_per_epoch": self.steps,
                 "best_map": self.best_map, "best_epoch": self.best_epoch, "history": self.history}
        self.session.save_checkpoint(self.net, self.trainer, epochs_done, state, batch=batch)
        if self.session.rank == 0:
            in_use = {saved.get("best_epoch") for saved in self.session.checkpoints.states()} | {self.best_epoch}
            self.best_copies.prune(in_use)

    def save_model(self, tag):
        """Rank 0: <model>-<tag>.params and the files that describe it (model_files)."""
        s, config = self.session, self.config
        if s.rank != 0:
            return
        path = model_files.save(self.net, config.model_dir, self.net_name, tag, self.description(), self.classes,
                                self.train_data.category_ids, self.history, self.best_epoch, self.model.main_metric)
        s.log(f"{self.model.prog}: saved {path}")

    def description(self):
        """model.json: how to load the model, its classes, the run."""
        config, best = self.config, "best" if self.best_epoch is not None else "final"
        return {
            "model": self.net_name,
            "load": f"mxnet.gluon.SymbolBlock.imports('{model_files.EXPORT_NAME}-symbol.json', ['data'], "
                    f"'{model_files.EXPORT_NAME}-0000.params'): the {best} epoch's network",
            # GluonCV's network as the program built it (its target generator's constants: ignore_extra)
            "load_gluoncv": f"net = gluoncv.model_zoo.get_model('{self.net_name}', pretrained=False, "
                            "pretrained_base=False); net.initialize(); "
                            + ("" if self.zoo_classes else "net.reset_class(classes); ")
                            + f"net.load_parameters('{self.net_name}-{best}.params', ignore_extra=True)",
            "classes": self.classes, "category_ids": self.train_data.category_ids, "short": config.short,
            "max_size": config.max_size, "rpn_test_post_nms": config.rpn_test_post_nms,
            "best_map": self.best_map if self.best_epoch is not None else None, "best_epoch": self.best_epoch,
            "main_metric": self.model.main_metric, "epochs": config.epochs, "world_size": self.session.size,
            "global_batch": self.global_batch, "effective_lr": self.base_lr, "history": self.history,
        }

    def export(self):
        """Rank 0 at the end: the best epoch's network (the final one's without validation), exported for serving."""
        config = self.config
        tag = "best" if self.best_epoch is not None else "final"
        short = config.short[-1] if isinstance(config.short, tuple) else config.short
        with cpu_ops.mxnet_operators():  # the served model must load where the image's operators are not
            paths = model_files.export(self.mx, self.net, model_files.params_path(config.model_dir, self.net_name, tag),
                                       config.model_dir, self.ctx, max(GRAPH_SIDE, min(short, config.max_size)))
        model_files.describe(config.model_dir, self.description())
        self.session.log(f"{self.model.prog}: exported the {tag} epoch's network: {', '.join(paths)}")


def find_source(model, config):
    """The fine-tuning weights (finetune.Source), or None."""
    if not config.finetune_from:
        return None
    return finetune.find_source(config.finetune_from, model.model_name(config.network, config.use_fpn))


def prepare_mxnet(config, env, source=None):
    """Checks that need MXNet but no collective, run before Horovod starts: AMP needs a GPU; the backbone
    weights are in place (local rank 0 of each host downloads them, the others wait), unless the network starts from
    a detector's weights (`source`). Returns their path."""
    import mxnet as mx

    warnings.filterwarnings("ignore", category=DeprecationWarning)
    for message in IGNORED_WARNINGS:
        warnings.filterwarnings("ignore", message=message)
    if config.amp and mx.context.num_gpus() == 0:
        raise ProgramError("amp needs a GPU (mxnet.contrib.amp mixed precision): MXNet sees no GPU here; pass "
                           "--amp false for CPU training")
    if not config.pretrained_base or source is not None:
        return None
    return pretrained.ensure_pretrained_base(config.network, config.pretrained_dir, config.download_pretrained, env)


def main(model, argv=None):
    def train(stop):
        config = cli.parse_config(model, argv)
        env = sm.dist_env()
        cli.check_distribution(config.horovod, env)
        sm.check_single_process(model.prog, f"--kvstore {config.kvstore}", config.kvstore, env)
        # Everything up to the Session is local: a bad input fails on every rank before MPI is initialised.
        # Local rank 0 reads and checks the channels for its host's ranks: one read of the annotations per host
        # (a FastFile channel streams each first read from S3).
        train_data, val_data, source = host_once.once_per_host(
            "rcnn-inputs", lambda: (*inputs.load_inputs(model, config), find_source(model, config)), env,
            "read and check the input channels", stop)
        shard = inputs.train_shard(config, env, val_data, sm.input_data_config())
        sm.limit_cpu_threads(env.local_size)  # before mxnet is imported
        pretrained_path = prepare_mxnet(config, env, source)
        if config.num_workers is None:
            import mxnet as mx

            workers = launch.default_loader_workers(mx.context.num_gpus(), env.local_size, sm.host_cores())
            config = dataclasses.replace(config, num_workers=workers)
        session = Session(model.prog, env, stop, kvstore=config.kvstore)
        RcnnTraining(model, config, session, train_data, val_data, shard, pretrained_path, source).run()

    run_main(model.prog, train)
