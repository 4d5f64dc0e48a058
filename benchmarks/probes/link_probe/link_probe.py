"""The link benchmark's training program (benchmarks/link_scaling.py runs it as a user's script through `train`).

A stack of square layers, 25M parameters by default (100 MB of fp32 gradients), trained as a user's Horovod
Gluon script trains: autograd, `hvd.DistributedTrainer`, one blocking wait per step; or, with --kvstore
dist_sync, as a script for MXNet's parameter servers (the launcher runs them with
sagemaker_parameter_server_enabled): a Gluon Trainer on the dist_sync kvstore, each worker applying the summed
gradients itself (update_on_kvstore=False, as the built-in programs do). Two kinds of compute:

- `cpu`: real Dense layers on the rank's cores (a CPU host).
- `gpu-like`: a GPU host's compute, emulated off the CPU. Each layer is a custom operator that sleeps for its
  share of the step (a third forward, two thirds backward, as a network's backward costs about twice its
  forward); its weight's gradient counts as written when its backward ends (MXNet's engine orders the
  gradient's allreduce after that operator), though no value is computed. So the CPU stays free for Horovod
  and the network, and gradients appear one layer at a time over the backward pass, last layer first, as a GPU
  produces them. The weights are not updated (`allreduce_grads()` without `update()`): a GPU host updates them
  on the GPU, here it would cost the CPU ~30 ms a step that a GPU host does not spend.
  With --profile (a network's layers from rcnn_profile.py), the layers are that network's instead of equal
  squares: each gets its share of the step by its multiply-adds and a gradient of its parameters' size; layers
  without trained parameters (a frozen stem) run forward only.

Rank 0 writes `link_probe.json` to SM_MODEL_DIR: every step's start and end, and for the traced steps (the
first --trace steps after the warm-up) when each layer's backward ended (its gradient exists). With --timeline
it also writes Horovod's timeline of the traced steps to SM_OUTPUT_DATA_DIR; the timeline's events count from
a wall-clock moment it records, and the record has the offset between the wall clock and its own
(`time.monotonic()`), so the benchmark places both on one axis. Every rank measures its threads' CPU over the measured steps (the main
thread, the threads `hvd.init()` started, the rest: MXNet's engine and OpenMP) and rank 0 records them all.
"""

import argparse
import json
import os
import threading
import time

COMPRESSIONS = ("none", "fp16", "fp16-free-casts")


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--compute", choices=["cpu", "gpu-like"], default="gpu-like")
    parser.add_argument("--parameters-m", type=float, default=25.0, help="millions of parameters in all")
    parser.add_argument("--layers", type=int, default=10)
    parser.add_argument("--profile", default="", help="gpu-like: a JSON layer profile (rcnn_profile.py) in the "
                        "code directory: that network's layers instead of --layers equal ones")
    parser.add_argument("--batch-size", type=int, default=96, help="per rank (the cpu compute's batch)")
    parser.add_argument("--step-ms", type=float, default=450.0, help="gpu-like: emulated compute per step")
    parser.add_argument("--steps", type=int, default=24)
    parser.add_argument("--warmup", type=int, default=4, help="steps left out of the figures")
    parser.add_argument("--trace", type=int, default=3, help="steps traced after the warm-up")
    parser.add_argument("--timeline", default="false", help="true: Horovod's timeline of the traced steps")
    parser.add_argument("--compression", choices=COMPRESSIONS, default="none",
                        help="none: the trainer gets no compression= (the launcher's horovod_gradient_compression "
                        "applies); fp16-free-casts: fp16's bytes without the casts' CPU (a GPU host's casts)")
    parser.add_argument("--num-groups", type=int, default=0, help="hvd.DistributedTrainer's num_groups")
    parser.add_argument("--kvstore", choices=["horovod", "dist_sync"], default="horovod")
    return parser.parse_known_args()[0]


from thread_cpu import cpu_split, thread_ticks  # noqa: E402  (beside this file in the job's code directory)

ARGS = arguments()
if ARGS.timeline == "true":
    os.environ["HOROVOD_TIMELINE"] = "DYNAMIC"  # before Horovod starts: hvd.start_timeline() needs it

import mxnet as mx  # noqa: E402

if ARGS.kvstore == "horovod":
    import horovod.mxnet as hvd
from mxnet import autograd, gluon  # noqa: E402


class GradientClock:
    """When each layer's backward ended, in the steps being traced."""

    def __init__(self):
        self.step, self.ends, self._lock = None, [], threading.Lock()

    def record(self, layer: int) -> None:
        if self.step is not None:
            with self._lock:
                self.ends.append((self.step, layer, time.monotonic()))


CLOCK = GradientClock()


