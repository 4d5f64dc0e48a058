"""cli: the R-CNN hyperparameters, the frozen config, where the training data comes from, --horovod false."""

import dataclasses
import json
import re
import subprocess
import sys

import pytest
from mxnet_programs.process import ProgramError
from mxnet_programs.rcnn import cli, launch
from mxnet_programs.rcnn.faster_rcnn import MODEL as FASTER
from mxnet_programs.rcnn.mask_rcnn import MODEL as MASK
from mxnet_programs.sagemaker_env import DistEnv

from programs.rcnn import helpers as h


def test_horovod_false_rejects_several_hosts():
    with pytest.raises(ProgramError, match="this job spans 2 hosts"):
        cli.check_distribution(False, DistEnv(), {"SM_HOSTS": '["algo-1", "algo-2"]'})
    with pytest.raises(ProgramError, match="2 ranks were launched"):
        cli.check_distribution(False, DistEnv(0, 2, 0, 2), {})
    cli.check_distribution(False, DistEnv(), {"SM_HOSTS": '["algo-1"]'})
    cli.check_distribution(True, DistEnv(), {"SM_HOSTS": '["algo-1", "algo-2"]'})


def test_horovod_false_counts_the_hosts_of_its_own_job_in_a_heterogeneous_cluster():
    hosts = '["algo-1", "algo-2", "algo-3"]'
    # algo-3 is outside the distribution groups: it runs alone.
    outside = {"SM_HOSTS": hosts, "SM_CURRENT_HOST": "algo-3",
               "SM_TRAINING_ENV": '{"distribution_hosts": ["algo-1", "algo-2"]}'}
    cli.check_distribution(False, DistEnv(), outside)
    with pytest.raises(ProgramError, match="this job spans 2 hosts \\(algo-1, algo-2\\)"):
        cli.check_distribution(False, DistEnv(), {**outside, "SM_CURRENT_HOST": "algo-1"})
    solo = {"SM_HOSTS": hosts, "SM_CURRENT_HOST": "algo-3", "SM_TRAINING_ENV": '{"distribution_hosts": ["algo-3"]}'}
    cli.check_distribution(False, DistEnv(), solo)


def _channels(tmp_path, **dirs):
    env = {"SM_INPUT_DIR": str(tmp_path / "input"), "SM_CHANNELS": json.dumps(sorted(dirs))}
    env.update({f"SM_CHANNEL_{name.upper()}": str(path) for name, path in dirs.items()})
    return env


def test_train_source_prefers_the_flag_then_train_then_data(tmp_path):
    assert cli.train_source(None, _channels(tmp_path, data="/d")) == ("data", "/d")
    assert cli.train_source(None, _channels(tmp_path, train="/t", val="/v")) == ("train", "/t")
    assert cli.train_source("/flag", _channels(tmp_path, data="/d")) == ("train", "/flag")
    assert cli.train_source(None, _channels(tmp_path)) == ("train", str(tmp_path / "input" / "data" / "train"))


def test_train_and_data_channels_together_are_refused(tmp_path):
    with pytest.raises(ProgramError, match=r"both a 'train' and a 'data' channel were given"):
        cli.train_source(None, _channels(tmp_path, train="/t", data="/d"))


def test_hyperparameters_parse_like_sagemaker_sends_them():
    parser = cli.build_parser(FASTER)
    args = parser.parse_args(["--batch_size", "2", "--use_fpn", "True", "--pretrained-base", "0",
                              "--lr-decay-epoch", "8,4", "--short", "640,800", "--sagemaker_program", "x.py"])
    assert (args.batch_size, args.use_fpn, args.pretrained_base) == (2, True, False)
    assert args.lr_decay_epoch == (4, 8) and args.short == (640, 800)
    defaults = parser.parse_args([])
    assert (defaults.horovod, defaults.pretrained_base, defaults.amp, defaults.lr_decay_epoch) == \
        (True, True, False, (17, 23))


def test_list_hyperparameters_as_the_toolkit_passes_json_lists():
    # hyperparameters {"lr-decay-epoch": [8, 4], "short": [640, 800]}: the toolkit passes Python's str() of each.
    args = cli.build_parser(FASTER).parse_args(["--lr-decay-epoch", "[8, 4]", "--short", "[640, 800]",
                                                           "--use-fpn", "True"])
    assert args.lr_decay_epoch == (4, 8) and args.short == (640, 800) and args.use_fpn is True


def test_bad_boolean_names_key_and_value(tmp_path):
    out = subprocess.run([sys.executable, str(h.SCRIPTS["faster"]), "--use-fpn", "maybe"],
                         capture_output=True, text=True, timeout=60, env=h.base_env(tmp_path))
    assert out.returncode == 2
    assert "--use-fpn" in out.stderr and "'maybe'" in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_config_resolves_paths_once_and_is_frozen(tmp_path):
    env = {"SM_INPUT_DIR": str(tmp_path), "SM_MODEL_DIR": "/m", "SM_CHANNEL_DATA": "/coco", "SM_CHANNELS": '["data"]'}
    config = cli.parse_config(MASK, ["--epochs", "2"], env)
    assert (config.epochs, config.model_dir, config.checkpoint_dir) == (2, "/m", "/opt/ml/checkpoints")
    assert (config.train_channel, config.train_dir, config.val_dir_explicit) == ("data", "/coco", False)
    assert config.pretrained_dir == str(tmp_path / "data" / "pretrained")
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.epochs = 3


