#!/usr/bin/env bash
# The torch releases users have, beside the one scripts/test.sh builds against (2.14.1): for
# each, a venv with that torch (scripts/torch_venv.sh), the module built against it, then
# `torch-ring-check --nproc 2`, the tests of what torch's profiler and flight recorder see, and
# PyTorch's own DistributedTest on "ring" at world 3, run from a scratch copy of the tree
# holding that module:
#   2.11.0, Python 3.12  the oldest declared; the GPU machine's stack. Its module is the one
#                        scripts/gpu_prebuild.sh makes, and scripts/gpu_check.sh is dry-run with
#                        it here (no GPU: the probe finds none, the tests skip), which must use
#                        the prebuilt module and never build; then scripts/test_cuda_emulated.sh
#                        runs the CUDA tests over the emulated runtime with this torch.
#   2.13.0, Python 3.11  a CPU build of torch (this machine's disk): the module without CUDA
#   2.15.0, Python 3.11  the newest release
#
#   scripts/torch_matrix.sh [TORCH_VERSION ...]      (default: all three)
#
# The venvs live outside the tree ($TORCH_RING_VENVS, default ~/.cache/torch_ring_backend/venvs),
# like pip's cache: a clean clone on a machine that ran this before reuses them; a fresh
# machine downloads each torch once (about 0.5 GB, plus CUDA libraries not on its disk).
# Prints one line per release with its counts and seconds; exits 1 if any step failed.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
MATRIX=build/matrix
mkdir -p "$MATRIX"
WANT=("$@")
[ ${#WANT[@]} -eq 0 ] && WANT=(2.11.0 2.13.0 2.15.0)

python_for() {
  case "$1" in
    2.11.*) echo 3.12 ;;
    *) echo 3.11 ;;
  esac
}
# pyenv's own interpreter first (its shims exist for versions that are not active, and then
# only print "command not found"); each candidate must run.
interpreter() {
  local cand
  for cand in $(ls "$(pyenv root 2>/dev/null)"/versions/"$1".*/bin/"python$1" 2>/dev/null | sort -r) \
              $(command -v "python$1"); do
    "$cand" -c "import sys" >/dev/null 2>&1 && { echo "$cand"; return 0; }
  done
}

# A copy of the tracked (and new, not ignored) files: the module and its version file go into
# the copy's package, never into this checkout's (whose module is another torch's).
scratch_tree() {
  local dest=$1
  rm -rf "$dest" && mkdir -p "$dest"
  git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
    [ -f "$f" ] && mkdir -p "$dest/$(dirname "$f")" && cp -p "$f" "$dest/$f"
  done
}