class EmulatedLayer(mx.operator.CustomOp):
    """Identity on its input after `forward_s`; after `backward_s`, the input's gradient passed through. The
    weight's gradient keeps its zeros (the engine still counts this operator as its writer), so summing it
    across ranks keeps it finite, and its bytes cross the network all the same."""

    def __init__(self, layer: int, forward_s: float, backward_s: float):
        super().__init__()
        self.layer, self.forward_s, self.backward_s = layer, forward_s, backward_s

    def forward(self, is_train, req, in_data, out_data, aux):
        time.sleep(self.forward_s)
        self.assign(out_data[0], req[0], in_data[0])

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        time.sleep(self.backward_s)
        self.assign(in_grad[0], req[0], out_grad[0])
        CLOCK.record(self.layer)


@mx.operator.register("emulated_layer")
class EmulatedLayerProp(mx.operator.CustomOpProp):
    def __init__(self, layer, forward_s, backward_s):
        super().__init__(need_top_grad=True)
        self.layer, self.forward_s, self.backward_s = int(layer), float(forward_s), float(backward_s)

    def list_arguments(self):
        return ["data", "weight"]

    def infer_shape(self, in_shape):
        return in_shape, [in_shape[0]], []

    def create_operator(self, ctx, shapes, dtypes):
        return EmulatedLayer(self.layer, self.forward_s, self.backward_s)


class EmulatedBlock(gluon.HybridBlock):
    def __init__(self, layer: int, parameters: int, forward_s: float, backward_s: float, **kwargs):
        super().__init__(**kwargs)
        self.layer, self.forward_s, self.backward_s = layer, forward_s, backward_s
        with self.name_scope():  # no parameters trained: a one-element weight without a gradient (forward only)
            self.weight = self.params.get("weight", shape=(max(parameters, 1),), init=mx.init.Zero(),
                                          grad_req="write" if parameters else "null")

    def hybrid_forward(self, F, x, weight):
        return F.Custom(x, weight, op_type="emulated_layer", layer=self.layer, forward_s=self.forward_s,
                        backward_s=self.backward_s)


def layer_shapes(args) -> list[tuple[int, float]]:
    """(parameters trained, share of the step's compute) of each layer in forward order."""
    if args.profile:
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), args.profile)) as f:
            layers = json.load(f)["layers"]
        total = sum(layer["multiply_adds"] for layer in layers)
        return [(layer["parameters"], layer["multiply_adds"] / total) for layer in layers]
    width = int((args.parameters_m * 1e6 / args.layers) ** 0.5)
    return [(width * width, 1 / args.layers)] * args.layers


def build(args, shapes: list) -> gluon.nn.HybridSequential:
    net = gluon.nn.HybridSequential()
    with net.name_scope():
        for layer, (parameters, share) in enumerate(shapes):
            if args.compute == "cpu":
                width = int(parameters ** 0.5)
                net.add(gluon.nn.Dense(width, activation="relu", in_units=width))
            else:
                seconds = args.step_ms / 1000 * share
                net.add(EmulatedBlock(layer, parameters, seconds / 3, seconds * 2 / 3))
    return net


def tcp_counters() -> dict:
    """This namespace's TCP segments sent and retransmitted (/proc/net/snmp)."""
    lines = [line.split() for line in open("/proc/net/snmp") if line.startswith("Tcp:")]
    values = dict(zip(lines[0][1:], lines[1][1:]))
    return {"out_segments": int(values["OutSegs"]), "retransmitted": int(values["RetransSegs"])}


def train(args, net, job, params, timeline_path: str) -> tuple[list, dict]:
    width = next(iter(params.values())).shape[-1]
    data = mx.nd.random.uniform(shape=(args.batch_size, width if args.compute == "cpu" else 1))
    summed = [param for param in params.values() if param.grad_req != "null"]
    traced = range(args.warmup, args.warmup + args.trace)
    steps, ticks = [], {}
    for step in range(args.steps):
        if step == args.warmup:
            ticks["start"], ticks["tcp_start"] = thread_ticks(), tcp_counters()
            if timeline_path:
                job.start_timeline(timeline_path)
        start = time.monotonic()
        CLOCK.step = step if step in traced and job.rank == 0 else None
        with autograd.record():
            loss = net(data).sum()
        loss.backward()
        if args.compute == "cpu":
            job.trainer.step(args.batch_size)
        else:
            job.trainer.allreduce_grads()
        loss.wait_to_read()
        for param in summed:  # the step ends when every gradient is summed and every weight updated
            param.data().wait_to_read()
            param.grad().wait_to_read()
        steps.append((start, time.monotonic()))
        if timeline_path and step == traced[-1]:
            job.stop_timeline()
    ticks["end"], ticks["tcp_end"] = thread_ticks(), tcp_counters()
    return steps, ticks


