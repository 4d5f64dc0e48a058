#!/usr/bin/env bash
# usage: finish-image.sh cpu|gpu   (the last RUN of the image stage of docker/Dockerfile, with the
# finish-kit stage, which holds this script, bind-mounted read-write: writes to it are discarded)
#
# The part of the image both flavors share, after /opt/venv and /opt/entrypoints are in place:
#  1. The launcher (container/, stdlib-only) into /opt/venv: no index and no build isolation are needed,
#     setuptools is already in the venv. Installed from the bind-mounted kit, so no source tree or build
#     directory ends up in a layer.
#     With it, sagemaker_mxnet_debugger.pth into site-packages: run at every interpreter start, it arms the
#     zero-code-change SageMaker Debugger hook when the job has a hook configuration (one stat otherwise); and
#     sagemaker_mxnet_compression.pth, which makes hvd.DistributedTrainer compress gradients as the launcher's
#     horovod_gradient_compression says (one environment lookup when it is not set); and
#     sagemaker_mxnet_straggler.pth, which times hvd.DistributedTrainer's allreduces for the straggler report
#     (horovod_straggler_report; one environment lookup when it is off).
#  2. The held packages, /etc/sagemaker-mxnet-horovod/constraints.txt: every package of /opt/venv at its version,
#     checked against the flavor's lock (held_packages.py). The launcher installs a user's requirements.txt with it.
#  3. Smoke check: pip check, `train` on PATH, the launcher imports.
#  4. The image's own SBOM (CycloneDX JSON: Debian and Python packages) and license report in
#     /usr/share/sbom (`make sbom` copies them out; docs/supply-chain.md). Last, so they describe the
#     final filesystem: nothing may change it after this script. Offline: syft reads the dpkg database,
#     the Python packages' metadata and /usr/share/doc/*/copyright; its cache goes to /tmp, a tmpfs
#     mount in this RUN.
set -euo pipefail

flavor=${1:?usage: finish-image.sh cpu|gpu}
kit=$(dirname "$0")
case $flavor in
  cpu) mxnet="mxnet" ;;
  gpu) mxnet="mxnet-cu110" ;;
  *) echo "finish-image.sh: unknown flavor '$flavor' (cpu or gpu)" >&2; exit 2 ;;
esac

PIP_DISABLE_PIP_VERSION_CHECK=1 pip install --no-cache-dir --no-deps --no-build-isolation --no-index \
  "$kit/launcher"
site=$(python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
install -m 0644 "$kit/launcher/src/sagemaker_mxnet_debugger/sagemaker_mxnet_debugger.pth" \
  "$kit/launcher/src/sagemaker_mxnet_compression/sagemaker_mxnet_compression.pth" \
  "$kit/launcher/src/sagemaker_mxnet_straggler/sagemaker_mxnet_straggler.pth" "$site/"
python "$kit/held_packages.py" "$flavor" "$kit/constraints-$flavor.txt" /etc/sagemaker-mxnet-horovod/constraints.txt
grep -q "^$mxnet==" /etc/sagemaker-mxnet-horovod/constraints.txt
pip check
command -v train synth-data
python -c "import sagemaker_mxnet_horovod.cli, sagemaker_mxnet_data.synth_data, sagemaker_mxnet_debugger.zero_code_change"
HOROVOD_GRADIENT_COMPRESSION=fp16 python -c "import sys
assert any(getattr(f, 'name', None) == 'horovod.mxnet' for f in sys.meta_path), 'sagemaker_mxnet_compression.pth is not armed'"
SMMH_STRAGGLER_REPORT=/tmp/straggler python -c "import sys
assert any(getattr(f, 'name', None) == 'horovod.mxnet' for f in sys.meta_path), 'sagemaker_mxnet_straggler.pth is not armed'"

sbom=/usr/share/sbom
install -d -m 0755 "$sbom"
SYFT_CHECK_FOR_APP_UPDATE=false SYFT_CACHE_DIR=/tmp/syft XDG_CACHE_HOME=/tmp \
  "$kit/syft" scan dir:/ --quiet --source-name "sagemaker-mxnet-horovod-$flavor" \
    --exclude './proc/**' --exclude './sys/**' --exclude './dev/**' --exclude './mnt/**' --exclude './tmp/**' \
    --output "cyclonedx-json=$sbom/sbom.cdx.json"
python "$kit/license_report.py" "$sbom/sbom.cdx.json" --root / --flavor "$flavor" > "$sbom/licenses.md"
grep -q "\"purl\": *\"pkg:pypi/$mxnet@" "$sbom/sbom.cdx.json"
