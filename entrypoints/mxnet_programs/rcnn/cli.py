"""The R-CNN programs' hyperparameters and the frozen config built once from them and the environment.

Conventions: ``--lr`` is the rate for a global batch of 8 images (GluonCV's 0.00125 per image); the
optimizer uses ``lr x global_batch / 8``. ``--lr-decay-epoch 17,23`` counts epochs from 0, like the
log lines (``epoch=0 iter=1 ...``) and GluonCV's own scripts.
"""

import argparse
import math
import os

from mxnet_programs import hyperparameters as hp
from mxnet_programs import sagemaker_env as sm
from mxnet_programs.process import ProgramError
from mxnet_programs.rcnn.launch import CPU_LOADER_WORKERS, SINGLE_PROCESS_WHEN_FALSE

LR_REFERENCE_BATCH = 8  # --lr is the learning rate for this many images per iteration (global)
# The SageMaker SDK's channel for an earlier model (Estimator(model_uri=...), model_channel_name's default): the weights
# to fine-tune from.
FINETUNE_CHANNEL = "model"
# AWS's R-CNN Horovod walkthrough passes one channel, `data`, holding COCO 2017 as COCO ships it.
DATA_CHANNEL = "data"
DATA_TRAIN_SPLIT, DATA_VAL_SPLIT = "train2017", "val2017"