class Fp16WithoutCasts:
    """fp16 compression's bytes without its casts' CPU: a GPU host casts 100 MB in well under a millisecond, this
    machine's CPU in ~100 ms a step, which the gpu-like emulation must not charge. Each gradient's allreduce sums a
    float16 buffer of its size (its values do not matter here) that a one-element copy from the gradient writes
    first, so that it still waits for the gradient; a one-element copy back makes the gradient wait for the sum."""

    buffers: dict = {}

    @classmethod
    def compress(cls, tensor):
        buffer = cls.buffers.get(id(tensor))
        if buffer is None:
            buffer = cls.buffers[id(tensor)] = mx.nd.zeros(tensor.shape, ctx=tensor.context, dtype="float16")
        buffer.reshape(-1)[0:1] = tensor.reshape(-1)[0:1].astype("float16")
        return buffer, tensor

    @staticmethod
    def decompress(tensor, original):
        original.reshape(-1)[0:1] = tensor.reshape(-1)[0:1].astype(original.dtype)
        return original


class Horovod:
    """The job's collectives through Horovod: its trainer, and rank 0 gathering every rank's figures."""

    def __init__(self, args, params):
        hvd.init()
        self.rank, self.size = hvd.rank(), hvd.size()
        hvd.broadcast_parameters(params, root_rank=0)
        # --compression none passes none: Horovod's default, which the launcher's horovod_gradient_compression
        # changes as it changes a user's script's.
        chosen = {"fp16": hvd.Compression.fp16, "fp16-free-casts": Fp16WithoutCasts}.get(args.compression)
        self.trainer = hvd.DistributedTrainer(params, "sgd", {"learning_rate": 1e-6}, num_groups=args.num_groups,
                                              **({"compression": chosen} if chosen else {}))

    def start_timeline(self, path: str) -> None:
        hvd.start_timeline(path)

    def stop_timeline(self) -> None:
        hvd.stop_timeline()

    def gather(self, figures: dict) -> list:
        return hvd.allgather_object(figures)


class ParameterServers(Horovod):
    """The job's collectives through MXNet's dist_sync kvstore: every worker pulls the same initial weights at the
    trainer's first step; no timeline; rank 0 has only its own figures."""

    def __init__(self, args, params):
        self.kv = mx.kv.create("dist_sync")
        self.rank, self.size = self.kv.rank, self.kv.num_workers
        self.trainer = gluon.Trainer(params, "sgd", {"learning_rate": 1e-6}, kvstore=self.kv, update_on_kvstore=False)

    def start_timeline(self, path: str) -> None:
        pass

    stop_timeline = start_timeline

    def gather(self, figures: dict) -> list:
        return [figures]


def main(args) -> None:
    shapes = layer_shapes(args)
    net = build(args, shapes)
    net.initialize(mx.init.Xavier() if args.compute == "cpu" else mx.init.Zero())
    params = net.collect_params()
    before_init = set(thread_ticks())
    job = (Horovod if args.kvstore == "horovod" else ParameterServers)(args, params)
    communication_tids = set(thread_ticks()) - before_init
    timeline = ""
    if args.timeline == "true":
        timeline = os.path.join(os.environ.get("SM_OUTPUT_DATA_DIR", "/tmp"), "link_probe_timeline.json")
    steps, ticks = train(args, net, job, params, timeline)
    split = cpu_split(ticks["start"], ticks["end"], communication_tids, args.steps - args.warmup)
    split.update({f"tcp {k} per step": (ticks["tcp_end"][k] - v) / (args.steps - args.warmup)
                  for k, v in ticks["tcp_start"].items()})
    splits = job.gather(split)
    if job.rank == 0:
        write_record(args, net, steps, splits, job.size)


def write_record(args, net, steps: list, cpu: list, size: int) -> None:
    measured = steps[args.warmup:]
    seconds = measured[-1][1] - measured[0][0]
    # Each layer's parameters summed a step (the cpu compute's Dense layers: weight and bias), in layer order
    layer_parameters = [sum(p.data().size for p in block.collect_params().values() if p.grad_req != "null")
                        for block in net]
    record = {"args": vars(args), "size": size, "parameters": sum(layer_parameters),
              "layer_parameters": layer_parameters,
              "steps": steps, "measured_steps": len(measured), "step_s": seconds / len(measured),
              "samples_per_s": size * args.batch_size * len(measured) / seconds,
              "gradients_ready": CLOCK.ends, "cpu_ms_per_step": cpu,
              "wall_minus_monotonic": time.time() - time.monotonic()}
    path = os.path.join(os.environ.get("SM_MODEL_DIR", "/opt/ml/model"), "link_probe.json")
    with open(path, "w") as f:
        json.dump(record, f)
    print(f"link_probe: {len(measured)} steps of {record['step_s'] * 1000:.1f} ms, "
          f"{record['samples_per_s']:.1f} samples/s", flush=True)


if __name__ == "__main__":
    main(ARGS)
