#!/usr/bin/env bash
# The package as a user gets it: build a wheel (python -m build --wheel --no-isolation), install
# it into a fresh virtual environment, and run `torch-ring-check --nproc 2` from outside the
# source tree. The venv sees the system's torch (--system-site-packages: torch is gigabytes),
# so the check also proves that torch_ring_backend itself was imported from the venv's copy,
# not from this checkout's editable install.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
WORK=${WHEEL_CHECK_DIR:-build/wheel-check}
rm -rf "$WORK" && mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)

ROOT=$(pwd)
# From $WORK: in the repository root, its build/ folder would shadow the `build` package.
(cd "$WORK" && "$PYTHON" -m build --wheel --no-isolation --outdir "$WORK/dist" "$ROOT") \
  >"$WORK/build.log" 2>&1 || { tail -30 "$WORK/build.log"; exit 1; }
wheel=$(ls "$WORK"/dist/torch_ring_backend-*.whl)
echo "wheel: $(basename "$wheel")"

"$PYTHON" -m venv --system-site-packages "$WORK/venv"
"$WORK/venv/bin/pip" install -q --no-deps "$wheel"

cd "$WORK"  # outside the source tree: nothing of the checkout is importable from here
where=$("$WORK/venv/bin/python" -c 'import torch_ring_backend as t; print(t.__file__)')
case "$where" in
  "$WORK/venv/"*) echo "imported from: $where" ;;
  *) echo "wheel_check: torch_ring_backend came from $where, not from the venv" >&2; exit 1 ;;
esac
"$WORK/venv/bin/torch-ring-check" --nproc 2
