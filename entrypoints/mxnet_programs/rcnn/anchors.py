"""Whether the RPN has enough anchors on the job's smallest input for the proposals it keeps.

GluonCV's RPN keeps its `post_nms` best proposals after NMS (the model zoo's 2000 in training, `rpn-test-post-nms`'s
1000 in validation) by slicing them from one per anchor: an input with fewer anchors ends in MXNet's "slice_axis ...
Invalid end for end=2000 as axis_size is 1950" (the C4 RPN has 15 anchors per 16 px cell: a 200 x 160 input has
13 x 10 x 15 = 1950). The counts stay GluonCV's (they set how many RoIs the RCNN head samples from); the job stops at
start naming the settings to change instead. The anchors come from the network itself: its feature maps' shapes for
an input size (MXNet's shape inference, no forward) and its anchor generators on them.
"""

from mxnet_programs.process import ProgramError


def resized(width, height, short, max_size):
    """(width, height) of an image after GluonCV's R-CNN presets resize it (resize_short_within, no multiple): the
    short side to `short`, unless the long side would then round above `max_size`, which then sets the scale."""
    scale = short / min(width, height)
    if round(scale * max(width, height)) > max_size:
        scale = max_size / max(width, height)
    return int(round(width * scale)), int(round(height * scale))


def smallest(sizes):
    """The sizes no other size is at most as wide and as high as: the anchor count grows with each side, so its
    minimum over `sizes` is at one of them."""
    found, lowest_height = [], None
    for width, height in sorted(set(sizes)):
        if lowest_height is None or height < lowest_height:
            found.append((width, height))
            lowest_height = height
    return found


def anchor_count(mx, net, width, height):
    """The anchors GluonCV's RPN scores on a width x height input."""
    features = net.features(mx.sym.var("data"))
    features = list(features) if isinstance(features, (list, tuple)) else [features]
    _, shapes, _ = mx.sym.Group(features).infer_shape(data=(1, 3, height, width))
    generators = net.rpn.anchor_generator
    generators = list(generators) if isinstance(generators, mx.gluon.nn.HybridSequential) else [generators]
    counts = []
    for generator, shape in zip(generators, shapes):
        device = next(iter(generator.collect_params().values())).list_ctx()[0]  # where its anchors are (a GPU's)
        counts.append(generator(mx.nd.zeros((1, 1, *shape[2:]), ctx=device)).shape[1])
    return sum(counts)


def fewest(mx, net, image_sizes, short, max_size):
    """(anchors, input width, input height) of the input with the fewest anchors among the images' resized sizes."""
    inputs = smallest(resized(w, h, short, max_size) for w, h in image_sizes)
    return min((anchor_count(mx, net, w, h), w, h) for w, h in inputs)


def check(mx, net, train_sizes, val_sizes, short, max_size):
    """Raises ProgramError when the train images' smallest input (at the smallest short side) has fewer anchors than
    the RPN keeps in training, or the validation images' than `rpn-test-post-nms`."""
    low, high = (short, short) if isinstance(short, int) else short
    stages = [("training", train_sizes, low, net.rpn._train_post_nms, "the model zoo's, no hyperparameter")]
    if val_sizes:
        stages.append(("validation", val_sizes, high, net.rpn._test_post_nms, "rpn-test-post-nms"))
    for stage, sizes, side, kept, setting in stages:
        anchors, width, height = fewest(mx, net, sizes, side, max_size)
        if anchors < kept:
            lower = f", or a lower rpn-test-post-nms (at most {anchors})" if stage == "validation" else ""
            raise ProgramError(
                f"the {stage} images are too small for the RPN: resized to short side {side}, max-size {max_size}, "
                f"the smallest input is {width} x {height} px, where the RPN has {anchors} anchors, fewer than the "
                f"{kept} proposals it keeps after NMS in {stage} ({setting}): pass a larger short and max-size (the "
                f"images are resized up as well as down){lower}")
