"""What several studies share: the jobs they run and the data they train on (scaling_jobs), the machine's load
(machine), where a job's CPU goes (rank_cpu), a launcher's phases (launcher_phases), runs of the first-epoch probes
(probed_runs), and the emulated instance links with their workloads and timelines (emulated_link, link_workloads,
link_timeline). Nothing here has a command line of its own."""
