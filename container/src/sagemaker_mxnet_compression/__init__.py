"""Horovod's gradient compression for scripts that do not choose it: the launcher's horovod_gradient_compression
hyperparameter, applied inside every rank by the .pth hook beside this package (hook.py)."""
