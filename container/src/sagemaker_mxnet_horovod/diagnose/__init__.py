"""Diagnose: why a job failed, as one Failure the failure file reports cause first. verdict.py decides the
job's (FINDINGS: where a new kind of cause goes), process_failure.py how a process failed (mpirun's ranks:
backends/mpi/mpirun_report.py), crashes.py reads native crash reports, hangs.py the hang watches' reports,
progress.py is the progress watch inside each rank."""
