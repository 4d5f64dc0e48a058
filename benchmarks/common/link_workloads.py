"""What benchmarks/link_scaling.py trains on the emulated links: the link probe (benchmarks/probes/link_probe: 25M
parameters, a CPU host's or an emulated GPU host's compute; or, emulated GPU hosts of Faster or Mask R-CNN, the
probe with that network's layers: their parameters and shares of the compute, profiled in the image by
link_probe/rcnn_profile.py) or a built-in R-CNN program (Faster or Mask R-CNN, ResNet-50 backbone, random
weights, synthetic COCO, batch 1 per rank: a CPU host's compute). Each makes the job's JobSpec and reads from its
result the throughput, the step time and the bytes of gradients a step sums.
"""

from __future__ import annotations

import json
import re
import shutil
import statistics
import subprocess
from pathlib import Path

from scripts.local_job import DOCKER, Channel, JobSpec

PROBE = Path(__file__).resolve().parents[1] / "probes" / "link_probe"
SCRIPT_PROBE = Path(__file__).resolve().parents[1] / "probes" / "script_probe" / "script_probe.py"
THREAD_CPU = PROBE / "thread_cpu.py"  # the probes' per-thread CPU, shared
RCNN_ITERATION = re.compile(r"(?:\[1,0\]<stdout>:)?epoch=\d+ iter=(\d+) .* samples_per_sec=(\S+)")
# The parameters Horovod sums every step: the programs' collect_train_params() less the anchors (no gradient:
# Horovod skips them), counted in the image by `trainable_parameters` (33.6M for Faster R-CNN, 35.7M for Mask
# R-CNN with the default resnet50_v1b).
COUNT_PARAMETERS = """
import warnings; warnings.filterwarnings("ignore")
import mxnet as mx
from gluoncv import model_zoo
net = model_zoo.get_model("{model}_resnet50_v1b_coco", pretrained=False, pretrained_base=False)
net.initialize()
net(mx.nd.zeros((1, 3, 256, 256)))
print(sum(p.data().size for p in net.collect_train_params().values() if p.grad_req != "null"))
"""


def file_name(name: str) -> str:
    """A workload's name as a file or directory name (a Docker mount's too: no ':' or ',')."""
    return re.sub(r"[^\w.-]+", "_", name)


class JobFailed(RuntimeError):
    pass


def check(result, name: str) -> None:
    if any(code != 0 for code in result.exit_codes) or result.timed_out or result.during_error:
        raise JobFailed(f"{name} failed ({result.during_error or 'exit codes ' + str(result.exit_codes)}):\n"
                        + result.describe()[-3000:])


class Probe:
    """The link probe as a user's script: `compute` is cpu or gpu-like; with a GluonCV model's name, gpu-like with
    that network's layers (`<model>-gpu-like`)."""

    def __init__(self, compute: str, args, model: str | None = None, tmp: Path | None = None):
        self.compute, self.args, self.code_dir, self.profile = compute, args, PROBE, {}
        self.name = f"{model}-{compute}" if model else compute
        if model:
            self.code_dir = tmp / self.name
            shutil.copytree(PROBE, self.code_dir)
            layer_profile(args.image, f"{model}_resnet50_v1b_coco", self.code_dir / "profile.json")
            self.profile = {"profile": "profile.json"}

    def spec(self, hosts: int, hps: dict, **placement) -> JobSpec:
        hyperparameters = {"sagemaker_program": "link_probe.py", "sagemaker_submit_directory": "/opt/ml/code",
                           "compute": self.compute, "steps": str(self.args.steps), "warmup": str(self.args.warmup),
                           "step-ms": f"{self.args.step_ms:g}", **self.profile, **hps}
        return JobSpec(image=self.args.image, hosts=hosts, hyperparameters=hyperparameters, code_dir=self.code_dir,
                       timeout_s=900, **placement)

    def read(self, result, name: str, ranks: int) -> dict:
        check(result, name)
        # Rank 0 writes it: on the first host under MPI; with the parameter server, on whichever host's worker
        # the scheduler numbered 0.
        written = [host.root / "model" / "link_probe.json" for host in result.hosts
                   if (host.root / "model" / "link_probe.json").is_file()]
        if not written:
            raise JobFailed(f"{name}: no host wrote link_probe.json:\n" + result.describe()[-3000:])
        record = json.loads(written[0].read_text())
        return {**record, "gradient_bytes": 4 * record["parameters"],
                "measured_from": record["steps"][self.args.warmup][0]}


