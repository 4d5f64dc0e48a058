#!/bin/bash
# Bash only ([[ ]], arrays, BASH_VERSION): it works only when its #! line is honoured, as under the toolkit.
set -euo pipefail
args=("$@")
[[ -n "${BASH_VERSION:-}" ]]
rank=${OMPI_COMM_WORLD_RANK:-0}
printf '%s\n' "bash ${BASH_VERSION%%.*}" "cwd $PWD" "args ${args[*]}" > "$SM_MODEL_DIR/rank-$rank.txt"
