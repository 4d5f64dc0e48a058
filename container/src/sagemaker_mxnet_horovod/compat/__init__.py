"""SageMaker compatibility: what scripts and SDKs written for AWS's images expect, kept exact. toolkit_env.py
is the sagemaker-training toolkit's SM_* environment; sdk_v3.py turns SDK v3's ModelTrainer MPI driver files
into this launcher's settings. AWS's MXNet framework toolkit module (`sagemaker_mxnet_container
.training_utils`, which scripts import by that name) is its own package beside this one."""
