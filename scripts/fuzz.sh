#!/usr/bin/env bash
# Builds the libFuzzer target of the TCP wire parsing (tests/fuzz/fuzz_wire.cc) with clang,
# AddressSanitizer and UBSan, and runs it for a bounded time. Any crash fails the script and
# leaves the input that caused it in build/fuzz/crash-*.
#   FUZZ_SECONDS (default 30): how long to fuzz.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZ_SECONDS=${FUZZ_SECONDS:-30}
BUILD_DIR=${FUZZ_BUILD_DIR:-build/fuzz}

if ! command -v clang++ >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "fuzz.sh: installing clang (libFuzzer ships with it)"
    apt-get install -y clang >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y clang >/dev/null; }
  else
    echo "fuzz.sh: clang++ is needed (apt-get install -y clang)" >&2
    exit 1
  fi
fi

if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DRING_BUILD_EXTENSION=OFF -DRING_BUILD_TESTS=OFF -DRING_CUDA=OFF -DRING_BUILD_FUZZERS=ON \
    >/dev/null
fi
cmake --build "$BUILD_DIR" --target fuzz_wire -j "${MAX_JOBS:-1}"

# Seeds: a valid hello (target byte 1) and a frame stream with a data frame and a goodbye
# (target byte 0), so that the fuzzer starts past the magic checks.
CORPUS="$BUILD_DIR/corpus"
mkdir -p "$CORPUS"
python3 - "$CORPUS" <<'PY'
import os, struct, sys
d = sys.argv[1]
hello = struct.pack("<IIIiQiiq", 0x50435452, 1, 1, 0, 0, 1, 2, 4096) + bytes(96)
open(os.path.join(d, "seed_hello"), "wb").write(b"\x01" + hello)
def header(magic, sender, step, nbytes):
    return struct.pack("<Iiqq", magic, sender, step, nbytes) + bytes(40)
stream = header(0x52494E47, 1, 0, 16) + bytes(range(16)) + header(0x45594252, 1, 0, 0)
open(os.path.join(d, "seed_frames"), "wb").write(b"\x00" + struct.pack("<HBB", 64, 5, 1) + stream)
broken = header(0x4B524252, 1, 0, 5) + b"oops!"
open(os.path.join(d, "seed_broken"), "wb").write(b"\x00" + struct.pack("<HBB", 64, 3, 1) + broken)
PY

echo "fuzz.sh: fuzzing the wire parsers for ${FUZZ_SECONDS}s"
cd "$BUILD_DIR"
./fuzz_wire -max_total_time="$FUZZ_SECONDS" -rss_limit_mb=2048 -max_len=8192 -print_final_stats=1 corpus
