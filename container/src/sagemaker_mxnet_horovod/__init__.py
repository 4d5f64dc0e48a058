"""SageMaker training launcher for distributed MXNet + Horovod over MPI."""

__version__ = "0.1.0"
