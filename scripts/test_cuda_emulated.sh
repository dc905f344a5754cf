#!/usr/bin/env bash
# The CUDA path's torch layer, run by real torch over the emulated CUDA runtime: no GPU needed.
#
# What it builds (build/cuda-emulated, incrementally):
#   - the emulated runtime of tests/cpp/cuda_emulator compiled against CUDA's own headers as a
#     drop-in libcudart.so.13, and its driver library libcuda.so.1;
#   - the extension from the same sources as the GPU build, its CUDA kernels compiled for the
#     host (kernels/host_shim.h) and launched on the emulated streams, in a package folder of
#     its own (build/cuda-emulated/site) so that the installed extension is left alone.
# Then it runs the CUDA tests with the runtime preloaded (every rank process inherits it):
# torch's caching allocator, streams, events and Futures are torch's own; torch's kernels are
# refused by name (the tests build inputs by copies from the CPU and check results after
# .cpu()). Tests that truly need torch's kernels or a GPU skip with that reason here and run in
# scripts/gpu_check.sh.
#
# Needs CUDA's headers (nvcc's toolkit; nothing of it runs) and a torch with CUDA 13. Extra
# arguments go to pytest (test files among them replace the default two). Ends with pytest's
# summary line. `--build-only`: build and lay out the package, run nothing (the mutation check).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=$(realpath -m "${CUDA_EMULATED_BUILD_DIR:-build/cuda-emulated}")
PYTHON=${PYTHON:-python3}

cuda_major=$("$PYTHON" -c "import torch; print((torch.version.cuda or '0').split('.')[0])")
if [ "$cuda_major" != "13" ]; then
  echo "test_cuda_emulated.sh: needs a torch built with CUDA 13 (the emulator stands in for" \
       "libcudart.so.13); this torch has CUDA '${cuda_major}'" >&2
  exit 1
fi

exec 9>/tmp/torch_ring_build.lock
flock 9
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DPython_EXECUTABLE="$(command -v "$PYTHON")" \
    -DRING_BUILD_EXTENSION=ON -DRING_BUILD_TESTS=OFF -DRING_CUDA=OFF \
    -DRING_CUDA_EMULATED_TORCH=ON >/dev/null
fi
cmake --build "$BUILD_DIR" -j "${MAX_JOBS:-$(nproc)}" --target _C ring_cuda_driver_emulated
flock -u 9

# The package as the tests import it: the Python files of the source tree, this build's module.
SITE="$BUILD_DIR/site/torch_ring_backend"
rm -rf "$BUILD_DIR/site"
mkdir -p "$SITE"
for f in torch_ring_backend/*.py; do ln -s "$PWD/$f" "$SITE/"; done
ln -s "$PWD/torch_ring_backend/bench" "$SITE/bench"
cp "$BUILD_DIR"/_C*.so "$BUILD_DIR/_C.torch_version" "$SITE/"

RUNTIME_DIR="$BUILD_DIR/tests/cpp/cuda_emulator"
export LD_PRELOAD="$RUNTIME_DIR/libcudart.so.13${LD_PRELOAD:+:$LD_PRELOAD}"
export LD_LIBRARY_PATH="$RUNTIME_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONPATH="$BUILD_DIR/site${PYTHONPATH:+:$PYTHONPATH}"
if [ "${1:-}" = "--build-only" ]; then
  exit 0
fi
# -P: the source tree's own torch_ring_backend folder (the current directory) must not come
# before this build's package.
"$PYTHON" -P - <<'PY'
import torch
import torch_ring_backend
name = torch.cuda.get_device_name(0)
assert name.startswith("Emulated CUDA device"), f"the emulated runtime is not the one torch uses: {name}"
assert "/site/" in torch_ring_backend._C.__file__, torch_ring_backend._C.__file__
print(f"== torch {torch.__version__} over the emulated CUDA runtime: {name}")
PY
FILES=(tests/python/test_cuda.py tests/python/test_cuda_emulated.py tests/python/test_cuda_ordering_stress.py tests/python/test_gpu_smoke.py tests/python/test_cuda_alias.py
       tests/python/test_cuda_device_factor.py)
for arg in "$@"; do
  case "$arg" in tests/*) FILES=() ;; esac
done
exec "$PYTHON" -P -m pytest -q "${FILES[@]}" "$@"
