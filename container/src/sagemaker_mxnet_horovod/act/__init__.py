"""Act: carry out this host's plan. prepare.py readies the host (directories, the user's code, the ranks'
environment), master_run.py runs the job's command in named steps (gather, start, wait, diagnose, release),
worker_run.py serves the master's mpirun, cluster/ is the handshake between hosts, supervise.py the job's
process, outcome_files.py what the job leaves in /opt/ml/output. rank_env.py runs inside every rank."""
