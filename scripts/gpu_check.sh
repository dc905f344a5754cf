#!/usr/bin/env bash
# The GPU check of the CUDA ring kernels, for a machine with a CUDA GPU (torch preinstalled,
# nvcc, no network), from a fresh checkout: build, the GPU tests, and benchmarks, in under 8
# minutes (a global deadline caps every phase). Writes 7 logs into OUT_DIR:
#   env.log           nvidia-smi, nvcc, torch / CUDA / NCCL versions
#   build.log         CMake configure + build of the extension (tests off: no GTest needed)
#   tests.log         pytest tests/python/test_cuda.py -v
#   bench_threads.log all_reduce, threads as ranks (no time slicing) vs a device copy
#   bench_procs_2.log bench.py --device cuda, 2 processes on cuda:0 (vs nccl where it runs)
#   bench_procs_4.log the same with 4 processes
#   summary.log       phases, times and exit codes
#
#   scripts/gpu_check.sh OUT_DIR
set -uo pipefail
if [ $# -ne 1 ]; then
  echo "usage: scripts/gpu_check.sh OUT_DIR" >&2
  exit 2
fi
mkdir -p "$1"
OUT=$(cd "$1" && pwd)
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-python3}
START=$(date +%s)
DEADLINE=$((START + ${GPU_CHECK_SECONDS:-460}))
: > "$OUT/summary.log"

note() { echo "[$(($(date +%s) - START)) s] $*" | tee -a "$OUT/summary.log"; }
# Seconds left for a phase: its own cap, or what remains before the deadline (at least 5).
budget() {
  local left=$((DEADLINE - $(date +%s)))
  [ "$left" -lt 5 ] && left=5
  [ "$1" -lt "$left" ] && echo "$1" || echo "$left"
}

note "environment"
{
  nvidia-smi || true
  nvcc --version || true
  "$PY" - <<'EOF'
import torch
print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())
if torch.cuda.is_available():
    print("device", torch.cuda.get_device_name(0), "count", torch.cuda.device_count())
try:
    import torch.cuda.nccl as nccl
    print("nccl", nccl.version())
except Exception as e:  # noqa: BLE001
    print("nccl unavailable:", e)
EOF
} > "$OUT/env.log" 2>&1

note "build (MAX_JOBS=${MAX_JOBS:-16}, TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0})"
BUILD=build/gpu-check
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}
timeout "$(budget 300)" bash -c "
  cmake -S . -B '$BUILD' -G Ninja -DPython_EXECUTABLE='$(command -v "$PY")' -DRING_CUDA=ON \
    -DRING_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=Release &&
  cmake --build '$BUILD' --target _C -j '${MAX_JOBS:-16}'" > "$OUT/build.log" 2>&1
rc=$?
note "build exit $rc"
if [ $rc -ne 0 ]; then
  tail -30 "$OUT/build.log" >> "$OUT/summary.log"
  exit 1
fi
cp "$BUILD"/_C*.so torch_ring_backend/
export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH}
"$PY" -c "import torch_ring_backend" >> "$OUT/build.log" 2>&1 || { note "import failed"; exit 1; }

note "tests"
TIMEOUT_ARGS=()
"$PY" -c "import pytest_timeout" 2>/dev/null && TIMEOUT_ARGS=(--timeout 150)
# INFO: each rank logs its CUDA links (or why they were declined) once per group.
TORCH_RING_DEBUG=INFO timeout "$(budget 220)" "$PY" -m pytest tests/python/test_cuda.py -v \
  -p no:cacheprovider \
  "${TIMEOUT_ARGS[@]}" > "$OUT/tests.log" 2>&1
rc=$?
note "tests exit $rc: $(grep -E '^(=+ .*(passed|failed|error).* =+)$' "$OUT/tests.log" | tail -1)"

note "benchmark: threads as ranks"
timeout "$(budget 60)" "$PY" scripts/cuda_threads_bench.py --iters 20 \
  > "$OUT/bench_threads.log" 2>&1
note "threads bench exit $?"

# nccl as the reference only where it allows several ranks on one GPU (NCCL >= 2.30 with
# NCCL_MULTI_RANK_GPU_ENABLE=1); otherwise the ring alone (its roof% column still compares
# with a device copy).
REF=$("$PY" -c "
import torch, torch.distributed as dist
ok = dist.is_nccl_available() and torch.cuda.nccl.version() >= (2, 30, 0)
print('nccl' if ok else 'none')" 2>/dev/null || echo none)
for n in 2 4; do
  note "benchmark: $n processes on cuda:0, reference $REF"
  log="$OUT/bench_procs_$n.log"
  NCCL_MULTI_RANK_GPU_ENABLE=1 timeout "$(budget 45)" "$PY" -m torch_ring_backend.bench \
    --device cuda --nproc "$n" -b 64K -e 64M --iters 10 --warmup 2 --reference "$REF" \
    > "$log" 2>&1
  rc=$?
  if [ $rc -ne 0 ] && [ "$REF" != none ]; then
    note "with nccl: exit $rc; again without a reference"
    echo "---- again with --reference none" >> "$log"
    timeout "$(budget 40)" "$PY" -m torch_ring_backend.bench --device cuda --nproc "$n" \
      -b 64K -e 64M --iters 10 --warmup 2 --reference none >> "$log" 2>&1
    rc=$?
  fi
  note "bench $n processes exit $rc"
done
note "done"