def _short_side(text):
    """N, or MIN,MAX for a random short side per training image (validation uses MAX)."""
    try:
        parts = [int(p) for p in hp.list_text(text).split(",") if p.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid short side {text!r}: use N or MIN,MAX") from None
    if len(parts) not in (1, 2) or min(parts) < 32 or (len(parts) == 2 and parts[0] > parts[1]):
        raise argparse.ArgumentTypeError(f"invalid short side {text!r}: use N or MIN,MAX (each >= 32)")
    return parts[0] if len(parts) == 1 else tuple(parts)


def _epoch_list(text):
    try:
        values = sorted(int(p) for p in hp.list_text(text).split(",") if p.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid epoch list {text!r}: use comma-separated integers") from None
    if any(v < 0 for v in values):
        raise argparse.ArgumentTypeError(f"invalid epoch list {text!r}: epochs must be >= 0")
    return tuple(values)


def _clip_gradient(text):
    """C > 0 clips, any other number (GluonCV's default -1) does not."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"invalid clip value {text!r}: use a finite number (<= 0: no clipping)")
    return value


def build_parser(model):
    parser = hp.HyperparameterParser(prog=model.prog, description=model.description)
    g = parser.add_argument_group("training")
    g.add_argument("--epochs", type=hp.positive_int, default=26, help="number of epochs")
    g.add_argument("--batch-size", type=hp.positive_int, default=1,
                   help="images per device (GPU, or the CPU of a rank) per iteration")
    g.add_argument("--lr", type=hp.positive_float, default=0.01,
                   help=f"learning rate for a global batch of {LR_REFERENCE_BATCH} images; the optimizer uses "
                        f"lr x global_batch / {LR_REFERENCE_BATCH} (global_batch = batch size x devices x ranks)")
    g.add_argument("--lr-warmup", type=hp.non_negative_int, default=1000,
                   help="linear warmup length in iterations (0: none)")
    g.add_argument("--lr-warmup-factor", type=hp.non_negative_float, default=1.0 / 3.0,
                   help="the warmup starts at lr x this factor")
    g.add_argument("--lr-decay-epoch", type=_epoch_list, default="17,23",
                   help="comma list of epoch indexes (from 0) at which the lr is multiplied by --lr-decay")
    g.add_argument("--lr-decay", type=hp.non_negative_float, default=0.1, help="lr decay factor")
    g.add_argument("--wd", type=hp.non_negative_float, default=1e-4,
                   help="weight decay (on biases too with --bias-decay)")
    g.add_argument("--bias-decay", type=hp.str2bool, default=False,
                   help="weight decay on the biases as well (GluonCV's train_faster_rcnn.py, and the 2018 scripts "
                        "behind its published COCO results, decay them; its train_mask_rcnn.py does not)")
    g.add_argument("--momentum", type=hp.non_negative_float, default=0.9, help="SGD momentum")
    g.add_argument("--seed", type=int, default=233, help="random seed (same on all ranks)")
    g.add_argument("--amp", type=hp.str2bool, default=False,
                   help="mixed precision as GluonCV's --amp: mxnet.contrib.amp, and the network's parameters in "
                        "float16 but BatchNorm's and the box encoder's (GPU only)")
    g.add_argument("--max-iterations-per-epoch", type=hp.non_negative_int, default=0,
                   help="cap on iterations per epoch, for smoke tests and benchmarks (0: the whole shard)")
    g.add_argument("--num-workers", type=hp.non_negative_int, default=None,
                   help="DataLoader worker processes per rank (0: load in the training process) [default: on a GPU "
                        f"host, its cores per rank minus one; on a CPU host {CPU_LOADER_WORKERS}]")
    g.add_argument("--hybridize", type=hp.str2bool, default=True, help="hybridize the network")
    g.add_argument("--static-alloc", type=hp.str2bool, nargs="?", const=True, default=False,
                   help="hybridize with static memory allocation, in training and validation (GluonCV's "
                        "--static-alloc; alone it means true)")
    g.add_argument("--cpu-ops", type=hp.str2bool, default=True,
                   help="on CPU, the image's ROIAlign and box_nms (ROIAlignCPU, BoxNMSCPU: MXNet's values in less "
                        "time); false: MXNet's own")
    g.add_argument("--clip-gradient", type=_clip_gradient, default=-1.0,
                   help="clip every element of the batch-averaged gradient to [-C, C] before the SGD update "
                        "(MXNet's optimizer clip_gradient, GluonCV Mask R-CNN's --clip-gradient; weight decay is "
                        "added after clipping); <= 0: no clipping")

    g = parser.add_argument_group("model")
    g.add_argument("--network", default="resnet50_v1b",
                   help=f"backbone; the GluonCV model is {model.family}[_fpn]_<network>_coco")
    g.add_argument("--use-fpn", type=hp.str2bool, default=False, help="feature pyramid network variant")
    g.add_argument("--short", type=_short_side, default=800,
                   help="image short side in pixels, or MIN,MAX for a random short side in training")
    g.add_argument("--max-size", type=hp.positive_int, default=1333, help="cap on the image long side")
    g.add_argument("--pretrained-base", type=hp.str2bool, default=True,
                   help="start from ImageNet backbone weights <network>-<hash>.params in $MXNET_HOME/models")
    g.add_argument("--download-pretrained", type=hp.str2bool, default=True,
                   help="if the backbone weights are missing, try GluonCV's model store (bounded by timeouts; "
                        "fails fast without network)")
    g.add_argument("--finetune-from", default=None,
                   help="start from an earlier detector's weights, of the same architecture, with this job's classes "
                        "(GluonCV's reset_class rule: classes of the same name keep their rows): this image's model "
                        "output (its directory or model.tar.gz) or a GluonCV params file (COCO's 80 classes unless a "
                        f"classes.json lies beside it) [default: the '{FINETUNE_CHANNEL}' channel when given "
                        "(the SDK's model_uri), else none]")
    g.add_argument("--rpn-test-post-nms", type=hp.positive_int, default=1000,
                   help="proposals kept per image in validation (GluonCV's default 1000; lower is much faster on "
                        "CPU)")

    g = parser.add_argument_group("distribution")
    g.add_argument("--horovod", type=hp.str2bool, default=True,
                   help="one process per device under MPI with Horovod; false: one process over all devices of "
                        "a single host with MXNet's kvstore")
    g.add_argument("--kv-store", default="device", choices=["device", "local"],
                   help="kvstore for --horovod false (the same as --kvstore device|local)")
    hp.add_kvstore_argument(g)

    g = parser.add_argument_group("validation, checkpoints and logs")
    g.add_argument("--val-interval", type=hp.positive_int, default=1,
                   help="validate every N epochs (and after the last one)")
    g.add_argument("--save-interval", type=hp.non_negative_int, default=1,
                   help="checkpoint every N epochs (and after the last one; 0: only after the last one)")
    g.add_argument("--log-interval", type=hp.non_negative_int, default=100,
                   help="log a training line every N iterations and at the end of each epoch (0: only then)")
    g.add_argument("--keep-checkpoints", type=hp.positive_int, default=2, help="checkpoints to keep")
    g.add_argument("--resume", type=hp.str2bool, default=True,
                   help="resume from the newest checkpoint in the checkpoint dir")
    g.add_argument("--tensorboard", type=hp.str2bool, default=True, help="write TensorBoard scalars (rank 0)")
    g.add_argument("--tensorboard-dir", default=None, help="TensorBoard log dir [default: "
                   f"tensorboardoutputconfig.json's LocalPath, else {sm.SM_TENSORBOARD_DIR_DEFAULT}]")

    g = parser.add_argument_group("paths (flag, else SageMaker env var, else SageMaker default)")
    g.add_argument("--train-dir", default=None,
                   help="train channel [default: $SM_CHANNEL_TRAIN or $SM_INPUT_DIR/data/train]")
    g.add_argument("--val-dir", default=None,
                   help="validation channel [default: $SM_CHANNEL_VAL or $SM_INPUT_DIR/data/val; without one, "
                        "a val* split inside the train channel, else no validation]")
    g.add_argument("--train-split", default=None,
                   help="train split name, e.g. train2017 [default: autodetected from annotations/instances_*.json]")
    g.add_argument("--val-split", default=None, help="validation split name [default: autodetected]")
    g.add_argument("--pretrained-dir", default=None,
                   help="dir holding <network>-<hash>.params [default: $SM_CHANNEL_PRETRAINED or "
                        "$SM_INPUT_DIR/data/pretrained]")
    g.add_argument("--model-dir", default=None,
                   help=f"model output dir [default: $SM_MODEL_DIR or {sm.SM_MODEL_DIR_DEFAULT}]")
    g.add_argument("--checkpoint-dir", default=None,
                   help=f"checkpoint dir [default: $SM_CHECKPOINT_DIR, else checkpointconfig.json's LocalPath, "
                        f"else {sm.SM_CHECKPOINT_DIR_DEFAULT}]")
    g.add_argument("--output-data-dir", default=None,
                   help=f"validation results JSON [default: $SM_OUTPUT_DATA_DIR or {sm.SM_OUTPUT_DATA_DIR_DEFAULT}]")
    return parser


def train_source(flag_dir, environ=None):
    """(channel name, directory) of the training data: --train-dir, else the `train` channel, else the
    walkthrough's `data` channel (COCO's own layout). Both channels at once is ambiguous: an error."""
    environ = os.environ if environ is None else environ
    if flag_dir:
        return "train", flag_dir
    has_train, has_data = sm.channel_exists("train", environ), sm.channel_exists(DATA_CHANNEL, environ)
    if has_train and has_data:
        raise ProgramError(
            f"both a 'train' and a '{DATA_CHANNEL}' channel were given: pass one of them, either 'train' (and "
            f"optionally 'val') or '{DATA_CHANNEL}' in COCO's layout (annotations/, {DATA_TRAIN_SPLIT}/, "
            f"{DATA_VAL_SPLIT}/)")
    if has_data:
        return DATA_CHANNEL, sm.channel_dir(DATA_CHANNEL, None, environ)
    return "train", sm.channel_dir("train", None, environ)


def check_distribution(horovod, env, environ=None):
    """--horovod false runs one process on one host (the rule is declared once, in launch.py, where the launcher
    applies it before any rank starts). This is the program's own check of it, for a program started some other
    way (a user's own mpirun): refused for a multi-host job or several ranks, before anything is loaded."""
    if horovod:
        return
    what = SINGLE_PROCESS_WHEN_FALSE["horovod"]
    hosts = sm.job_hosts(environ)
    if len(hosts) > 1:
        raise ProgramError(
            f"--horovod false runs {what}, on one host, but this job spans {len(hosts)} hosts "
            f"({', '.join(hosts)}): use --horovod true for multi-host training or a single instance")
    if env.size > 1:
        raise ProgramError(f"--horovod false runs {what}, but {env.size} ranks were launched")


def choose_kvstore(args, environ):
    """--kvstore (sagemaker_env.kvstore); --horovod false is --kvstore with --kv-store's value (device or local),
    which another --kvstore contradicts."""
    if args.horovod:
        return sm.kvstore(args.kvstore, environ)
    if args.kvstore not in (None, args.kv_store):
        raise ProgramError(f"--horovod false trains with --kv-store {args.kv_store}, but --kvstore is "
                           f"{args.kvstore}: pass one of them")
    return args.kv_store


def parse_config(model, argv=None, environ=None):
    """The frozen config: the hyperparameters with every path resolved (flag, env, SageMaker default)."""
    environ = os.environ if environ is None else environ
    args = build_parser(model).parse_args(argv)
    model_dir, checkpoint_dir = sm.output_dirs(model.prog, args.model_dir, args.checkpoint_dir, environ)
    train_channel, train_dir = train_source(args.train_dir, environ)
    return hp.frozen_config(
        "RcnnConfig", args, model_dir=model_dir, checkpoint_dir=checkpoint_dir,
        tensorboard_dir=sm.tensorboard_dir(args.tensorboard_dir, environ),
        output_data_dir=sm.resolve_path(args.output_data_dir, "SM_OUTPUT_DATA_DIR", sm.SM_OUTPUT_DATA_DIR_DEFAULT,
                                        environ),
        kvstore=choose_kvstore(args, environ), train_channel=train_channel, train_dir=train_dir,
        val_dir_explicit=bool(args.val_dir) or sm.channel_exists("val", environ),
        val_dir=sm.channel_dir("val", args.val_dir, environ),
        pretrained_dir=sm.channel_dir("pretrained", args.pretrained_dir, environ),
        finetune_from=args.finetune_from or (sm.channel_dir(FINETUNE_CHANNEL, None, environ)
                                             if sm.channel_exists(FINETUNE_CHANNEL, environ) else None))