failed=0
results=()
for torch in "${WANT[@]}"; do
  started=$(date +%s)
  pyver=$(python_for "$torch")
  py=$(interpreter "$pyver")
  venv=${TORCH_RING_VENVS:-$HOME/.cache/torch_ring_backend/venvs}/torch-$torch-py$pyver
  tree=$MATRIX/tree-$torch
  log=$MATRIX/torch-$torch.log
  : > "$log"
  step="venv"
  ok=1
  echo "== torch $torch, Python $pyver"
  if [ -z "$py" ]; then
    echo "   no python$pyver here" | tee -a "$log"
    ok=0
  fi
  if [ $ok -eq 1 ] && [ "$torch" = 2.11.0 ]; then
    # The GPU machine's module, made as it is made for that machine.
    step="gpu_prebuild"
    bash scripts/gpu_prebuild.sh build/gpu-prebuilt >> "$log" 2>&1 || ok=0
    modules=build/gpu-prebuilt
  elif [ $ok -eq 1 ]; then
    bash scripts/torch_venv.sh "$venv" "$py" "$torch" >> "$log" 2>&1 || ok=0
    step="build"
    modules=$MATRIX/cmake-torch-$torch
    if [ $ok -eq 1 ]; then
      cmake -S . -B "$modules" -G Ninja -DPython_EXECUTABLE="$venv/bin/python" \
        -DRING_CUDA=AUTO -DRING_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=Release >> "$log" 2>&1 &&
        cmake --build "$modules" --target _C -j "$(nproc)" >> "$log" 2>&1 || ok=0
    fi
  fi
  vpy=$venv/bin/python
  if [ $ok -eq 1 ]; then
    step="check"
    scratch_tree "$tree"
    cp "$modules"/_C*.so "$modules"/_C.torch_version "$tree/torch_ring_backend/"
    (cd "$tree" && PYTHONPATH="$PWD" "$vpy" -m torch_ring_backend.check --nproc 2) >> "$log" 2>&1 || ok=0
  fi
  if [ $ok -eq 1 ]; then
    # What torch's own tools see of ring changes with torch: the profiler's spans and
    # record_param_comms, the dumps fr_trace reads, torch 2.15's flight-recorder hook,
    # TORCH_FR_BUFFER_SIZE=0; torch 2.15's abort and completion hooks and ephemeral timeouts
    # (skipped before); merge_remote_group, whose caller torch 2.15 changed.
    step="profiler, flight recorder and torch 2.15 call tests"
    (cd "$tree" && PYTHONPATH="$PWD" "$vpy" -m pytest -q -p no:cacheprovider \
      tests/python/test_profiler.py tests/python/test_fr_dump.py tests/python/test_torch_215_calls.py \
      tests/python/test_merge_remote_group.py \
      "tests/python/test_registration.py::test_torch_does_not_hook_its_flight_recorder_onto_ring" \
      "tests/python/test_faults.py::test_torch_fr_buffer_size_zero_turns_the_flight_recorder_off") \
      >> "$log" 2>&1 || ok=0
  fi
  if [ $ok -eq 1 ]; then
    step="DistributedTest"
    (cd "$tree" && PYTHONPATH="$PWD" "$vpy" tests/torch_suite/run_suite.py --world 3) \
      > "$log.suite" 2>&1 || ok=0
    cat "$log.suite" >> "$log"
  fi
  if [ $ok -eq 1 ] && [ "$torch" = 2.11.0 ]; then
    # gpu_check.sh as the GPU machine runs it, with the carried module: it must not build.
    step="gpu_check dry run"
    gdir=$MATRIX/gpu-check-dry-run
    rm -rf "$gdir"
    scratch_tree "$tree-gpu"
    mkdir -p "$tree-gpu/build" && cp -r build/gpu-prebuilt "$tree-gpu/build/"
    (cd "$tree-gpu" && PYTHON="$vpy" GPU_CHECK_SECONDS=300 bash scripts/gpu_check.sh "$ROOT/$gdir") \
      >> "$log" 2>&1
    # What comes back from the GPU machine: at most 8 files (scripts/gpu_check_gather.sh).
    returned=$(find "$gdir" -type f | wc -l)
    echo "   gpu_check dry run: $returned file(s) in its OUT: $(ls "$gdir" | tr '\n' ' ')"
    if ! grep -q "module: prebuilt for" "$gdir/phases.log" || grep -q "building" "$gdir/phases.log" ||
       ! grep -q "module exit 0" "$gdir/phases.log" || [ "$returned" -gt 8 ] ||
       ! tar -tzf "$gdir/all_logs.tar.gz" | grep -q "tests.xml"; then
      ok=0
    fi
    sed -n '1,40p' "$gdir/summary.log" | sed 's/^/   /'
  fi
  if [ $ok -eq 1 ] && [ "$torch" = 2.11.0 ]; then
    # The CUDA path's torch layer over the emulated runtime with the GPU machine's torch and
    # Python: what differs between torch releases (allocator, streams, Futures, c10d's calls)
    # shows here before a GPU run. Built from this tree into a folder of its own.
    step="emulated CUDA runtime"
    PYTHON="$vpy" CUDA_EMULATED_BUILD_DIR="$MATRIX/cuda-emulated-$torch" \
      bash scripts/test_cuda_emulated.sh -p no:cacheprovider > "$log.emulated" 2>&1 || ok=0
    cat "$log.emulated" >> "$log"
    echo "   emulated CUDA runtime: $(tail -1 "$log.emulated")"
  fi
  counts=$(grep -E "^run_suite: [0-9]+ tests in" "$log.suite" 2>/dev/null | tail -1)
  verdict=$([ $ok -eq 1 ] && echo PASS || echo "FAILED at $step (see $log)")
  line="torch $torch (Python $pyver): $verdict in $(($(date +%s) - started)) s; $counts"
  echo "   $line"
  results+=("$line")
  [ $ok -eq 1 ] || { failed=1; tail -30 "$log" | sed 's/^/   | /'; }
done
echo "== torch matrix"
printf '   %s\n' "${results[@]}"
exit $failed
