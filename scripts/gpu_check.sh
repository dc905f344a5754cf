#!/usr/bin/env bash
# The one-shot GPU check of the CUDA path, for a machine with a CUDA GPU (torch preinstalled,
# nvcc, no network), from a fresh checkout, in under 8 minutes: a global deadline caps every
# phase, each phase has its own cap, and everything is written into OUT_DIR as it goes (a
# phase that is killed still leaves its log):
#   probe.log         what the build and tests rely on: Python headers of the interpreter that
#                     has torch, nvcc, /dev/shm size, compute mode, CUDA IPC between two
#                     processes on one device, torch / CUDA / NCCL versions
#   build.log         CMake configure + build of the extension (tests off: no GTest needed)
#   tests.log         pytest tests/python/test_cuda.py -v, with per-test durations
#   tests.xml         the same as JUnit XML
#   bench_threads.log all_reduce, threads as ranks (no time slicing) vs a device copy
#   bench_procs_N.log torch_ring_backend.bench --device cuda, N processes on cuda:0 (vs nccl where it runs)
#   summary.log       one screen: each phase's time and exit code, the test counts, every
#                     failing or skipped test with its reason, the benchmarks' last rows
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
PHASES="$OUT/.phases"
: > "$PHASES"

note() { echo "[$(($(date +%s) - START)) s] $*" | tee -a "$PHASES"; }
# Seconds left for a phase: its own cap, or what remains before the deadline (at least 5).
budget() {
  local left=$((DEADLINE - $(date +%s)))
  [ "$left" -lt 5 ] && left=5
  [ "$1" -lt "$left" ] && echo "$1" || echo "$left"
}

summary() {
  {
    echo "== gpu_check summary ($(date -u +%FT%TZ), $(($(date +%s) - START)) s)"
    cat "$PHASES"
    grep -E '^(torch|device|nccl|python headers|/dev/shm|compute mode|cuda ipc|nvcc)' \
      "$OUT/probe.log" 2>/dev/null | head -8
    if [ -f "$OUT/tests.xml" ]; then
      "$PY" - "$OUT/tests.xml" <<'EOF'
import sys
import xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
suites = [root] if root.tag == "testsuite" else list(root)
counts = {k: sum(int(s.get(k, 0)) for s in suites) for k in ("tests", "failures", "errors", "skipped")}
print("tests: {tests} run, {failures} failed, {errors} errors, {skipped} skipped".format(**counts))
skipped = {}
for case in root.iter("testcase"):
    for kind in ("failure", "error"):
        el = case.find(kind)
        if el is not None:
            msg = (el.get("message") or el.text or "").strip().splitlines()
            print(f"  {kind.upper():7} {case.get('name')} ({float(case.get('time', 0)):.0f} s): "
                  f"{(msg[0] if msg else '')[:150]}")
    el = case.find("skipped")
    if el is not None:
        skipped.setdefault((el.get("message") or "").strip()[:150], []).append(case.get("name"))
for reason, names in skipped.items():
    print(f"  SKIPPED {len(names)}: {reason} ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''})")
EOF
    fi
    for f in "$OUT"/bench_threads.log "$OUT"/bench_procs_*.log; do
      [ -f "$f" ] || continue
      echo "-- $(basename "$f") (last rows)"
      grep -vE '^\s*$' "$f" | tail -4
    done
  } > "$OUT/summary.log" 2>&1
  cat "$OUT/summary.log"
}
trap summary EXIT

# ---- 1. probe --------------------------------------------------------------------------------
note "probe"
timeout "$(budget 60)" bash -c '
  PY=$1
  echo "nvcc: $(nvcc --version 2>&1 | tail -1)"
  inc=$("$PY" -c "import sysconfig; print(sysconfig.get_paths()[\"include\"])")
  if [ -f "$inc/Python.h" ]; then echo "python headers: $inc/Python.h"; else echo "python headers: MISSING in $inc (the build needs Python.h)"; fi
  echo "/dev/shm: $(df -h /dev/shm 2>/dev/null | tail -1)"
  echo "compute mode: $(nvidia-smi --query-gpu=compute_mode --format=csv,noheader 2>&1 | head -1)"
  nvidia-smi 2>&1 | head -15
  "$PY" - <<EOF
import torch
print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    print("device", p.name, "SMs", p.multi_processor_count, "count", torch.cuda.device_count())
try:
    print("nccl", ".".join(map(str, torch.cuda.nccl.version())))
except Exception as e:  # noqa: BLE001
    print("nccl unavailable:", e)
EOF
  # CUDA IPC between two processes on one device: a child writes into a tensor it received
  # through torch.multiprocessing (which shares CUDA memory by cudaIpcGetMemHandle).
  "$PY" - <<EOF
import torch
import torch.multiprocessing as mp
def child(t, q):
    t.fill_(7)
    torch.cuda.synchronize()
    q.put(True)
if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    t = torch.zeros(1 << 20, device="cuda")
    q = ctx.Queue()
    p = ctx.Process(target=child, args=(t, q))
    p.start(); ok = q.get(timeout=60); p.join(30)
    torch.cuda.synchronize()
    print("cuda ipc between processes:", "works" if ok and bool((t == 7).all()) else "FAILED")
EOF
' _ "$PY" > "$OUT/probe.log" 2>&1
note "probe exit $?"

# ---- 2. build --------------------------------------------------------------------------------
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
  tail -25 "$OUT/build.log" | tee -a "$PHASES"
  exit 1
fi
cp "$BUILD"/_C*.so "$BUILD"/_C.torch_version torch_ring_backend/
export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH}
"$PY" -c "import torch_ring_backend" >> "$OUT/build.log" 2>&1 || { note "import failed"; tail -5 "$OUT/build.log" >> "$PHASES"; exit 1; }

# ---- 3. the GPU tests ----------------------------------------------------------------------
note "tests"
TIMEOUT_ARGS=()
"$PY" -c "import pytest_timeout" 2>/dev/null && TIMEOUT_ARGS=(--timeout 150)
# INFO: each rank logs its CUDA links (or why they were declined) once per group.
TORCH_RING_DEBUG=INFO timeout "$(budget 240)" "$PY" -m pytest tests/python/test_cuda.py -v \
  -p no:cacheprovider -rsfE --durations=0 --junitxml="$OUT/tests.xml" \
  "${TIMEOUT_ARGS[@]}" > "$OUT/tests.log" 2>&1
rc=$?
note "tests exit $rc: $(grep -E '^=+ .*(passed|failed|error|skipped).* =+$' "$OUT/tests.log" | tail -1)"

# ---- 4. benchmarks --------------------------------------------------------------------------
note "benchmark: threads as ranks"
timeout "$(budget 50)" "$PY" scripts/cuda_threads_bench.py --iters 20 \
  > "$OUT/bench_threads.log" 2>&1
note "threads bench exit $?"

# nccl as the reference only where it allows several ranks on one GPU (NCCL >= 2.30 with
# NCCL_MULTI_RANK_GPU_ENABLE=1); otherwise the ring alone (its roof% column still compares
# with a device copy).
REF=$("$PY" -c "
import torch, torch.distributed as dist
ok = dist.is_nccl_available() and tuple(torch.cuda.nccl.version()[:2]) >= (2, 30)
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
