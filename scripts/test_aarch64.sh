#!/usr/bin/env bash
# The C++ core on 64-bit Arm (Grace, Graviton), without Arm hardware: Debian's cross compiler
# builds the test binaries (cmake/aarch64-linux-gnu.cmake) and qemu-user runs them. Installs
# what it needs, prints each runner's summary, exits non-zero on any failure.
#   bash scripts/test_aarch64.sh              unit, TCP and host-kernel tests
#   AARCH64_ALL=1 bash scripts/test_aarch64.sh  also the emulated-CUDA suites
#
# Left out under qemu: suites named *Processes* (a process with threads forks, then the child
# starts threads of its own; qemu-user aborts there, "cpu == current_cpu", whatever the
# program), as scripts/tsan.sh leaves them out under TSan. Death tests run in the "threadsafe"
# style (the child re-executes the binary), which needs binfmt_misc to start an Arm binary:
# registered here when this runs as root, else those tests fail with "Exec format error".
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${AARCH64_BUILD_DIR:-build/aarch64}
SYSROOT=/usr/aarch64-linux-gnu

if ! command -v aarch64-linux-gnu-g++ >/dev/null || ! command -v qemu-aarch64 >/dev/null; then
  echo "== installing the cross compiler and qemu-user"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q g++-aarch64-linux-gnu qemu-user \
    libgtest-dev >/dev/null
fi

# Arm binaries started by exec (death tests) go to qemu through binfmt_misc.
BINFMT=/proc/sys/fs/binfmt_misc
if [ ! -e "$BINFMT/qemu-aarch64" ] && [ "$(id -u)" = 0 ]; then
  [ -e "$BINFMT/register" ] || mount -t binfmt_misc binfmt_misc "$BINFMT" 2>/dev/null || true
  if [ -w "$BINFMT/register" ]; then
    # The ELF header of an aarch64 executable (e_machine 0xb7), as Debian's qemu-user-binfmt.
    printf '%s' ':qemu-aarch64:M::\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00:\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff:/usr/bin/qemu-aarch64:' \
      > "$BINFMT/register" || true
  fi
fi
[ -e "$BINFMT/qemu-aarch64" ] || echo "note: no binfmt_misc entry for aarch64: the death tests of AARCH64_ALL's suites will fail"
export QEMU_LD_PREFIX=$SYSROOT

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

status=0
for t in "${targets[@]}"; do
  bin=$(find "$BUILD_DIR" -name "$t" -type f -perm -u+x | head -1)
  start=$(date +%s)
  log="$BUILD_DIR/$t.log"
  if (cd "$(dirname "$bin")" && qemu-aarch64 -L "$SYSROOT" "./$t" --gtest_brief=1 \
        --gtest_death_test_style=threadsafe --gtest_filter='-*Processes*') >"$log" 2>&1; then
    verdict=PASS
  else
    verdict=FAIL
    status=1
  fi
  summary=$(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$log" | tr -s ' ' | paste -sd ' ' -)
  echo "== $t under qemu-aarch64: $verdict in $(( $(date +%s) - start )) s: $summary"
  [ $verdict = PASS ] || grep -E -A12 'Failure|FAILED' "$log" | head -60
done
exit $status
