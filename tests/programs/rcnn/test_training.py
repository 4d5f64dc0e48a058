"""training (the R-CNN programs end to end): real training runs on tiny synthetic COCO (CPU): 1 process and 2 ranks, validation, outputs, metric regexes
against the real output, checkpoints, resume, SIGTERM, a failing DataLoader worker, the non-Horovod baseline, how many DataLoader workers
a rank runs by default, GluonCV's --clip-gradient and --static-alloc taking effect.

Each run is a few iterations of ResNet-50 R-CNN, so these are marked slow. The runs that check wiring (one process
trains, validates and resumes; 2 ranks and the FPN variant; the sharded channel; the baseline; SIGTERM) run at
helpers.py's cheap settings (WIRING_ARGS: short side 128, and SMALL_MODEL's 8 RoIs per image through recorded_run.py,
the program's main): about 1.5 s an image-iteration instead of 10 at short side 256 with the model zoo's 128 RoIs.
"""

import json
import os
import re
import signal

import faster_rcnn
import mask_rcnn
import pytest
from mxnet_programs.rcnn import data as rcnn_data
from mxnet_programs.rcnn.mask_rcnn import MODEL as MASK
from sagemaker_mxnet_data import synthetic_coco
from sagemaker_mxnet_data.coco_categories import COCO_CATEGORIES, COCO_CLASS_NAMES
from sagemaker_mxnet_horovod.parse.launch_rules import load_launch_rules

from programs.helpers import recorded_first_step, recorded_run
from programs.rcnn import helpers as h

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("needs_mxnet")]
MODULES = {"faster": faster_rcnn, "mask": mask_rcnn}
NETS = {"faster": "faster_rcnn_resnet50_v1b_coco", "mask": "mask_rcnn_resnet50_v1b_coco"}
ITER_LINE = re.compile(r"^epoch=(\d+) iter=(\d+) loss=\S+ ")
VAL_LINE = re.compile(r"^epoch=(\d+) val_bbox_map=(\S+)")


def iter_lines(stdout):
    return [(int(m.group(1)), int(m.group(2))) for m in map(ITER_LINE.match, stdout.splitlines()) if m]


def assert_metric_definitions_match(model, stdout):
    """Every metric regex of the entrypoint captures a number from the real output."""
    for definition in MODULES[model].METRIC_DEFINITIONS:
        found = re.findall(definition["Regex"], stdout)
        assert found, f"{definition['Name']}: {definition['Regex']!r} matched nothing in\n{stdout[-3000:]}"
        for value in found:
            float(value)


def dirs_args(workdir):
    return ["--checkpoint-dir", str(workdir / "checkpoints"), "--model-dir", str(workdir / "model")]


@pytest.fixture(scope="module")
def train_only(coco, tmp_path_factory):
    """The synthetic data without its val split (runs that should not spend time validating)."""
    data = h.copy_coco(coco, tmp_path_factory.mktemp("train_only") / "coco")
    (data / "annotations" / "instances_val2017.json").unlink()
    return data


@pytest.fixture(scope="module")
def baseline(coco, module_tmp):
    """(job, data): one finished 1-iteration Faster R-CNN run that three tests read, each its own part of it (one
    run instead of three: each cost a process start, MXNet's import and a ResNet-50 iteration, 62-88 s on the shared
    2 cores): AWS's R-CNN walkthrough's one 'data' channel in COCO's own layout, --horovod false with horovod
    unimportable, and no --num-workers."""
    workdir = module_tmp("baseline")
    blocker = workdir / "block"
    (blocker / "horovod").mkdir(parents=True)
    (blocker / "horovod" / "__init__.py").write_text("raise RuntimeError('horovod must not be imported')\n")
    env = {"SM_CHANNEL_DATA": str(coco), "SM_CHANNELS": '["data"]', "PYTHONPATH": str(blocker),
           "SM_HOSTS": '["algo-1"]'}
    flag = h.WIRING_ARGS.index("--num-workers")
    args = [*h.WIRING_ARGS[:flag], *h.WIRING_ARGS[flag + 2:], "--horovod", "false", "--epochs", "1",
            "--max-iterations-per-epoch", "1"]
    return h.run_cheap("faster", workdir / "job", args, env=env, timeout=900), coco


