#!/usr/bin/env bash
# usage: mxnet-lazy-imports.sh cpu|gpu   (the venv stage of docker/Dockerfile,
# after the Horovod build and trim-venv.sh)
#
# Applies docker/mxnet-lazy-imports.patch to the installed MXNet: `import mxnet` stops importing scipy,
# distutils (setuptools), mxnet.test_utils and requests; each is imported on first use (the patch's header
# says where and why; docs/scale.md has the figures). Fails the build when the patch no longer applies
# exactly (no fuzz) or when `import mxnet, horovod.mxnet` loads any of them again.
set -euo pipefail

flavor=${1:?usage: mxnet-lazy-imports.sh cpu|gpu}
case $flavor in
  cpu) stub_env=() ;;
  gpu) stub_env=(LD_LIBRARY_PATH=/opt/cuda/lib64/stubs) ;;
  *) echo "mxnet-lazy-imports.sh: unknown flavor '$flavor' (cpu or gpu)" >&2; exit 2 ;;
esac
patch_file=$(dirname "$0")/mxnet-lazy-imports.patch

site=$(python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
"$(dirname "$0")/apply-patch.sh" "$site" "$patch_file"
# The bytecode of the patched files, as pip wrote it for the rest (the image never writes bytecode at run time).
mapfile -t patched < <(sed -n 's|^+++ b/||p' "$patch_file")
(cd "$site" && python -m compileall -q "${patched[@]}")

env "${stub_env[@]}" python - <<'EOF'
import sys
import mxnet, horovod.mxnet  # noqa: E401,F401
lazy = ("scipy", "setuptools", "distutils", "requests", "mxnet.test_utils")
loaded = sorted({name for name in sys.modules for prefix in lazy if name == prefix or name.startswith(prefix + ".")})
assert not loaded, f"import mxnet, horovod.mxnet loads {loaded}: docker/mxnet-lazy-imports.patch no longer does its job"
print(f"mxnet-lazy-imports.sh: import mxnet, horovod.mxnet loads {len(sys.modules)} modules, none of {lazy}")
EOF