class Script:
    """A user's Gluon training script, unchanged, run by probes/script_probe (which times its Trainer.step calls
    from outside): `--script PATH` with `--script-args key=value,...` as its hyperparameters."""

    def __init__(self, path: Path, args, tmp: Path, script_args: dict, name: str | None = None):
        self.args, self.script_args = args, script_args
        self.name = name or path.stem
        self.code_dir = tmp / f"{file_name(self.name)}-code"
        self.code_dir.mkdir(parents=True)
        shutil.copy(path, self.code_dir / path.name)
        shutil.copy(SCRIPT_PROBE, self.code_dir / SCRIPT_PROBE.name)
        shutil.copy(THREAD_CPU, self.code_dir / THREAD_CPU.name)
        self.target = path.name

    def spec(self, hosts: int, hps: dict, env: dict, **placement) -> JobSpec:
        hyperparameters = {"sagemaker_program": SCRIPT_PROBE.name, "sagemaker_submit_directory": "/opt/ml/code",
                           **self.script_args, **hps}
        env = {"SCRIPT_PROBE_TARGET": self.target, "SCRIPT_PROBE_WARMUP": str(self.args.warmup),
               "SCRIPT_PROBE_BATCH": self.script_args.get("batch", "1"), **env}
        return JobSpec(image=self.args.image, hosts=hosts, hyperparameters=hyperparameters, code_dir=self.code_dir,
                       env=env, timeout_s=900, **placement)

    def read(self, result, name: str, ranks: int) -> dict:
        check(result, name)
        written = sorted(host.root / "model" / "script_probe.rank0.json" for host in result.hosts
                         if (host.root / "model" / "script_probe.rank0.json").is_file())
        if not written:
            raise JobFailed(f"{name}: no host wrote script_probe.rank0.json:\n" + result.describe()[-3000:])
        others = [json.loads(path.read_text())["cpu_ms_per_step"] for host in result.hosts
                  for path in sorted((host.root / "model").glob("script_probe.rank*.json"))]
        return {**json.loads(written[0].read_text()), "cpu_ms_per_step": others}


class Rcnn:
    """A built-in R-CNN program (faster_rcnn or mask_rcnn) on synthetic COCO, batch 1 per rank."""

    def __init__(self, model: str, args, data: Path):
        self.name, self.model, self.args, self.data = model, model, args, data
        self.parameters = trainable_parameters(args.image, model)

    def spec(self, hosts: int, hps: dict, **placement) -> JobSpec:
        hyperparameters = {"sagemaker_program": self.model, "batch-size": "1", "short": str(self.args.short),
                           "pretrained-base": "false", "num-workers": "0", "epochs": "1",
                           "max-iterations-per-epoch": str(self.args.iterations), "log-interval": "1",
                           "lr-warmup": "0", "resume": "false", "tensorboard": "false", **hps}
        return JobSpec(image=self.args.image, hosts=hosts, hyperparameters=hyperparameters, timeout_s=1800,
                       channels=[Channel("train", self.data)], **placement)  # no val split: no validation

    def read(self, result, name: str, ranks: int) -> dict:
        """Global images/s of iterations 2..N from rank 0's lines (the first builds the graph)."""
        check(result, name)
        rates = {int(m[1]): float(m[2]) for m in map(RCNN_ITERATION.search, result.master.logs.splitlines()) if m}
        steady = [rate for iteration, rate in rates.items() if iteration >= 2]
        if not steady:
            raise JobFailed(f"{name}: no iteration lines after the first in rank 0's log")
        rate = statistics.median(steady)
        return {"samples_per_s": rate, "step_s": ranks / rate, "gradient_bytes": 4 * self.parameters,
                "measured_from": None}


def trainable_parameters(image: str, model: str) -> int:
    out = subprocess.run([DOCKER, "run", "--rm", "--entrypoint", "python", image, "-c",
                          COUNT_PARAMETERS.format(model=model)], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[-1])


def layer_profile(image: str, model: str, out: Path) -> None:
    """The model's layers (link_probe/rcnn_profile.py, one training forward in the image) written to `out`."""
    with out.open("w") as f:
        subprocess.run([DOCKER, "run", "--rm", "-v", f"{PROBE}:/probe:ro", "--entrypoint", "python", image,
                        "/probe/rcnn_profile.py", model], stdout=f, check=True)


def synthetic_coco(image: str, tmp: Path, images: int) -> Path:
    subprocess.run([DOCKER, "run", "--rm", "-v", f"{tmp}:/data", "--entrypoint", "synth-data", image, "coco",
                    "/data/coco", "--train", str(images), "--val", "0"], check=True, stdout=subprocess.DEVNULL)
    return tmp / "coco"
