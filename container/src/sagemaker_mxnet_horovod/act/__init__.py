"""Act: what every backend's run is made of. prepare.py readies the host (directories, the user's code),
command_run.py runs the job's command in named steps (start, wait, diagnose), supervise.py the job's process,
cluster/ is the handshake between hosts, stacks.py every rank's stacks on demand, outcome_files.py what the job
leaves in /opt/ml/output. rank_program.py runs inside every rank (every backend's ranks end there). Each backend's own run: backends/."""
