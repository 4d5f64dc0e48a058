#!/bin/sh
# Builds the throwaway image of docs/benchmarks.md's second tuning session: IMAGE plus the candidates as
# environment switches (tuning-knobs.patch on the programs' session.py: PROTO_GROUPS, PROTO_VOTE_EVERY,
# PROTO_HVD_NICE; proto_gloo.py: PROTO_GLOO=1). Not part of the product.
#   benchmarks/probes/prototypes/build.sh [IMAGE [TAG]]   (defaults: sagemaker-mxnet-horovod:cpu smh-prototype:cpu)
# Then e.g.: python3 -m benchmarks.horovod_tuning --image smh-prototype:cpu --data MNIST_DIR \
#   --variant "ungrouped:PROTO_GROUPS=0" --variant "grouped:PROTO_GROUPS=1" --variant "gloo:PROTO_GLOO=1"
set -eu
here=$(cd "$(dirname "$0")" && pwd)
image=${1:-sagemaker-mxnet-horovod:cpu}
tag=${2:-smh-prototype:cpu}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$here/../../../entrypoints/mxnet_programs/session.py" "$here/proto_gloo.py" "$here/proto_gloo.pth" "$work/"
patch --quiet "$work/session.py" "$here/tuning-knobs.patch"
cat > "$work/Dockerfile" <<DOCKERFILE
FROM $image
COPY session.py /opt/entrypoints/mxnet_programs/session.py
COPY proto_gloo.py proto_gloo.pth /opt/venv/lib/python3.11/site-packages/
DOCKERFILE
docker build -q -t "$tag" "$work"
