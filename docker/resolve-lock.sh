#!/usr/bin/env bash
# usage: resolve-lock.sh cpu|gpu OUTPUT   (the lock stage of docker/Dockerfile, after
# sourcing pip-preflight.sh; the version ARGs in the environment)
#
# Resolves a flavor's whole Python stack from the requirements files without installing it, with the
# newest pip on purpose (the pip it picks is then pinned in the lock), and writes the constraints file
# (lock.py) to OUTPUT: `make lock` / `make lock-gpu` export it to docker/constraints-FLAVOR.txt.
#   both: also requirements-smdebug.txt, resolved without dependencies, as install-smdebug.sh installs it (its
#         wheel's own pins cannot be met here; its other requirements are in the stack already).
#   gpu: also the builder-only nvcc wheel of CUDA_VERSION (the cuda-toolkit stage's headers).
set -euo pipefail

flavor=${1:?usage: resolve-lock.sh cpu|gpu OUTPUT}
output=${2:?usage: resolve-lock.sh cpu|gpu OUTPUT}
here=$(dirname "$0")
case $flavor in
  cpu) extra=(); mxnet="mxnet" ;;
  gpu) extra=("nvidia-cuda-nvcc-cu${CUDA_VERSION%%.*}==${CUDA_VERSION:?}"); mxnet="mxnet-cu110" ;;
  *) echo "resolve-lock.sh: unknown flavor '$flavor' (cpu or gpu)" >&2; exit 2 ;;
esac

pip install --no-cache-dir --upgrade pip
HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_PYTORCH=1 \
  pip install --no-cache-dir --dry-run --ignore-installed --report /tmp/report.json \
    -r "$here/requirements-build.txt" -r "$here/requirements-$flavor.txt" \
    "$here/opencv-python-shim" "horovod==${HOROVOD_VERSION:?}" "${extra[@]}"
pip install --no-cache-dir --dry-run --ignore-installed --no-deps --report /tmp/report-smdebug.json \
  -r "$here/requirements-smdebug.txt"
python "$here/lock.py" "$flavor" /tmp/report.json /tmp/report-smdebug.json > "$output"
grep -q "^$mxnet==${MXNET_VERSION:?}$" "$output"
grep -q "^smdebug==${SMDEBUG_VERSION:?}$" "$output"
