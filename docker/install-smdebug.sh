#!/usr/bin/env bash
# usage: install-smdebug.sh cpu|gpu   (the venv stage of docker/Dockerfile, last; after sourcing
# pip-preflight.sh; the versions come from PIP_CONSTRAINT)
#
# SageMaker Debugger's client library, smdebug (1.0.34, its last release), as AWS's MXNet images carried it, ported
# to this image's Python 3.11 stack. Its wheel pins two things that cannot be met here:
#   pyinstrument==3.4.2  whose C extension (pyinstrument-cext) does not build on Python 3.11: pyinstrument 5 instead
#                        (smdebug's Python profiler uses its Profiler and JSONRenderer, both still there);
#   protobuf<=3.20.3     because its *_pb2.py modules were made by protoc 3.x, which protobuf >= 4 refuses to load;
#                        sagemaker-training needs protobuf >= 5.28.1 and tensorboardX >= 3.20. The modules are
#                        rewritten from their own serialized descriptors (smdebug_port.py) for the venv's protobuf.
# So its wheel is unpacked, ported, repacked (the wheel's RECORD is rewritten), and installed --no-deps with
# pyinstrument; its other requirements (numpy, packaging, boto3) are in the venv already and pip check holds them.
# Smoke check: a Gluon hook saves a weight, its gradient and a loss for 2 steps, and smdebug's trial API reads
# them back with values that changed between the steps.
set -euo pipefail

flavor=${1:?usage: install-smdebug.sh cpu|gpu}
case $flavor in
  cpu) stub_env=() ;;
  gpu) stub_env=(LD_LIBRARY_PATH=/opt/cuda/lib64/stubs) ;;  # importing mxnet-cu110 needs a libcuda.so.1
  *) echo "install-smdebug.sh: unknown flavor '$flavor' (cpu or gpu)" >&2; exit 2 ;;
esac
here=$(dirname "$0")
work=/tmp/build/smdebug

pip download --no-cache-dir --no-deps --dest "$work/download" -r "$here/requirements-smdebug.txt"
python -m wheel unpack --dest "$work/unpacked" "$work"/download/smdebug-*.whl
python "$here/smdebug_port.py" "$work"/unpacked/smdebug-*
mkdir -p "$work/ported"
python -m wheel pack --dest-dir "$work/ported" "$work"/unpacked/smdebug-*
pip install --no-cache-dir --no-deps "$work"/ported/smdebug-*.whl "$work"/download/pyinstrument-*.whl
rm -rf "$work"
pip check

cd /tmp
env "${stub_env[@]}" python - <<'PY'
import shutil
import tempfile

import mxnet as mx
import smdebug.mxnet as smd
from smdebug.trials import create_trial

out = tempfile.mkdtemp()
shutil.rmtree(out)
net = mx.gluon.nn.Dense(2, in_units=3, prefix="check_")
net.initialize()
loss = mx.gluon.loss.L2Loss()  # named l2loss0: smdebug's losses collection matches "...loss<N>_output"
hook = smd.Hook(out_dir=out, save_config=smd.SaveConfig(save_interval=1),
                include_collections=["weights", "gradients", "losses"])
hook.register_block(net)
hook.register_block(loss)
trainer = mx.gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.01})
for _ in range(3):
    with mx.autograd.record():
        value = loss(net(mx.nd.arange(12).reshape((4, 3))), mx.nd.ones((4, 2)))
    value.backward()
    trainer.step(4)
hook.close()
trial = create_trial(out)
names = set(trial.tensor_names())
assert {"check_weight", "gradient/check_weight", "l2loss0_output_0"} <= names, names
assert trial.steps()[:2] == [0, 1], trial.steps()
weight = trial.tensor("check_weight")
assert (weight.value(0) != weight.value(1)).any(), "the saved weight did not change between steps"
shutil.rmtree(out)
print(f"install-smdebug.sh: a hook saved and smdebug's trial API read back {sorted(names)} at steps {trial.steps()}")
PY
