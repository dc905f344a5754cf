#!/usr/bin/env bash
# Incremental developer build of the extension into the source tree (for an editable install).
# Serialized with a lock so that two builds never run at once on a small machine, and the new
# module replaces the old one by rename, so running processes keep their mapped copy.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${TORCH_RING_BUILD_DIR:-build/dev}
exec 9>/tmp/torch_ring_build.lock
flock 9
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DPython_EXECUTABLE="$(command -v python3)" \
    -DRING_CUDA="${TORCH_RING_CUDA_CMAKE:-AUTO}" -DRING_BUILD_TESTS=ON >/dev/null
fi
cmake --build "$BUILD_DIR" -j "${MAX_JOBS:-2}" "$@"
so=$(ls "$BUILD_DIR"/_C*.so)
cp "$so" "torch_ring_backend/.tmp_$(basename "$so")"
mv -f "torch_ring_backend/.tmp_$(basename "$so")" "torch_ring_backend/$(basename "$so")"
cp "$BUILD_DIR/_C.torch_version" torch_ring_backend/_C.torch_version
