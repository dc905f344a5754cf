#!/usr/bin/env bash
# The one-shot GPU check of the CUDA path, for a machine with a CUDA GPU (torch preinstalled,
# nvcc, no network), from a fresh checkout, in under 8 minutes: every phase has its own cap, a
# global deadline caps them all, and everything is written into OUT_DIR as it goes (a phase that
# is stopped still leaves its log, a test phase its XML):
#   probe.log         Python headers, nvcc, /dev/shm, compute mode, torch / CUDA / NCCL versions,
#                     CUDA IPC between two processes (scripts/gpu_probe.py, a 20 s wait)
#   build.log         the module: the prebuilt one (scripts/gpu_prebuild.sh, carried in
#                     build/gpu-prebuilt) when its Python and torch are this machine's and its
#                     sources' stamp (scripts/source_stamp.sh) is this tree's, else a CMake build
#                     of the extension (tests off)
#   tests.log/.xml    pytest tests/python/test_cuda.py, all but the world-3/4 tests and the
#                     threads-as-ranks test
#   tests_more.*      the world-3/4 tests, with a budget of their own (ranks as processes on one
#                     GPU time-slice: every hop costs a slice, so they are the slow ones)
#   tests_alias.*     tests/python/test_cuda_alias.py and test_cuda_device_factor.py: inputs that
#                     are views of their outputs, dropped staged outputs, a factor tensor on the
#                     GPU (the same files run over the emulated runtime in CI)
#   bench_threads.log all_reduce, threads as ranks (no time slicing) vs a device copy
#   bench_procs_N.log torch_ring_backend.bench --device cuda, N processes on cuda:0 (vs nccl where it runs)
#   tests_threads.*   the threads-as-ranks test, last: the one that can hang on a device (its
#                     ranks share one context), so a hang costs its own cap and nothing else
#   summary.log       one screen (scripts/gpu_check_summary.py), from whatever state the run reached
# The tests' group timeout is TORCH_RING_TEST_TIMEOUT_S=20 s: a collective that hangs fails in
# 20 s, not in the 120 s that would eat a phase's cap.
#
#   scripts/gpu_check.sh OUT_DIR
#   scripts/gpu_check.sh --plan        the phase caps and their sum, nothing run
#   scripts/gpu_check.sh --which-module whether the prebuilt module would be used, and why not
#
# Without a GPU the same script runs as a dry run (probe says no device, tests skip, benchmarks
# fail at once): that is how its mechanics are checked here (tests/python/test_gpu_check.py).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

# Phase caps in seconds, the one place they are set. With the prebuilt module the whole plan
# is 470 s; a build instead of it (300 s) leaves the later phases what the deadline allows.
CAP_PROBE=30
CAP_MODULE_PREBUILT=40
CAP_MODULE_BUILD=300
CAP_SMOKE=30
CAP_STRESS=60
CAP_TESTS=120
CAP_TESTS_MORE=60
CAP_TESTS_ALIAS=45
CAP_BENCH=20   # each of: threads, 2 processes, 4 processes
CAP_TESTS_THREADS=35
PLAN_PREBUILT=$((CAP_PROBE + CAP_MODULE_PREBUILT + CAP_SMOKE + CAP_STRESS + CAP_TESTS \
  + CAP_TESTS_MORE + CAP_TESTS_ALIAS + 3 * CAP_BENCH + CAP_TESTS_THREADS))

PY=${PYTHON:-python3}
PREBUILT=${GPU_PREBUILT:-build/gpu-prebuilt}
# "3.12 2.11.0+cu130 <sources' stamp>": what the prebuilt module must have been built for and
# from. A module of other sources (a stale build/gpu-prebuilt) would test old code silently.
here="$("$PY" -c "import platform, torch; print('.'.join(platform.python_version_tuple()[:2]), torch.__version__)" 2>/dev/null) $(bash scripts/source_stamp.sh)"
built_for=""
if [ -f "$PREBUILT/BUILD_INFO" ]; then
  built_for="$(awk '$1=="python"{p=$2} $1=="torch"{t=$2} $1=="sources"{s=$2} END{print p, t, s}' "$PREBUILT/BUILD_INFO")"
fi
prebuilt_usable() {
  [ -n "$built_for" ] && [ "$built_for" = "$here" ] && ls "$PREBUILT"/_C*.so >/dev/null 2>&1
}
if [ "${1:-}" = "--which-module" ]; then
  if prebuilt_usable; then echo "prebuilt ($built_for)"; else echo "build: the prebuilt module is for '$built_for', here is '$here'"; fi
  exit 0
