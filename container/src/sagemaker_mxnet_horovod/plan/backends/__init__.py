"""Distribution backends, side by side: how a job's processes are started across hosts and the environment
rules only that backend needs. mpi: Horovod over Open MPI (the master runs mpirun, workers serve its ssh);
single: the program once on this host, without MPI. plan.job_plan picks one from the layout."""
