"""The benchmarks: one module per study, run from the repository's root as `python3 -m benchmarks.<study> --help`
(benchmarks/README.md: the question each answers, its command, how long it runs). Shared helpers are in common/,
the programs that run inside the image (a job's training program, a script under `docker run`) in probes/. A study
imports helpers from common/ and the local job runner from scripts/local_job, never another study."""