fi
if [ "${1:-}" = "--plan" ]; then
  echo "probe $CAP_PROBE"
  echo "module $CAP_MODULE_PREBUILT (prebuilt) or $CAP_MODULE_BUILD (build)"
  echo "smoke $CAP_SMOKE"
  echo "stress $CAP_STRESS"
  echo "tests $CAP_TESTS"
  echo "tests_more $CAP_TESTS_MORE"
  echo "tests_alias $CAP_TESTS_ALIAS"
  echo "bench $CAP_BENCH x 3"
  echo "tests_threads $CAP_TESTS_THREADS"
  echo "total_prebuilt $PLAN_PREBUILT"
  echo "deadline ${GPU_CHECK_SECONDS:-$PLAN_PREBUILT}"
  exit 0
fi
if [ $# -ne 1 ]; then
  echo "usage: scripts/gpu_check.sh OUT_DIR | --plan" >&2
  exit 2
fi
mkdir -p "$1"
OUT=$(cd "$1" && pwd)
# Every phase writes here; the EXIT trap hands back what fits (scripts/gpu_check_gather.sh: at
# most 7 files and one archive of all, as the GPU machine returns 8 files at most).
LOGS=${GPU_CHECK_LOGS:-$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX")}
mkdir -p "$LOGS"
START=$(date +%s)
DEADLINE=$((START + ${GPU_CHECK_SECONDS:-$PLAN_PREBUILT}))
PHASES="$LOGS/.phases"
: > "$PHASES"
# Threads as ranks on one GPU: streams share hardware queues (CUDA's default is 8; torch's pool
# has about 128 streams), and one rank's blocked stream wait can sit in front of another rank's
# kernel in the same queue. 32 queues (the most) make that rarer, never impossible: so the
# threads-as-ranks code (tests, stress, benchmark) enqueues every rank's call, meets at a
# barrier, and only then waits.
export CUDA_DEVICE_MAX_CONNECTIONS=${CUDA_DEVICE_MAX_CONNECTIONS:-32}

note() { echo "[$(($(date +%s) - START)) s] $*" | tee -a "$PHASES"; }
# Seconds left for a phase: its own cap, or what remains before the deadline (at least 5).
budget() {
  local left=$((DEADLINE - $(date +%s)))
  [ "$left" -lt 5 ] && left=5
  [ "$1" -lt "$left" ] && echo "$1" || echo "$left"
}
# The summary (also on stdout, which the GPU tool's reply shows), then what comes back.
trap '"$PY" scripts/gpu_check_summary.py "$LOGS"; bash scripts/gpu_check_gather.sh "$LOGS" "$OUT"' EXIT

# ---- 1. probe --------------------------------------------------------------------------------
note "probe"
timeout "$(budget $CAP_PROBE)" bash -c '
  PY=$1
  echo "nvcc: $(nvcc --version 2>&1 | tail -1)"
  inc=$("$PY" -c "import sysconfig; print(sysconfig.get_paths()[\"include\"])")
  if [ -f "$inc/Python.h" ]; then echo "python headers: $inc/Python.h"; else echo "python headers: MISSING in $inc (the build needs Python.h)"; fi
  echo "/dev/shm: $(df -h /dev/shm 2>/dev/null | tail -1)"
  echo "compute mode: $(nvidia-smi --query-gpu=compute_mode --format=csv,noheader 2>&1 | head -1)"
  nvidia-smi 2>&1 | head -15
  "$PY" scripts/gpu_probe.py --device cuda --wait 20
' _ "$PY" > "$LOGS/probe.log" 2>&1
note "probe exit $?"

# ---- 2. the module: prebuilt when it matches this machine, else built here --------------------
if prebuilt_usable; then
  note "module: prebuilt for $here ($(awk '$1=="commit"{print $2}' "$PREBUILT/BUILD_INFO"))"
  timeout "$(budget $CAP_MODULE_PREBUILT)" bash -c "
    cp '$PREBUILT'/_C*.so '$PREBUILT'/_C.torch_version torch_ring_backend/ &&
    cat '$PREBUILT/BUILD_INFO'" > "$LOGS/build.log" 2>&1
  rc=$?
else
  if [ -n "$built_for" ]; then
    note "module: the prebuilt one is for '$built_for' (python, torch, sources), this machine and tree are '$here': building"
  else
    note "module: none prebuilt ($PREBUILT/BUILD_INFO): building"
  fi
  # A build needs Python.h; where the probe found none, say so now rather than after minutes.
  if grep -q "python headers: MISSING" "$LOGS/probe.log" 2>/dev/null; then
    note "module: no usable prebuilt module and no Python headers to build one: $(grep 'python headers' "$LOGS/probe.log"); carry build/gpu-prebuilt (scripts/gpu_prebuild.sh) from this commit"
    exit 1
  fi
  BUILD=build/gpu-check
  export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}
  timeout "$(budget $CAP_MODULE_BUILD)" bash -c "
    cmake -S . -B '$BUILD' -G Ninja -DPython_EXECUTABLE='$(command -v "$PY")' -DRING_CUDA=ON \
      -DRING_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=Release &&
    cmake --build '$BUILD' --target _C -j '${MAX_JOBS:-16}' &&
    cp '$BUILD'/_C*.so '$BUILD'/_C.torch_version torch_ring_backend/" > "$LOGS/build.log" 2>&1
  rc=$?
fi
note "module exit $rc"
if [ $rc -ne 0 ]; then
  tail -25 "$LOGS/build.log" | tee -a "$PHASES"
  exit 1
fi
export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH}
if ! "$PY" -c "import torch_ring_backend" >> "$LOGS/build.log" 2>&1; then
  note "import failed"
  tail -5 "$LOGS/build.log" >> "$PHASES"
  exit 1