def test_data_channel_in_coco_layout_trains_on_train2017_and_validates_on_val2017(baseline):
    """AWS's R-CNN walkthrough: estimator.fit({'data': 's3://BUCKET/data'}) with COCO's own layout."""
    job, coco = baseline
    assert job.returncode == 0, job.explain()
    out = job.stdout
    assert f"train: {coco / 'annotations' / 'instances_train2017.json'} (8 images" in out
    assert f"val: {coco / 'annotations' / 'instances_val2017.json'} (2 images" in out
    assert "channel 'data' is FullyReplicated" in out
    assert iter_lines(out) == [(0, 1)]
    assert re.search(r"^epoch=0 val_bbox_map=\S+ val_images=2 ", out, re.M)


def test_horovod_false_baseline_never_imports_horovod(baseline):
    job, _ = baseline
    assert job.returncode == 0, job.explain()
    assert "world_size=1 devices_per_rank=1" in job.stdout
    assert iter_lines(job.stdout) == [(0, 1)]
    assert (job.model_dir / "faster_rcnn_resnet50_v1b_coco-final.params").is_file()


def test_without_num_workers_a_cpu_rank_runs_the_loader_workers_the_launcher_counts(baseline):
    # The launcher sizes /dev/shm by the DataLoader workers the launch module declares (rcnn/launch.py, loaded by its
    # file path); the program must run as many when --num-workers is not given: 4 per rank on a CPU host.
    argument, default = load_launch_rules("faster_rcnn", str(h.ENTRYPOINTS)).loader_workers
    assert argument == "num-workers" and default(gpu_count=0, ranks_per_host=1, cores=2) == 4
    job, _ = baseline
    assert job.returncode == 0, job.explain()
    assert re.search(r"^faster_rcnn: model=.* loader_workers=4\b", job.stdout, re.M), job.explain()


def test_on_cpu_the_program_trains_with_the_images_operators_and_exports_mxnets(baseline):
    # ROIAlignCPU and BoxNMSCPU (docker/mxnet-ops/) in training and validation; the served model must load without
    # their library
    job, _ = baseline
    assert job.returncode == 0, job.explain()
    assert re.search(r"^faster_rcnn: model=.* cpu_ops=ROIAlignCPU,BoxNMSCPU$", job.stdout, re.M), job.explain()
    ops = {node["op"] for node in json.loads((job.model_dir / "model-symbol.json").read_text())["nodes"]}
    assert {"_contrib_ROIAlign", "_contrib_box_nms"} <= ops and not {"ROIAlignCPU", "BoxNMSCPU"} & ops, sorted(ops)