def test_help_lists_hyperparameters_with_defaults(tmp_path):
    out = subprocess.run([sys.executable, str(h.SCRIPTS["mask"]), "--help"], capture_output=True, text=True,
                         timeout=60, env=h.base_env(tmp_path))
    assert out.returncode == 0
    text = re.sub(r"\s+", " ", out.stdout)
    for flag, default in (("--epochs", "26"), ("--batch-size", "1"), ("--lr", "0.01"), ("--amp", "False"),
                          ("--val-interval", "1"), ("--network", "resnet50_v1b"),
                          ("--use-fpn", "False"), ("--short", "800"), ("--max-size", "1333"),
                          ("--pretrained-base", "True"), ("--lr-warmup", "1000"), ("--lr-decay-epoch", "17,23"),
                          ("--lr-decay", "0.1"), ("--wd", "0.0001"), ("--momentum", "0.9"), ("--seed", "233"),
                          ("--log-interval", "100"), ("--horovod", "True"), ("--max-iterations-per-epoch", "0"),
                          ("--save-interval", "1")):
        assert re.search(re.escape(flag) + r" \S+ .*?\(default: " + re.escape(default) + r"\)", text), flag
    for flag in ("--checkpoint-dir", "--model-dir", "--lr-warmup-factor"):
        assert flag in text
    assert "on a GPU host, its cores per rank minus one; on a CPU host 4" in text


def test_loader_workers_default_to_the_cores_a_gpu_rank_leaves_free():
    assert launch.default_loader_workers(gpu_count=8, ranks_per_host=8, cores=96) == 11  # ml.p3dn / p4d.24xlarge
    assert launch.default_loader_workers(gpu_count=1, ranks_per_host=1, cores=8) == 7
    assert launch.default_loader_workers(gpu_count=4, ranks_per_host=4, cores=4) == 1  # never 0: at least one worker
    assert launch.default_loader_workers(gpu_count=0, ranks_per_host=2, cores=2) == launch.CPU_LOADER_WORKERS == 4
    assert cli.parse_config(FASTER, [], {}).num_workers is None  # resolved by training.main, once MXNet is in
    assert cli.parse_config(FASTER, ["--num-workers", "0"], {}).num_workers == 0


def test_kvstore_and_horovod_false():
    config = cli.parse_config(FASTER, ["--kvstore", "dist_sync"], {"DMLC_ROLE": "worker"})
    assert config.kvstore == "dist_sync"
    assert cli.parse_config(FASTER, [], {}).kvstore == "horovod"
    assert cli.parse_config(FASTER, [], {"DMLC_ROLE": "worker"}).kvstore == "dist_sync"
    assert cli.parse_config(FASTER, ["--horovod", "false", "--kv-store", "local"], {}).kvstore == "local"
    assert cli.parse_config(FASTER, ["--horovod", "false", "--kvstore", "device"], {}).kvstore == "device"
    with pytest.raises(ProgramError, match="--horovod false trains with --kv-store device, but --kvstore is dist_sync"):
        cli.parse_config(FASTER, ["--horovod", "false", "--kvstore", "dist_sync"], {"DMLC_ROLE": "worker"})


def test_gluoncv_static_alloc_and_clip_gradient_parse_as_its_scripts_take_them():
    parser = cli.build_parser(MASK)
    defaults = parser.parse_args([])
    assert defaults.static_alloc is False and defaults.clip_gradient == -1.0  # GluonCV's defaults: off
    # GluonCV's command line as AWS's Mask R-CNN walkthrough writes it: a bare --static-alloc, --clip-gradient 1.5.
    args = parser.parse_args(["--static-alloc", "--clip-gradient", "1.5", "--lr", "0.02"])
    assert (args.static_alloc, args.clip_gradient, args.lr) == (True, 1.5, 0.02)
    # As SageMaker sends hyperparameters: key and value, either spelling.
    args = parser.parse_args(["--static_alloc", "False", "--clip_gradient", "-1"])
    assert (args.static_alloc, args.clip_gradient) == (False, -1.0)
    config = cli.parse_config(FASTER, ["--static-alloc", "true", "--clip-gradient", "5"], {})
    assert (config.static_alloc, config.clip_gradient) == (True, 5.0)


def test_the_images_cpu_operators_are_on_unless_cpu_ops_is_false():
    assert cli.parse_config(FASTER, [], {}).cpu_ops is True
    assert cli.parse_config(MASK, ["--cpu_ops", "False"], {}).cpu_ops is False  # as SageMaker sends it


@pytest.mark.parametrize("argv", [["--clip-gradient", "nan"], ["--clip-gradient", "inf"], ["--clip-gradient", "x"],
                                  ["--static-alloc", "maybe"]])
def test_bad_static_alloc_or_clip_gradient_is_a_usage_error(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.build_parser(MASK).parse_args(argv)
    assert exit_info.value.code == 2
    assert argv[0] in capsys.readouterr().err
