#!/usr/bin/env bash
# A virtual environment with one exact torch release, for building and testing this project
# against a torch other than the one installed system-wide (the GPU machine's torch for
# scripts/gpu_prebuild.sh; the oldest and newest releases for scripts/torch_matrix.sh).
#
#   scripts/torch_venv.sh VENV PYTHON TORCH_VERSION
#
# Idempotent: a venv that already has that torch is left as it is (so CI on a machine that ran
# it before pays nothing). This machine's pip configuration caps torch at the releases on its
# disk (a constraints file); the venv's installs point PIP_CONSTRAINT at an empty file instead,
# so that any release comes from the package registry, with its CUDA libraries where they are
# not on the disk already.
set -euo pipefail
if [ $# -ne 3 ]; then
  echo "usage: scripts/torch_venv.sh VENV PYTHON TORCH_VERSION" >&2
  exit 2
fi
VENV=$1
PY=$2
TORCH=$3
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" - "$TORCH" <<'PY' 2>/dev/null
import sys, torch
sys.exit(0 if torch.__version__.split("+")[0] == sys.argv[1] else 1)
PY
then
  echo "torch_venv: $VENV already has torch $TORCH"
  exit 0
fi
mkdir -p "$(dirname "$VENV")"
NO_CAP="$(cd "$(dirname "$VENV")" && pwd)/no-constraints.txt"
: > "$NO_CAP"
"$PY" -m venv "$VENV"
start=$(date +%s)
# setuptools 77+ and the test tools the project's checks use (pytest for the suites, numpy and
# expecttest for torch's own DistributedTest); cmake and ninja come from the system.
# (This machine's extra indexes are folders that lack most projects: pip warns for each.)
PIP_CONSTRAINT="$NO_CAP" "$VENV/bin/python" -m pip install -q "torch==$TORCH" "setuptools>=77" \
  pytest numpy expecttest 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
echo "torch_venv: $VENV: torch $("$VENV/bin/python" -c 'import torch; print(torch.__version__)')," \
  "Python $("$VENV/bin/python" -c 'import platform; print(platform.python_version())')," \
  "in $(($(date +%s) - start)) s"