@pytest.mark.parametrize("model", ["faster", "mask"])
def test_one_process_trains_validates_and_resumes(coco, first_epoch, tmp_path, model):
    prog, net = f"{model}_rcnn", NETS[model]
    args = [*h.WIRING_ARGS, "--max-iterations-per-epoch", "2"]
    first = first_epoch(model)  # [*args, "--epochs", "1"], with a Debugger hook configuration (conftest.py)
    workdir = first.workdir
    assert first.returncode == 0, first.explain()
    out = first.stdout
    assert f"{prog}: model={net} world_size=1" in out
    assert "effective_lr=0.00125" in out  # 0.01 per 8 images x 1 image
    assert iter_lines(out) == [(0, 1), (0, 2)]
    (val,) = [m for m in map(VAL_LINE.match, out.splitlines()) if m]
    assert val.group(1) == "0" and 0.0 <= float(val.group(2)) <= 1.0
    if model == "mask":
        assert re.search(r"^epoch=0 val_bbox_map=\S+ val_segm_map=\S+ val_images=2 ", out, re.M)
    assert_metric_definitions_match(model, out)
    assert {p.name for p in first.model_dir.iterdir()} >= {f"{net}-final.params", f"{net}-best.params", "model.json"}
    info = json.loads((first.model_dir / "model.json").read_text())
    assert info["model"] == net and info["best_epoch"] == 0 and info["classes"] == COCO_CLASS_NAMES
    # COCO's own 80 classes, as COCO numbers them; each class's AP in the log (the val images show person, car, dog)
    assert json.loads((first.model_dir / "classes.json").read_text()) == \
        [{"id": cid, "name": name} for cid, name, _ in COCO_CATEGORIES]
    class_ap = json.loads((first.model_dir / "metrics.json").read_text())["best"]["class_ap"]
    assert [e["class"] for e in class_ap] == COCO_CLASS_NAMES
    for definition in MODULES[model].MODEL.class_metric_definitions(["person", "car", "dog", "bicycle"]):
        found = re.findall(definition["Regex"], out)
        assert len(found) == (0 if definition["Name"].endswith(":bicycle") else 1), (definition, out[-3000:])
    if model == "faster":  # Mask R-CNN's export: test_model_files.py
        h.check_export(first.model_dir, sorted((coco / "val2017").iterdir())[0], tmp_path)
    state = json.loads((first.checkpoint_dir / f"{net}-epoch-0001.json").read_text())
    assert state["epoch"] == 1 and state["batch"] is None
    assert (workdir / "output" / "data" / f"{prog}_val_results.json").is_file()
    assert any(n.startswith("events.out.tfevents") for n in os.listdir(workdir / "tensorboard"))
    assert not [f for f in os.listdir(first.model_dir) if f.startswith(".tmp")]

    best = f"{net}-best.params"
    assert (first.checkpoint_dir / f"{net}-best-epoch-0001.params").read_bytes() == \
        (first.model_dir / best).read_bytes()
    # One more epoch (without the hook) as SageMaker restarts a job (Spot capacity reclaimed): the checkpoints kept,
    # /opt/ml/model new and empty. It continues at epoch 1 from the checkpoint; epoch 1 does not beat epoch 0 (mAP 0
    # at these settings), so the export at the end is epoch 0's network, whose weights only the checkpoints kept.
    restarted_model_dir = workdir / "model-after-restart"
    second = h.run_cheap(model, workdir, [*args, "--epochs", "2"],
                         env={**h.channel_env(coco), "SM_MODEL_DIR": str(restarted_model_dir)}, timeout=900)
    assert second.returncode == 0, second.explain()
    assert json.loads((restarted_model_dir / "model.json").read_text())["best_epoch"] == 0
    assert (restarted_model_dir / best).read_bytes() == (first.model_dir / best).read_bytes()
    assert {p.name for p in restarted_model_dir.iterdir()} >= {best, f"{net}-final.params", "model-symbol.json"}
    assert re.search(rf"{prog}: resumed from checkpoint \S+{net}-epoch-0001\.params at epoch 1$", second.stdout,
                     re.M), second.stdout
    assert iter_lines(second.stdout) == [(1, 1), (1, 2)]
    assert re.search(r"^epoch=1 val_bbox_map=", second.stdout, re.M)
    state = json.loads((second.checkpoint_dir / f"{net}-epoch-0002.json").read_text())
    assert state["epoch"] == 2 and [r["epoch"] for r in state["history"]] == [0, 1]
    assert sorted(p.name for p in second.checkpoint_dir.glob("*best*")) == [f"{net}-best-epoch-0001.params"]


