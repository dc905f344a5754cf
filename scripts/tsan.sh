#!/usr/bin/env bash
# The CUDA ring kernels, compiled for the host (kernels/host_shim.h), under ThreadSanitizer:
# clang -fsanitize=thread over the kernels, the shim, the CPU executor and the tests
# (tests/cpp/test_host_kernels.cc). The shim maps the kernels' flags to std::atomic_ref with
# their PTX orders and leaves payload and header accesses plain, so a missing acquire/release
# in the kernels' protocol is a data race here, and any report fails the run.
# Then the CUDA path's host code over the emulated CUDA runtime: the links, launcher and kernels
# (ring_cuda_emulated_tests) and the engine with its watchdog and staged copies
# (ring_cuda_engine_tests), their thread-rank cases only: TSan does not follow the forked rank
# processes.
#   TSAN_FILTER (default: every test): a gtest filter for ring_host_kernel_tests.
#   TSAN_EMULATED_FILTER (default: the thread-rank cases): a gtest filter for
#     ring_cuda_emulated_tests; empty: skip that binary.
#   TSAN_ENGINE_FILTER (default: all but the process cases): the same for ring_cuda_engine_tests.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${TSAN_BUILD_DIR:-build/tsan}
FILTER=${TSAN_FILTER:-*}
EMULATED_FILTER=${TSAN_EMULATED_FILTER-*Threads*}
ENGINE_FILTER=${TSAN_ENGINE_FILTER--*Processes*}

if ! command -v clang++ >/dev/null 2>&1; then
  echo "tsan.sh: clang++ is needed (apt-get install -y clang)" >&2
  exit 1
fi
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_FLAGS="-fsanitize=thread" -DCMAKE_CXX_FLAGS="-fsanitize=thread" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" \
    -DRING_BUILD_EXTENSION=OFF -DRING_BUILD_TESTS=ON -DRING_CUDA=OFF >/dev/null
fi
TARGETS=(ring_host_kernel_tests)
if [ -n "$EMULATED_FILTER" ]; then TARGETS+=(ring_cuda_emulated_tests); fi
if [ -n "$ENGINE_FILTER" ]; then TARGETS+=(ring_cuda_engine_tests); fi
cmake --build "$BUILD_DIR" --target "${TARGETS[@]}" -j "${MAX_JOBS:-$(nproc)}"

# halt_on_error: the first race fails the run, with both stacks in the log.
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}" \
  "$BUILD_DIR/ring_host_kernel_tests" --gtest_filter="$FILTER"
if [ -n "$EMULATED_FILTER" ]; then
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}" \
    "$BUILD_DIR/ring_cuda_emulated_tests" --gtest_filter="$EMULATED_FILTER"
fi
if [ -n "$ENGINE_FILTER" ]; then
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}" \
    "$BUILD_DIR/ring_cuda_engine_tests" --gtest_filter="$ENGINE_FILTER" \
    --gtest_death_test_style=threadsafe  # a death test's child re-executes: TSan starts afresh
fi
