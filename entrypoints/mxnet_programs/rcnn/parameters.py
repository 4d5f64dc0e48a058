"""How the network's parameters are set up for the optimizer, as GluonCV's R-CNN scripts set them: float16 under
`amp`, and weight decay on the biases or not (`bias-decay`)."""


def cast_to_float16(net):
    """GluonCV's --amp besides amp.init(): the network's parameters (and so its gradients) in float16 but BatchNorm's,
    which stay float32 as its operator needs (MXNet's BatchNorm.cast keeps float32 when asked for float16; GluonCV's
    scripts set it again by name). The optimizer keeps float32 master weights (multi_precision). GluonCV's scripts
    also set the box encoder's means and stds to float32: in GluonCV 0.10 they are not the network's parameters (its
    RCNN target generator is held outside them), so the cast leaves them float32."""
    net.cast("float16")


def decay_biases(net, on):
    """Weight decay on the biases (wd_mult 1, GluonCV's train_faster_rcnn.py and its 2018 scripts) or not (wd_mult 0,
    its train_mask_rcnn.py)."""
    for param in net.collect_params(".*bias").values():
        param.wd_mult = 1.0 if on else 0.0
