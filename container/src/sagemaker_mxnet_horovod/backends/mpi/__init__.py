"""The MPI backend: Horovod over Open MPI, as AWS's images run it (backend.py: the Backend the registry knows). The
master runs mpirun (mpirun.py: the command and MPI's environment rules; gloo.py Horovod's Gloo when the job asks for
it) between gathering its workers and releasing them (master_run.py); each worker serves mpirun's ssh and waits for
the master's verdict (worker_run.py); every rank starts through rank_env.py.

Nothing is imported here: every rank imports this package to start (rank_env.py), and importing the backend's
planning too took 0.07-0.18 s per rank against 0.01 s (python -X importtime, on this 2-core machine under load 7)."""
