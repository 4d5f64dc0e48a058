"""parameters: `amp`'s float16 network with float32 BatchNorm and box encoder, GluonCV's --amp (the parameters' dtypes,
without a GPU: the cast itself needs none), and `bias-decay` (what SGD does to a bias with and without it). The
expected dtypes and decays come from the network's blocks by their type, not from the parameter names the code
matches."""

import numpy as np
import pytest
from mxnet_programs.rcnn import parameters

pytestmark = pytest.mark.usefixtures("needs_mxnet")


def blocks(block):
    yield block
    for child in block._children.values():
        yield from blocks(child)


def params_by_block(net, kinds):
    """{parameter name: whether its block is one of `kinds`} over the network's blocks."""
    found = {}
    for block in blocks(net):
        for param in block._reg_params.values():
            found[param.name] = found.get(param.name, False) or isinstance(block, kinds)
    return found


@pytest.mark.parametrize("name", ["faster_rcnn_resnet50_v1b_coco", "mask_rcnn_resnet50_v1b_coco"])
def test_amp_casts_all_but_batchnorm_and_the_box_encoder_to_float16(name):
    """Every parameter of the network in float16 but its BatchNorm blocks' (by block type), data and declared dtype;
    the box encoder's means and stds, which the forward uses, in float32."""
    import mxnet as mx
    from gluoncv import model_zoo
    from gluoncv.nn.coder import NormalizedPerClassBoxCenterEncoder

    net = model_zoo.get_model(name, pretrained=False, pretrained_base=False)
    net.initialize()  # no forward (a training one costs 20 s here): the parameters of known shape get data
    parameters.cast_to_float16(net)
    kept = params_by_block(net, mx.gluon.nn.BatchNorm)
    assert sum(kept.values()) > 100 and sum(not k for k in kept.values()) > 50, kept
    params = net.collect_params().values()
    assert {p.name for p in params} == set(kept)
    wrong = {p.name: p.dtype for p in params if np.dtype(p.dtype) != np.dtype("float32" if kept[p.name] else "float16")}
    assert not wrong, wrong
    with_data = [p for p in params if p._data is not None]
    assert len(with_data) > 100 and all(p.data().dtype == np.dtype(p.dtype) for p in with_data)
    generator = net._target_generator()  # the RCNN target generator the forward uses, outside the parameters
    encoder = params_by_block(generator, NormalizedPerClassBoxCenterEncoder)
    assert len(encoder) == 2 and all(encoder.values()), encoder  # its means and stds
    assert {np.dtype(p.dtype) for p in generator.collect_params().values()} == {np.dtype("float32")}


def test_bias_decay_decays_biases_only_when_on():
    """One SGD step with zero gradients (lr 0.1, wd 0.5): a weight moves by -lr x wd x itself either way, a bias only
    with bias decay."""
    import mxnet as mx

    lr, wd = 0.1, 0.5
    for on in (False, True):
        net = mx.gluon.nn.Dense(2, in_units=3, bias_initializer=mx.init.Constant(1.0))
        net.initialize()
        parameters.decay_biases(net, on)
        start = {k: p.data().asnumpy().copy() for k, p in net.collect_params().items()}
        trainer = mx.gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": lr, "wd": wd})
        with mx.autograd.record():
            loss = (net(mx.nd.ones((1, 3))) * 0).sum()
        loss.backward()
        trainer.step(1)
        after = {k: p.data().asnumpy() for k, p in net.collect_params().items()}
        for key in start:
            decays = on or not key.endswith("bias")
            expected = start[key] * (1 - lr * wd) if decays else start[key]
            assert np.allclose(after[key], expected, rtol=1e-6), (on, key, after[key], start[key])


def test_bias_decay_reaches_every_convolution_and_dense_bias_of_the_network():
    import mxnet as mx
    from gluoncv import model_zoo

    net = model_zoo.get_model("mask_rcnn_resnet50_v1b_coco", pretrained=False, pretrained_base=False)
    biases = {block.bias.name for block in blocks(net)
              if isinstance(block, (mx.gluon.nn.Conv2D, mx.gluon.nn.Dense, mx.gluon.nn.Conv2DTranspose))
              and block.bias is not None}
    assert len(biases) > 5, biases
    for on in (False, True):
        parameters.decay_biases(net, on)
        mults = {p.name: p.wd_mult for p in net.collect_params().values()}
        assert {n for n, m in mults.items() if m == 0.0} == (set() if on else biases)
