"""The layer profile of a GluonCV R-CNN for the link probe's gpu-like compute (runs in the image).

One training forward of the model (random weights, one image of --height x --width px, one ground-truth box, the
model zoo's sampler: 128 RoIs for the head), with a hook on every block that holds weights: for each, in the order
the forward pass ran them, the multiply-adds it computed and the parameters of it that training sums across ranks
(GluonCV's collect_train_params(), less those without a gradient). The probe gives each layer its share of a
step's compute by its multiply-adds and a gradient of its parameters' size, so a GPU host's gradients appear over
the backward pass where this network's do: the RCNN head's first, the backbone's early stages last. Frozen layers
(ResNet's stem and first stage) run forward only. What the hooks do not see (RoIAlign, the proposals' NMS, the
sampler, the losses) is left out: it has no weights, and its share of a GPU's step was not measured here.

  python rcnn_profile.py faster_rcnn_resnet50_v1b_coco > profile.json
"""

import argparse
import json
import warnings

import mxnet as mx
from gluoncv import model_zoo
from mxnet import autograd, gluon


def multiply_adds(block, inputs, output) -> int:
    weight = block.weight.shape
    if isinstance(block, gluon.nn.Conv2DTranspose):  # each input element meets a (cout/g, kh, kw) kernel slice
        return inputs[0].size * (weight[1] * weight[2] * weight[3])
    if isinstance(block, gluon.nn.Dense):
        return output.size * weight[1]
    return output.size * (weight[1] * weight[2] * weight[3])  # Conv2D: (cout, cin/g, kh, kw)


def profile(model: str, height: int, width: int) -> list:
    net = model_zoo.get_model(model, pretrained=False, pretrained_base=False)
    net.initialize()
    trained = {p.name for p in net.collect_train_params().values() if p.grad_req != "null"}
    layers: dict = {}

    def hook(block, inputs, output):
        output = output[0] if isinstance(output, (list, tuple)) else output
        layer = layers.setdefault(block.name, {
            "name": block.name,
            "parameters": sum(p.data().size for p in block.params.values() if p.name in trained),
            "multiply_adds": 0})
        layer["multiply_adds"] += int(multiply_adds(block, inputs, output))  # a block may run more than once

    kinds = (gluon.nn.Conv2D, gluon.nn.Dense, gluon.nn.Conv2DTranspose)
    net.apply(lambda block: block.register_forward_hook(hook) if isinstance(block, kinds) else None)
    image = mx.nd.random.uniform(shape=(1, 3, height, width))
    box = mx.nd.array([[[width * 0.2, height * 0.2, width * 0.6, height * 0.7]]])
    with autograd.record():
        outputs = net(image, box, mx.nd.zeros((1, 1, 1)))
    mx.nd.waitall()
    del outputs
    return list(layers.values())  # insertion order: the order the forward pass ran them


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model", help="a GluonCV model zoo name, e.g. faster_rcnn_resnet50_v1b_coco")
    parser.add_argument("--height", type=int, default=800)
    parser.add_argument("--width", type=int, default=1067, help="COCO's typical 4:3 at a short side of 800")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    print(json.dumps({"model": args.model, "image": [args.height, args.width],
                      "layers": profile(args.model, args.height, args.width)}))


if __name__ == "__main__":
    main()
