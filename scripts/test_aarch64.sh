#!/usr/bin/env bash
# The C++ core on 64-bit Arm (Grace, Graviton), without Arm hardware: Debian's cross compiler
# builds the test binaries (cmake/aarch64-linux-gnu.cmake) and qemu-user runs them. Installs
# what it needs, prints each runner's summary, exits non-zero on any failure.
#   bash scripts/test_aarch64.sh              unit, TCP and host-kernel tests
#   AARCH64_ALL=1 bash scripts/test_aarch64.sh  also the emulated-CUDA suites, and the host
#                                               kernels at every world and channel count
# Then, where nvcc exists, the GH200 build (scripts/build_gh200.sh: the CUDA kernels for sm_90
# with the aarch64 host compiler, the module against torch's aarch64 wheel, the CUDA path's host
# tests under qemu); AARCH64_CUDA=0 leaves it out.
#
# Left out under qemu: suites named *Processes* (a process with threads forks, then the child
# starts threads of its own; qemu-user aborts there, "cpu == current_cpu", whatever the
# program), as scripts/tsan.sh leaves them out under TSan. Death tests run in the "threadsafe"
# style (the child re-executes the binary), which needs binfmt_misc to start an Arm binary:
# registered here when this runs as root, else those tests fail with "Exec format error".
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${AARCH64_BUILD_DIR:-build/aarch64}
source scripts/aarch64_tools.sh

echo "== cross build (aarch64-linux-gnu-g++ $(aarch64-linux-gnu-g++ -dumpversion)) into $BUILD_DIR"
start=$(date +%s)
if [ ! -f "$BUILD_DIR/build.ninja" ]; then  # the toolchain is read at the first configure only
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
    -DRING_BUILD_EXTENSION=OFF -DRING_CUDA=OFF -DRING_BUILD_TESTS=ON >/dev/null
fi
targets=(ring_unit_tests ring_tcp_tests ring_host_kernel_tests)
if [ "${AARCH64_ALL:-0}" = 1 ]; then
  targets+=(ring_cuda_emulated_tests ring_cuda_engine_tests ring_cuda_emulator_tests)
fi
cmake --build "$BUILD_DIR" -j "$(nproc)" --target "${targets[@]}"
echo "   built in $(( $(date +%s) - start )) s"
file "$BUILD_DIR/ring_unit_tests" | grep -q "ARM aarch64" || { echo "not an aarch64 binary"; exit 1; }

# The host kernels' largest worlds and channel counts (about 50 s of the 84 under qemu) only with
# AARCH64_ALL. Why they can go: every combination runs natively in scripts/test.sh's C++ step;
# under qemu what is checked is the aarch64 build's arithmetic and layouts, which worlds 1-3
# cover for every dtype and op; and qemu on an x86-64 host keeps x86's store order (its
# translated loads and stores are the host's), so a larger world finds no Arm reordering here.
skip='*Processes*'
if [ "${AARCH64_ALL:-0}" != 1 ]; then
  for wc in 3_channels3 3_channels4 4_channels2 4_channels3 4_channels4 5_channels2 5_channels3 \
            5_channels4; do
    skip+=":*world$wc"
  done
fi
status=0
for t in "${targets[@]}"; do
  run_under_qemu "$(find "$BUILD_DIR" -name "$t" -type f -perm -u+x | head -1)" \
    --gtest_filter="-$skip" || status=1
done

if [ "${AARCH64_CUDA:-1}" = 1 ] && command -v nvcc >/dev/null; then
  echo "== the GH200 build: sm_90 kernels with the aarch64 host compiler, the module against torch's aarch64 wheel"
  bash scripts/build_gh200.sh || status=1
fi
exit $status
