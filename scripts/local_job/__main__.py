"""The command line of a local job: `PYTHONPATH=scripts python3 -m local_job --image IMAGE --hosts 2 --hp KEY=VALUE
--channel NAME=DIR` (local_job/__init__.py says what it runs); prints every host's log and exits 0 when all did."""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from . import __doc__ as PACKAGE_DOC
from .run import run_job
from .spec import Channel, JobSpec, host_names


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m local_job", description=PACKAGE_DOC.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--image", default="sagemaker-mxnet-horovod:cpu")
    parser.add_argument("--hosts", type=int, default=2)
    parser.add_argument("--hp", action="append", default=[], metavar="KEY=VALUE", help="hyperparameter")
    parser.add_argument("--channel", action="append", default=[], metavar="NAME=DIR[:Pipe|:FastFile]",
                        help="a channel; NAME=DIR1,DIR2,...:ShardedByS3Key gives host N its own DIR N")
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--workdir", type=Path, default=Path("out/local-job"))
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--pipe-epochs", type=int, default=1)
    parser.add_argument("--shm-size", default="1g", help="each container's /dev/shm (docker --shm-size)")
    parser.add_argument("--instance-group", action="append", default=[], metavar="NAME=HOST,HOST",
                        help="a heterogeneous cluster's instance group (repeat; default: one homogeneousCluster)")
    args = parser.parse_args(argv)

    channels = []
    for item in args.channel:
        name, _, rest = item.partition("=")
        source, _, mode = rest.partition(":")
        if mode == "ShardedByS3Key":
            parts = [Path(p) for p in source.split(",")]
            if len(parts) != args.hosts:
                parser.error(f"--channel {item}: {len(parts)} parts for {args.hosts} hosts")
            channels.append(Channel(name, parts[0], "File", mode, dict(zip(host_names(args.hosts), parts))))
        else:
            channels.append(Channel(name, Path(source), mode or "File"))
    spec = JobSpec(image=args.image, hosts=args.hosts,
                   hyperparameters=dict(item.split("=", 1) for item in args.hp),
                   channels=channels, env=dict(item.split("=", 1) for item in args.env),
                   timeout_s=args.timeout, pipe_epochs=args.pipe_epochs, shm_size=args.shm_size,
                   instance_groups={name: hosts.split(",") for name, _, hosts in
                                    (item.partition("=") for item in args.instance_group)})
    if args.workdir.exists():
        shutil.rmtree(args.workdir)
    args.workdir.mkdir(parents=True)
    result = run_job(spec, args.workdir)
    for host in result.hosts:
        print(f"===== {host.name} (exit {host.exit_code}) =====")
        print(host.logs.rstrip())
    print("=" * 60)
    print(f"job finished in {result.seconds:.1f} s; exit codes: "
          + ", ".join(f"{h.name}={h.exit_code}" for h in result.hosts))
    for host in result.hosts:
        if host.failure:
            print(f"{host.name} failure: {host.failure}")
    print(f"model (master): {result.master.root / 'model'}")
    print(f"output (master): {result.master.root / 'output'}")
    return 0 if all(code == 0 for code in result.exit_codes) and not result.timed_out else 1


if __name__ == "__main__":
    sys.exit(main())
