# Sourced by scripts/test_aarch64.sh and scripts/build_gh200.sh: Debian's aarch64 cross compiler
# and qemu-user, installed if missing, and binfmt_misc's entry for aarch64 (so that an Arm
# binary started by exec, as a death test's child, goes to qemu) where this runs as root.
SYSROOT=/usr/aarch64-linux-gnu
if ! command -v aarch64-linux-gnu-g++ >/dev/null || ! command -v qemu-aarch64 >/dev/null; then
  echo "== installing the cross compiler and qemu-user"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q g++-aarch64-linux-gnu qemu-user \
    libgtest-dev >/dev/null
fi
BINFMT=/proc/sys/fs/binfmt_misc
if [ ! -e "$BINFMT/qemu-aarch64" ] && [ "$(id -u)" = 0 ]; then
  [ -e "$BINFMT/register" ] || mount -t binfmt_misc binfmt_misc "$BINFMT" 2>/dev/null || true
  if [ -w "$BINFMT/register" ]; then
    # The ELF header of an aarch64 executable (e_machine 0xb7), as Debian's qemu-user-binfmt.
    printf '%s' ':qemu-aarch64:M::\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00:\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff:/usr/bin/qemu-aarch64:' \
      > "$BINFMT/register" || true
  fi
fi
[ -e "$BINFMT/qemu-aarch64" ] ||
  echo "note: no binfmt_misc entry for aarch64: death tests (they exec the binary) will fail"
export QEMU_LD_PREFIX=$SYSROOT

# Runs one gtest binary under qemu from its folder; prints "== NAME under qemu-aarch64: PASS|FAIL
# in S s: <gtest's summary>" and the failures; returns non-zero on a failure. $1: the binary,
# the rest: gtest arguments.
run_under_qemu() {
  local bin=$1 start log verdict summary
  shift
  start=$(date +%s)
  log="$bin.log"
  if (cd "$(dirname "$bin")" && qemu-aarch64 -L "$SYSROOT" "./$(basename "$bin")" --gtest_brief=1 \
        --gtest_death_test_style=threadsafe "$@") >"$log" 2>&1; then
    verdict=PASS
  else
    verdict=FAIL
  fi
  summary=$(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$log" | tr -s ' ' | paste -sd ' ' -)
  echo "== $(basename "$bin") under qemu-aarch64: $verdict in $(( $(date +%s) - start )) s: $summary"
  [ $verdict = PASS ] || { grep -E -A12 'Failure|FAILED' "$log" | head -60; return 1; }
}