@pytest.fixture(scope="module")
def two_ranks_fpn(coco, module_tmp, needs_horovod):
    """two_ranks_fpn(model) -> the finished job: `model`'s FPN variant on 2 ranks for 1 iteration, then validated. Run
    once per model, on first use, for test_two_ranks_train_and_validate and test_fpn_variant_trains_and_validates (one
    2-rank run where there were a 2-rank run of the C4 network and a 1-rank run of the FPN variant; the C4 networks
    train on 2 ranks in test_training_distributed.py and the SIGTERM tests, and validate on 2 hosts in
    tests/integration/test_rcnn_cluster.py)."""
    jobs = {}

    def run(model):
        if model not in jobs:
            workdir = module_tmp(f"two-ranks-fpn-{model}")
            args = [*h.WIRING_ARGS, "--use-fpn", "true", "--epochs", "1", "--max-iterations-per-epoch", "1",
                    *dirs_args(workdir)]
            jobs[model] = h.run_cheap(model, workdir, args, env=h.channel_env(coco), ranks=2, timeout=900)
        return jobs[model]

    return run


@pytest.mark.mpi
@pytest.mark.parametrize("model", ["faster", "mask"])
def test_two_ranks_train_and_validate(two_ranks_fpn, model):
    prog, net = f"{model}_rcnn", f"{model}_rcnn_fpn_resnet50_v1b_coco"
    job = two_ranks_fpn(model)
    assert job.returncode == 0, job.explain()
    out = job.stdout
    assert f"{prog}: model={net} world_size=2" in out and "global_batch=2 " in out
    assert "effective_lr=0.0025" in out  # linear scaling with the global batch
    assert iter_lines(out) == [(0, 1)]  # rank 0 logs, once
    assert len(re.findall(r"^epoch=0 val_bbox_map=\S+.* val_images=2 ", out, re.M)) == 1
    assert_metric_definitions_match(model, out)
    assert (job.model_dir / f"{net}-final.params").is_file()
    assert (job.checkpoint_dir / f"{net}-epoch-0001.json").is_file()


@pytest.mark.mpi
def test_two_ranks_split_a_sharded_train_channel_by_local_rank(train_only, tmp_path, needs_horovod):
    """2 ranks on one host, the train channel ShardedByS3Key: the ranks agree on the iteration count (an
    allgather: hosts' parts may differ) and rank 0 says how the channel was split."""
    config = {"train": {"TrainingInputMode": "File", "S3DistributionType": "ShardedByS3Key"}}
    env = dict(h.channel_env(train_only), SM_INPUT_DATA_CONFIG=json.dumps(config))
    job = h.run_cheap("faster", tmp_path, [*h.WIRING_ARGS, "--epochs", "1", "--max-iterations-per-epoch", "1",
                                           *dirs_args(tmp_path)], env=env, ranks=2, timeout=900)
    assert job.returncode == 0, job.explain()
    assert re.search(r"faster_rcnn: channel 'train' is ShardedByS3Key: .*local rank \(2 per host", job.stdout)
    assert "world_size=2" in job.stdout and iter_lines(job.stdout) == [(0, 1)]


def test_sigterm_checkpoints_mid_epoch_and_resume_continues(train_only, tmp_path):
    # 5 iterations: the signal goes out once the run logged its first; a cheap iteration is a second or two, so the
    # stop comes mid-epoch even when this process sees the line an iteration late.
    args = [*h.WIRING_ARGS, "--epochs", "1", "--max-iterations-per-epoch", "5"]
    job = h.start_cheap("faster", tmp_path, args, env=h.channel_env(train_only))
    job.wait_for(r"^epoch=0 iter=1 ", timeout=600)
    os.kill(job.proc.pid, signal.SIGTERM)
    job.wait(300)
    assert job.returncode == 143, job.explain()
    assert "faster_rcnn: stopped by SIGTERM" in job.stdout
    done = iter_lines(job.stdout)[-1][1]
    assert done < 5
    stem = f"faster_rcnn_resnet50_v1b_coco-epoch-0001-batch-{done:06d}"
    state = json.loads((job.checkpoint_dir / f"{stem}.json").read_text())
    assert state["batch"] == done
    assert not (job.model_dir / "faster_rcnn_resnet50_v1b_coco-final.params").exists()

    resumed = h.run_cheap("faster", tmp_path, args, env=h.channel_env(train_only), timeout=900)
    assert resumed.returncode == 0, resumed.explain()
    assert f"at epoch 0 iteration {done}" in resumed.stdout
    assert iter_lines(resumed.stdout) == [(0, i) for i in range(done + 1, 6)]
    assert (resumed.model_dir / "faster_rcnn_resnet50_v1b_coco-final.params").is_file()


