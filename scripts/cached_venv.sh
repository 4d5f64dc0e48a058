#!/usr/bin/env bash
# Make a venv with a requirements file's packages at LINK, reused across clones: `make tools`, `make sdk-tests`' SDK
# venvs and `make audit`'s (docs/testing.md, "Warm caches").
#
# usage: VENV_CACHE=DIR scripts/cached_venv.sh PYTHON LINK REQUIREMENTS [PIP_ARG...]
#
# With VENV_CACHE set, the venv lives in DIR/venvs/, named for the requirements file and keyed by its content, the
# Python's version and the interpreter's real path: reused when that venv is complete (its .installed), made there
# otherwise; LINK becomes a symlink to it. A fresh clone with an unchanged requirements file and Python finds it
# made; a changed file or another Python gets a venv of its own. With VENV_CACHE empty, the venv is made at LINK
# itself, again whenever the requirements file is newer than it. PIP_ARGs (--cert, --index-url) go to pip install.
set -euo pipefail

[ $# -ge 3 ] || { echo "usage: VENV_CACHE=DIR $0 PYTHON LINK REQUIREMENTS [PIP_ARG...]" >&2; exit 2; }
python=$1 link=${2%/} requirements=$3
shift 3

install() {  # install DIR [PIP_ARG...]: a new venv at DIR with the requirements; DIR/.installed says it is complete
  local dir=$1
  shift
  rm -rf "$dir"
  "$python" -m venv "$dir"
  "$dir/bin/pip" install --quiet --disable-pip-version-check "$@" -r "$requirements"
  touch "$dir/.installed"
}

if [ -z "${VENV_CACHE:-}" ]; then
  [ ! -L "$link" ] || rm "$link"  # a link to a cached venv, from a run with VENV_CACHE set
  if [ ! -f "$link/.installed" ] || [ "$requirements" -nt "$link/.installed" ]; then
    echo "cached_venv: making $link from $requirements (no VENV_CACHE)"
    install "$link" "$@"
  fi
  exit 0
fi

key=$("$python" - "$requirements" <<'EOF'
import hashlib, os, sys
with open(sys.argv[1], "rb") as requirements:
    digest = hashlib.sha256(requirements.read())
digest.update(os.path.realpath(sys.executable).encode())
print("py%d.%d.%d-%s" % (*sys.version_info[:3], digest.hexdigest()[:16]))
EOF
)
name=${requirements%.txt}
venvs="$VENV_CACHE/venvs"
venv="$venvs/${name//\//-}-$key"
mkdir -p "$venvs"
exec 9>"$venv.lock"
flock 9  # another make (another clone, the other lane) making the same venv: wait for it, then reuse it
if [ ! -f "$venv/.installed" ]; then
  echo "cached_venv: making $venv from $requirements"
  install "$venv" "$@"
fi
if [ -e "$link" ] && [ ! -L "$link" ]; then
  # A venv make made in the clone (before the cache, or with VENV_CACHE empty; .tools-installed: the tools' stamp
  # before this script) gives way to the link. Anything else stays: a venv of one's own, a folder.
  if [ ! -f "$link/pyvenv.cfg" ] || { [ ! -f "$link/.installed" ] && [ ! -f "$link/.tools-installed" ]; }; then
    echo "cached_venv: $link exists and is not a venv make made; not replacing it (move it, or pass VENV_CACHE=)" >&2
    exit 1
  fi
  rm -rf "$link"
fi
mkdir -p "$(dirname "$link")"
ln -sfn "$venv" "$link"
