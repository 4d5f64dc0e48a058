"""What a stranger on the job's network can do to MXNet's parameter servers (docs/security.md): a 2-host built-in MNIST
job with kvstore=dist_sync (scripts/local_job/) and a third container on its network that starts MXNet as a ps-lite
worker or server pointed at the job's scheduler (algo-1, AWS's default port 8000), as anyone holding the public image
could: before the job's processes start (the hosts start STRANGER_LEAD_S later) or once it trains.

    python3 scripts/ps_stranger.py --image IMAGE --role worker|server --when before|during [--progress-timeout 60]

Prints the job's exit codes and failures, the scheduler's log of who joined, and what the stranger saw. In the
stranger's container the same file runs with --stranger ROLE.
"""

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STRANGER_LEAD_S = 6  # "before": the job's containers start this long after the stranger's


def stranger(role: str) -> None:
    """Runs in the stranger's container. MXNet is imported first (no role yet), so that the stranger joins as soon
    as algo-1 resolves: ps-lite's ZeroMQ connection then retries until the scheduler listens."""
    import mxnet as mx
    from mxnet.kvstore import kvstore_server

    start = time.monotonic()

    def say(text: str) -> None:
        print(f"stranger {time.monotonic() - start:5.1f}s: {text}", flush=True)

    while True:
        try:
            address = socket.gethostbyname("algo-1")
            break
        except OSError:
            time.sleep(0.02)
    say(f"algo-1 is {address}; joining its scheduler (port 8000) as a {role}")
    os.environ.update(DMLC_ROLE=role, DMLC_PS_ROOT_URI="algo-1", DMLC_PS_ROOT_PORT="8000", DMLC_NUM_SERVER="2",
                      DMLC_NUM_WORKER="2", PS_VERBOSE="1")
    if role == "server":
        kvstore_server._init_kvstore_server_module()  # serves until the scheduler ends it
        return
    kv = mx.kv.create("dist_sync")
    say(f"joined: kvstore rank {kv.rank} of {kv.num_workers} workers")
    value = mx.nd.ones((4,)) * 1e6
    kv.init(0, value)
    kv.push(0, value)
    out = mx.nd.zeros((4,))
    kv.pull(0, out=out)
    say(f"pushed 1e6 to key 0 and pulled back {out.asnumpy().tolist()}")
    time.sleep(600)


def docker(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([os.environ.get("DOCKER", "docker"), *args], capture_output=True, text=True, check=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stranger", choices=["worker", "server"], help=argparse.SUPPRESS)
    parser.add_argument("--image", default="sagemaker-mxnet-horovod:cpu")
    parser.add_argument("--role", choices=["worker", "server"], default="worker")
    parser.add_argument("--when", choices=["before", "during"], default="before")
    parser.add_argument("--progress-timeout", default="60", help="mpi_progress_timeout_s (0: the default, none)")
    parser.add_argument("--timeout", type=float, default=240, help="the job's own deadline, seconds")
    args = parser.parse_args()
    if args.stranger:
        stranger(args.stranger)
        return 0
    from local_job import Channel, JobSpec, run_job  # scripts/ is sys.path[0]; not needed in the stranger's container

    work = Path(tempfile.mkdtemp(prefix="ps-stranger-"))
    data = work / "mnist"
    docker("run", "--rm", "-v", f"{data}:/out", args.image, "synth-data", "mnist", "/out", "--train", "6000",
           "--test", "1000")
    name = f"ps-stranger-{os.getpid()}"
    network = {}

    def start_stranger(job) -> None:
        network["name"] = f"{job.project}-net"
        if args.when == "during":
            job.wait_for_log("algo-1", "epoch=2 batch=", 120)
        docker("run", "-d", "--name", name, "--network", network["name"], "-v", f"{Path(__file__).parent}:/s:ro",
               args.image, "python", "/s/ps_stranger.py", "--stranger", args.role)

    hps = {"sagemaker_program": "mnist", "kvstore": "dist_sync", "epochs": "20", "log-interval": "20",
           "mpi_progress_timeout_s": args.progress_timeout}
    spec = JobSpec(image=args.image, hyperparameters=hps, env={"PS_VERBOSE": "1"}, during=start_stranger,
                   channels=[Channel("train", data / "train"), Channel("test", data / "test")], timeout_s=args.timeout,
                   start_delays={"algo-1": STRANGER_LEAD_S, "algo-2": STRANGER_LEAD_S} if args.when == "before" else {})
    try:
        result = run_job(spec, work / "job")
    finally:
        seen = docker("logs", name)
        docker("rm", "-f", name)
        if network:
            docker("network", "rm", network["name"])  # run_job could not, while the stranger was on it
    print(f"job: exit codes {result.exit_codes} after {result.seconds:.0f} s{' (timed out)' if result.timed_out else ''}; "
          f"its files: {work / 'job'}")
    for host in result.hosts:
        epochs = sum(" train_loss=" in line for line in host.logs.splitlines())
        print(f"  {host.name}: {epochs} epoch lines; failure: {(host.failure or '').splitlines()[:1]}")
    scheduler = work / "job" / "algo-1" / "output" / "data" / "logs" / "algo-1-scheduler.log"
    if scheduler.is_file():
        print("scheduler:\n  " + "\n  ".join(line for line in scheduler.read_text().splitlines()
                                              if "Barrier count" not in line))
    print("stranger:\n  " + "\n  ".join((seen.stdout + seen.stderr).strip().splitlines()[-8:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