@pytest.fixture(scope="module")
def sixteen_small(tmp_path_factory, needs_mxnet):
    """16 train images of h.SMALL px: 8 iterations of 2 ranks x 1 image."""
    out = tmp_path_factory.mktemp("sixteen") / "coco"
    synthetic_coco.write_coco(out, num_train=16, num_val=0, image_size=(h.SMALL, h.SMALL), seed=1)
    return out


@pytest.mark.mpi
def test_sigterm_to_both_ranks_stops_them_together(sixteen_small, tmp_path, needs_horovod):
    """What the launcher does on a SageMaker stop: SIGTERM every rank. They agree on the iteration to stop
    after (the vote is pipelined: within two iterations of the signal; a cheap iteration is a second or two, so 8
    iterations leave room to stop mid-epoch), rank 0 checkpoints, both exit 143."""
    args = [*h.WIRING_ARGS, "--epochs", "1", "--max-iterations-per-epoch", "8", *dirs_args(tmp_path)]
    job = h.start_cheap("faster", tmp_path, args, env=h.channel_env(sixteen_small), ranks=2)
    job.wait_for(r"^epoch=0 iter=1 ", timeout=600)
    ranks = h.rank_pids(job.proc.pid)
    assert sorted(ranks) == [0, 1]
    seen = iter_lines(job.stdout)[-1][1]  # the last iteration rank 0 had finished when the signals went out
    for pid in ranks.values():
        os.kill(pid, signal.SIGTERM)
    job.wait(300)
    assert job.returncode == 143, job.explain()  # mpirun reports the ranks' status
    assert job.stdout.count("faster_rcnn: stopped by SIGTERM") == 1, job.explain()  # rank 0 logs
    # A rank that stopped after another iteration than its peer would leave the peer failing, with an error
    # line, in a collective it never joined.
    assert "faster_rcnn: error" not in job.stderr, job.explain()
    done = iter_lines(job.stdout)[-1][1]
    # The vote agreed within two iterations of the signal, mid-epoch (8 iterations).
    assert seen <= done <= seen + 2 and done < 8, (seen, done, job.explain())
    stem = f"faster_rcnn_resnet50_v1b_coco-epoch-0001-batch-{done:06d}"
    assert json.loads((job.checkpoint_dir / f"{stem}.json").read_text())["batch"] == done
    assert not (job.model_dir / "faster_rcnn_resnet50_v1b_coco-final.params").exists()


@pytest.mark.mpi
def test_failing_dataloader_worker_on_one_rank_ends_the_job(train_only, tmp_path, needs_horovod):
    """Rank 1's first image is corrupt and decoded in a DataLoader worker process: rank 1 fails, mpirun
    takes rank 0 down (it waits in an allreduce), nothing hangs."""
    np = pytest.importorskip("numpy")
    data = h.copy_coco(train_only, tmp_path / "data")
    ratios = [1.0] * 8
    steps = rcnn_data.steps_per_epoch(8, 2, 1, cap=2)
    (first,) = rcnn_data.epoch_batches(np, 8, ratios, 233, 0, 1, 2, 1, steps)[0]
    # dataset index i is the i-th image by id (all 8 are usable); ids start at 1
    (data / "train2017" / f"{first + 1:012d}.jpg").write_bytes(b"this is not a jpeg")
    args = h.replaced(h.TINY_ARGS, {"--num-workers": "1"})
    # The run's deadline is the bound on "nothing hangs" (generous: rank 1 fails at its first batch).
    job = h.run("mask", tmp_path / "job", [*args, "--epochs", "1", "--max-iterations-per-epoch", "2"],
                env=h.channel_env(data), ranks=2, timeout=240)
    assert job.returncode not in (0, None), job.explain()
    assert "mask_rcnn: error: unexpected" in job.stderr, job.explain()


