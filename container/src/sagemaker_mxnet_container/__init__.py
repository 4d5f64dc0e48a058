"""The import name of AWS's MXNet training toolkit (PyPI sagemaker-mxnet-training), for scripts written for
AWS's MXNet images: `from sagemaker_mxnet_container.training_utils import save, scheduler_host`.

Our own implementation of the helpers user scripts call, not AWS's package: its only release line pins
retrying==1.3.3 (this image's sagemaker-training needs the 1.4.2 it has) and its `training` module is the
parameter-server launcher, which `train` replaces here. See docs/compatibility.md.
"""

from sagemaker_mxnet_container import training_utils  # noqa: F401 - as in AWS's package
