"""anchors: the job stops at start when the RPN has fewer anchors on its smallest input than proposals it keeps (the
C4 RPN on 200 x 160 px: 1950 anchors for 2000 in training), both models, training and validation; GluonCV's resize
as the oracle of the input sizes, the anchor counts by hand."""

import math

import pytest
from mxnet_programs.process import ProgramError
from mxnet_programs.rcnn import anchors

pytestmark = pytest.mark.usefixtures("needs_mxnet")


def test_resized_is_gluoncvs_resize():
    import mxnet as mx
    from gluoncv.data.transforms.image import resize_short_within

    for width, height, short, max_size in [(200, 160, 160, 200), (640, 480, 800, 1333), (500, 333, 800, 1333),
                                           (1000, 100, 800, 1333), (333, 500, 256, 1024), (517, 389, 600, 1000),
                                           (100, 100, 256, 200), (612, 612, 800, 1333)]:
        image = mx.nd.zeros((height, width, 3), dtype="uint8")
        out = resize_short_within(image, short, max_size)
        assert anchors.resized(width, height, short, max_size) == (out.shape[1], out.shape[0]), (width, height)


def test_smallest_keeps_the_sizes_nothing_is_inside():
    sizes = [(300, 200), (200, 300), (250, 250), (300, 300), (200, 300), (400, 150)]
    assert anchors.smallest(sizes) == [(200, 300), (250, 250), (300, 200), (400, 150)]


@pytest.fixture(scope="module")
def nets():
    from gluoncv import model_zoo

    found = {}
    for name in ("faster_rcnn_resnet50_v1b_coco", "mask_rcnn_resnet50_v1b_coco", "faster_rcnn_fpn_resnet50_v1b_coco"):
        net = model_zoo.get_model(name, pretrained=False, pretrained_base=False)
        net.initialize()
        found[name] = net
    return found


def c4_anchors(width, height):
    return math.ceil(width / 16) * math.ceil(height / 16) * 15  # 5 scales x 3 ratios per 16 px cell


def fpn_anchors(width, height):
    return sum(math.ceil(width / s) * math.ceil(height / s) * 3 for s in (4, 8, 16, 32, 64))


def test_anchor_counts_are_the_networks(nets):
    import mxnet as mx

    for name, count in (("faster_rcnn_resnet50_v1b_coco", c4_anchors), ("mask_rcnn_resnet50_v1b_coco", c4_anchors),
                        ("faster_rcnn_fpn_resnet50_v1b_coco", fpn_anchors)):
        for width, height in ((200, 160), (256, 256), (333, 201)):
            assert anchors.anchor_count(mx, nets[name], width, height) == count(width, height), (name, width, height)
    assert c4_anchors(200, 160) == 1950  # the slice_axis error's axis_size


@pytest.mark.parametrize("name", ["faster_rcnn_resnet50_v1b_coco", "mask_rcnn_resnet50_v1b_coco"])
def test_too_small_inputs_stop_the_job_naming_the_settings(nets, name):
    import mxnet as mx

    net = nets[name]
    small, big = [(200, 160)], [(200, 160), (640, 480)]
    with pytest.raises(ProgramError) as info:  # training: 1950 anchors for 2000 proposals
        anchors.check(mx, net, small, big, 160, 200)
    assert str(info.value) == (
        "the training images are too small for the RPN: resized to short side 160, max-size 200, the smallest input "
        "is 200 x 160 px, where the RPN has 1950 anchors, fewer than the 2000 proposals it keeps after NMS in "
        "training (the model zoo's, no hyperparameter): pass a larger short and max-size (the images are resized up "
        "as well as down)")
    anchors.check(mx, net, small, big, (256, 320), 1000)  # the random short side's minimum: 320 x 256, 4000 anchors
    with pytest.raises(ProgramError, match=r"^the training images .* short side 160, max-size 1000"):
        anchors.check(mx, net, small, [], (160, 320), 1000)
    # validation, at the short side's maximum: a 1000 x 50 image becomes 400 x 20 px, 25 x 2 x 15 = 750 anchors
    train, val = [(400, 400)], [(640, 480), (1000, 50)]
    with pytest.raises(ProgramError) as info:
        anchors.check(mx, net, train, val, (200, 256), 400)
    assert str(info.value) == (
        "the validation images are too small for the RPN: resized to short side 256, max-size 400, the smallest "
        "input is 400 x 20 px, where the RPN has 750 anchors, fewer than the 1000 proposals it keeps after NMS in "
        "validation (rpn-test-post-nms): pass a larger short and max-size (the images are resized up as well as "
        "down), or a lower rpn-test-post-nms (at most 750)")
    kept = net.rpn._test_post_nms
    try:
        net.rpn._test_post_nms = 750  # what the program sets for rpn-test-post-nms 750
        anchors.check(mx, net, train, val, (200, 256), 400)
    finally:
        net.rpn._test_post_nms = kept


def test_anchors_are_counted_where_the_network_lives():
    """A GPU rank's network holds its anchors on its GPU: counted there. cpu(1) stands in for it (Gluon refuses an
    input on another device than the parameters)."""
    import mxnet as mx
    from gluoncv import model_zoo

    net = model_zoo.get_model("faster_rcnn_resnet50_v1b_coco", pretrained=False, pretrained_base=False)
    net.initialize(ctx=mx.cpu(1))
    assert anchors.anchor_count(mx, net, 200, 160) == c4_anchors(200, 160)