fi

export TORCH_RING_TEST_TIMEOUT_S=${TORCH_RING_TEST_TIMEOUT_S:-20}

# ---- 3. smoke: the first signal, in seconds (scripts/gpu_smoke.py) ----------------------------
# Kernel resource use, 2 processes x all_reduce of 4 KiB, 1 MiB, 64 MiB with their link lines,
# the closed form and us per call, one call with ranks as threads.
note "smoke"
timeout "$(budget $CAP_SMOKE)" "$PY" scripts/gpu_smoke.py > "$LOGS/smoke.log" 2>&1
note "smoke exit $?: $(tail -1 "$LOGS/smoke.log")"

# ---- 4. memory ordering under stress (tests/python/cuda_ordering_stress.py) -------------------
# Ranks as threads (kernels side by side, not time-sliced), the smallest FIFO, 300 calls whose
# values differ by call, element and rank, each checked bitwise.
note "ordering stress"
timeout "$(budget $CAP_STRESS)" "$PY" tests/python/cuda_ordering_stress.py --world 2,4 \
  --calls 300 > "$LOGS/stress.log" 2>&1
note "ordering stress exit $?: $(grep -E '^ordering stress, world' "$LOGS/stress.log" | tr '\n' ' ')"

# ---- 5. the GPU tests ----------------------------------------------------------------------
# INFO: each rank logs its CUDA links (or why they were declined) once per group.
MORE_RANKS="more_ranks or three_ranks"
THREADS="threads_as_ranks"
# One test phase: LABEL CAP NAME (its NAME.xml and NAME.log) and pytest's arguments (files, -k);
# notes its exit and pytest's summary line.
test_phase() {
  local label=$1 cap=$2 name=$3
  shift 3
  note "$label"
  TORCH_RING_DEBUG=INFO bash scripts/gpu_check_pytest.sh "$(budget "$cap")" "$LOGS/$name.xml" \
    "$LOGS/$name.log" "$@"
  note "$label exit $?: $(grep -E '^=+ .*(passed|failed|error|skipped|no tests).* =+$' "$LOGS/$name.log" | tail -1)"
}
test_phase "tests" "$CAP_TESTS" tests tests/python/test_cuda.py -k "not ($MORE_RANKS or $THREADS)"
test_phase "tests, more ranks" "$CAP_TESTS_MORE" tests_more tests/python/test_cuda.py -k "$MORE_RANKS"
test_phase "tests, aliases and a device factor" "$CAP_TESTS_ALIAS" tests_alias \
  tests/python/test_cuda_alias.py tests/python/test_cuda_device_factor.py

# ---- 6. benchmarks --------------------------------------------------------------------------
note "benchmark: threads as ranks"
timeout "$(budget $CAP_BENCH)" "$PY" scripts/cuda_threads_bench.py --iters 20 \
  > "$LOGS/bench_threads.log" 2>&1
note "threads bench exit $?"

# nccl as the reference only where it allows several ranks on one GPU (NCCL >= 2.30 with
# NCCL_MULTI_RANK_GPU_ENABLE=1); otherwise the ring alone (its roof% column still compares
# with a device copy). Settle calls on CUDA are few (bench/measure.py: settle_calls).
REF=$("$PY" -c "
import torch, torch.distributed as dist
ok = torch.cuda.is_available() and dist.is_nccl_available() and tuple(torch.cuda.nccl.version()[:2]) >= (2, 30)
print('nccl' if ok else 'none')" 2>/dev/null || echo none)
for n in 2 4; do
  note "benchmark: $n processes on cuda:0, reference $REF"
  NCCL_MULTI_RANK_GPU_ENABLE=1 timeout "$(budget $CAP_BENCH)" "$PY" -m torch_ring_backend.bench \
    --device cuda --nproc "$n" -b 64K -e 64M --iters 10 --warmup 2 --reference "$REF" \
    > "$LOGS/bench_procs_$n.log" 2>&1
  note "bench $n processes exit $?"
done

# ---- 7. last, the riskiest test: threads as ranks share one context ----------------------------
test_phase "tests, threads as ranks" "$CAP_TESTS_THREADS" tests_threads tests/python/test_cuda.py \
  -k "$THREADS"
note "done"
