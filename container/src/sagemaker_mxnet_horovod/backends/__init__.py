"""The backends, one folder each, planning and running side by side (mpi/: Horovod over Open MPI; parameter_server/:
MXNet's parameter servers; single/: one process without MPI), each a plan.backend.Backend. registry.py is the one
place a backend is chosen. A backend imports no other backend."""