@pytest.mark.mpi
@pytest.mark.parametrize("model", ["faster", "mask"])
def test_fpn_variant_trains_and_validates(two_ranks_fpn, model):
    job = two_ranks_fpn(model)
    assert job.returncode == 0, job.explain()
    net = f"{model}_rcnn_fpn_resnet50_v1b_coco"
    assert f"model={net} " in job.stdout
    assert iter_lines(job.stdout) == [(0, 1)]
    assert re.search(r"^epoch=0 val_bbox_map=\S+", job.stdout, re.M)
    assert (job.model_dir / f"{net}-final.params").is_file()


# Far below the first step's batch-averaged gradients: unclipped (the optimizer's clip_gradient dropped, in a copy),
# resnetv1b_layers2_conv0_weight alone has an element moving 1.8e-4 = 18 x lr x CLIP in this test's step.
CLIP = 1e-3


def test_clip_gradient_bounds_every_weights_first_step_and_static_alloc_reaches_the_net(coco, tmp_path):
    """GluonCV Mask R-CNN's --clip-gradient C and --static-alloc, as its script hands them to MXNet. Clipping: the
    optimizer clips every element of the batch-averaged gradient to [-C, C] before the SGD update, so from zero
    momentum and without weight decay the first step moves no weight element by more than lr x C, and with C far
    below the gradients some by exactly that. Static allocation: the graph the first step ran was built with
    static_alloc, and validation, which hybridizes again, ran its own graph built with it too (recorded_run.py records
    both)."""
    np = pytest.importorskip("numpy")
    command, path = recorded_run("mask", num_sample=8)
    args = [*h.TINY_ARGS, "--epochs", "1", "--max-iterations-per-epoch", "1", "--lr", "0.08", "--lr-warmup", "0",
            "--wd", "0", "--clip-gradient", str(CLIP), "--static-alloc", "true", *dirs_args(tmp_path)]
    job = h.run("mask", tmp_path, args, env={**h.channel_env(coco), **path}, command=command, timeout=900)
    assert job.returncode == 0, job.explain()
    ((_, lr),) = h.first_iterations(job, MASK.loss_names)
    assert lr == 0.01  # 0.08 per 8 images x 1 image, no warmup
    bound = lr * CLIP
    before, after = recorded_first_step(job.model_dir)
    largest = {}
    for name in before.files:
        change = np.abs(after[name].astype(np.float64) - before[name])
        # float32: lr x clip(g) rounded once, then added to the weight (half an ulp of the result)
        slack = bound * 1e-6 + np.spacing(np.maximum(np.abs(before[name]), np.abs(after[name])))
        over = change - bound - slack
        assert over.max() <= 0, f"{name}: an element moved {change.max():.3g} > lr x clip = {bound:.3g}"
        largest[name] = float(change.max())
    assert max(largest.values()) >= bound * (1 - 1e-5), f"nothing was clipped: {largest}"
    hybridized = json.loads((job.model_dir / "hybridization-step-1.json").read_text())
    assert hybridized["active"] and hybridized["graph_built"], hybridized
    assert hybridized["flags"].get("static_alloc") is True, hybridized
    assert re.search(r"^epoch=0 val_bbox_map=\S+ val_segm_map=\S+ val_images=2 ", job.stdout, re.M), job.explain()
    # validation's forward passes ran a graph of their own (not training's), built with static_alloc too
    validation = json.loads((job.model_dir / "hybridization-validation-epoch-0.json").read_text())
    assert validation["active"] and validation["new_graph"], validation
    assert validation["flags"].get("static_alloc") is True, validation
