#!/usr/bin/env bash
# Every test: set up (if needed), the C++ unit tests (no torch), then the Python suite.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each step's time, printed when the next begins (CI must stay under 60 minutes on a fresh
# machine: these say where the time goes).
step_started=$SECONDS
step() {
  [ -z "${step_name:-}" ] || echo "   ($step_name: $((SECONDS - step_started)) s)"
  step_name=$1
  step_started=$SECONDS
  echo "== $1"
}
trap '[ -z "${step_name:-}" ] || echo "   ($step_name: $((SECONDS - step_started)) s; all steps: $SECONDS s)"' EXIT

step "set-up"
bash scripts/setup_env.sh

step "layering of csrc/ (no header includes a layer above its own)"
python3 scripts/check_layers.py

step "every file that README, docs/ and the sources name exists"
python3 scripts/check_paths.py

step "no comment in csrc/ states a measured figure (they live in docs/)"
python3 scripts/check_comment_figures.py

step "C++ unit tests (the CUDA kernels run on the host; where nvcc exists, the host side of the CUDA path)"
BUILD_DIR=build/cpp-tests
cmake -S . -B "$BUILD_DIR" -G Ninja -DRING_BUILD_EXTENSION=OFF -DRING_CUDA=AUTO \
  -DRING_BUILD_TESTS=ON >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)"
(cd "$BUILD_DIR" && ctest --output-on-failure -j1)

step "aarch64: the C++ core cross-built and tested under qemu-user (the NEON loops among them), then the GH200 build"
bash scripts/test_aarch64.sh

step "the CUDA ring kernels, run on the host, under ThreadSanitizer"
bash scripts/tsan.sh

step "fuzzing the TCP wire parsers (bounded)"
FUZZ_SECONDS=${FUZZ_SECONDS:-30} bash scripts/fuzz.sh

step "Python tests"
python3 -m pytest tests/python -q "$@"

step "the CUDA path's torch layer: real torch over the emulated CUDA runtime"
bash scripts/test_cuda_emulated.sh

step "PyTorch's own distributed test suite on \"ring\" (tests/torch_suite: world 3, and 8)"
python3 tests/torch_suite/run_suite.py --ci

step "other torch releases: 2.11.0 (Python 3.12, the GPU machine's; gpu_check.sh dry run), 2.13.0 (CPU), 2.15.0"
bash scripts/torch_matrix.sh

step "the wheel, installed into a fresh venv, checked from outside the source tree"
bash scripts/wheel_check.sh

step "CPU speed floors: ratios to gloo and Open MPI in one run, far below what is measured; small-call latency over torch's fake, per job"
python3 scripts/perf_floor.py
python3 scripts/latency_floor.py

step "mutation check, CI subset (each mutant must be caught by its tests)"
# A clean checkout (CI's clone) is mutated in place with the build folders above, restored
# after each mutant; a checkout with changes gets a scratch copy instead (build/mutation).
if git diff --quiet HEAD 2>/dev/null; then
  bash scripts/mutate.sh --quick --in-place
else
  bash scripts/mutate.sh --quick
fi
