#!/usr/bin/env bash
# usage: apply-patch.sh DIR PATCH   (build-horovod.sh and mxnet-lazy-imports.sh)
#
# Applies PATCH (a/ b/ paths) to the tree at DIR, exactly: no fuzz, no reversed or already-applied hunks, no
# backup files. A new version of the patched project fails the build here until someone reviews the patch.
# patch(1) is installed by build-horovod.sh, in the same stage (only /opt/venv reaches the image).
set -euo pipefail

dir=${1:?usage: apply-patch.sh DIR PATCH}
patch_file=$(realpath "${2:?usage: apply-patch.sh DIR PATCH}")  # patch reads it after entering DIR
command -v patch >/dev/null || { echo "apply-patch.sh: no patch(1) in this stage; build-horovod.sh installs it" >&2; exit 1; }
patch --directory="$dir" --strip=1 --forward --batch --fuzz=0 --no-backup-if-mismatch --input="$patch_file"
