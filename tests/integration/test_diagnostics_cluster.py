"""What a first run shows across 2 real containers: every rank's Python stack on demand (`train stacks` by docker
exec on the worker, SIGUSR1 to the master's `train`), written on every host without stopping the job; each rank's
output in its own log on the master, the console showing the chosen ranks only; the end-of-job line with every
host's peak memory. The failure causes (out of memory, a small /dev/shm) are fault scenarios (tests/faults)."""

from cluster_jobs import release, run, wait_for


def complete_dumps(root):
    return sorted(path.parent for path in (root / "output" / "data" / "stacks").glob("*/summary.txt"))


def test_stacks_on_demand_per_rank_logs_and_peak_memory_across_two_hosts(image, tmp_path):
    asked = {}

    def ask_for_stacks_then_release(job) -> None:
        roots = {host: tmp_path / "job" / host for host in ("algo-1", "algo-2")}
        wait_for(lambda: all((root / "release").exists() for root in roots.values()), "both ranks waiting")
        asked["exec"] = job.exec("algo-2", "train", "stacks")  # docker exec on the worker
        job.signal("algo-1", "USR1")  # docker kill --signal USR1 on the master
        wait_for(lambda: len(complete_dumps(roots["algo-1"])) == 2, "the master's second dump")
        for root in roots.values():
            release(root / "release")

    result = run(image, tmp_path / "job", hps={"release-fifo": "/opt/ml/release", "mpi_console_ranks": "0",
                                                "extra-steps": "3"}, during=ask_for_stacks_then_release)
    assert result.during_error is None and result.exit_codes == [0, 0], result.describe()  # the job went on
    shown = asked["exec"].stdout
    assert "===== algo-2-rank-1.txt\nrank 1 on algo-2" in shown and "in wait_for_release" in shown
    master, worker = result.hosts
    dumps = complete_dumps(master.root)
    for dump in dumps:  # every rank on every host, in the master's output
        assert sorted(p.name for p in dump.glob("*-rank-*.txt")) == ["algo-1-rank-0.txt", "algo-2-rank-1.txt"]
        assert all("in wait_for_release" in p.read_text() for p in dump.glob("*-rank-*.txt"))
    # Each worker writes its own ranks' too, under the same name.
    assert [d.name for d in complete_dumps(worker.root)] == [d.name for d in dumps]
    assert (complete_dumps(worker.root)[0] / "algo-2-rank-1.txt").exists()
    assert "train: stacks of rank 1 on algo-2 (SIGUSR1, asked on algo-2):" in master.logs
    logs = master.root / "output" / "data" / "logs"
    assert "rank 1/2 on algo-2: sum=3.0" in (logs / "algo-2-rank-1.log").read_text()
    assert "rank 0/2 on algo-1: sum=3.0" in (logs / "algo-1-rank-0.log").read_text()
    assert "rank 0/2 on algo-1" in master.logs and "rank 1/2 on algo-2" not in master.logs  # mpi_console_ranks=0
    end = next(line for line in master.logs.splitlines() if line.startswith("train: job exited with code 0"))
    assert "; peak memory: algo-1 " in end and ", algo-2 " in end and " of " in end
