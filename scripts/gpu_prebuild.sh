#!/usr/bin/env bash
# Builds the extension HERE for the GPU machine's exact stack, so that its 15 minutes go to the
# check and not to a build: Python 3.12, torch 2.11.0+cu130 (in a venv of its own:
# scripts/torch_venv.sh), this machine's nvcc 13.0 (torch's CUDA), sm_90. The result is a folder
# small enough to carry to that machine (the device tool carries at most 64 MiB), which
# scripts/gpu_check.sh uses instead of building when its versions match the machine's.
#
#   scripts/gpu_prebuild.sh [OUT]          (default OUT: build/gpu-prebuilt)
#
# OUT holds _C.<abi>.so, _C.torch_version (what the package checks at import) and BUILD_INFO
# (python, torch, cuda, arch, commit, the sources' stamp (scripts/source_stamp.sh), build
# seconds: gpu_check.sh uses the module only when Python, torch and the sources' stamp are the
# tree's and machine's own).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-build/gpu-prebuilt}
TORCH_VERSION=${GPU_TORCH_VERSION:-2.11.0}
PYTHON_VERSION=${GPU_PYTHON_VERSION:-3.12}
ARCH=${GPU_ARCH:-9.0}
VENV=${GPU_PREBUILD_VENV:-${TORCH_RING_VENVS:-$HOME/.cache/torch_ring_backend/venvs}/torch-$TORCH_VERSION-py$PYTHON_VERSION}
BUILD=build/gpu-prebuild/cmake-py$PYTHON_VERSION-torch$TORCH_VERSION

# pyenv's own interpreter first: its shim for python3.12 exists whether or not 3.12 is among the
# active versions, and then it only prints "command not found". Each candidate must run.
find_python() {
  local cand
  for cand in $(ls "$(pyenv root 2>/dev/null)"/versions/"$PYTHON_VERSION".*/bin/"python$PYTHON_VERSION" \
                  2>/dev/null | sort -r) $(command -v "python$PYTHON_VERSION"); do
    "$cand" -c "import sys" >/dev/null 2>&1 && { echo "$cand"; return 0; }
  done
  return 1
}
PY=$(find_python) || true
if [ -z "$PY" ]; then
  echo "gpu_prebuild: no python$PYTHON_VERSION here (pyenv versions)" >&2
  exit 1
fi
start=$(date +%s)
bash scripts/torch_venv.sh "$VENV" "$PY" "$TORCH_VERSION"
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
VPY=$(cd "$(dirname "$VENV/bin/python")" && pwd)/python
built=$(date +%s)
TORCH_CUDA_ARCH_LIST=$ARCH cmake -S . -B "$BUILD" -G Ninja -DPython_EXECUTABLE="$VPY" \
  -DRING_CUDA=ON -DRING_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" --target _C -j "${MAX_JOBS:-$(nproc)}"
build_s=$(($(date +%s) - built))

rm -rf "$OUT" && mkdir -p "$OUT"
so=$(ls "$BUILD"/_C*.so)
# No debug sections: the module must fit the carry limit with room to spare.
strip --strip-debug -o "$OUT/$(basename "$so")" "$so"
cp "$BUILD/_C.torch_version" "$OUT/"
{
  echo "python $("$VPY" -c 'import platform; print(".".join(platform.python_version_tuple()[:2]))')"
  echo "torch $("$VPY" -c 'import torch; print(torch.__version__)')"
  echo "cuda $("$VPY" -c 'import torch; print(torch.version.cuda)')"
  echo "nvcc $(nvcc --version | grep -o 'release [0-9.]*' | cut -d' ' -f2)"
  echo "arch $ARCH"
  echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo '+changes')"
  echo "sources $(bash scripts/source_stamp.sh)"
  echo "build_seconds $build_s"
} > "$OUT/BUILD_INFO"

# The module imports under that torch here too (no GPU needed: it links the CUDA runtime only).
(cd "$OUT" && mkdir -p probe/torch_ring_backend)
"$VPY" - "$OUT" <<'PY'
import os, shutil, sys, subprocess
out = sys.argv[1]
pkg = os.path.join(out, "probe", "torch_ring_backend")
for name in os.listdir("torch_ring_backend"):
    src = os.path.join("torch_ring_backend", name)
    if os.path.isfile(src) and name.endswith(".py"):
        shutil.copy(src, pkg)
for name in os.listdir(out):
    if name.startswith("_C"):
        shutil.copy(os.path.join(out, name), pkg)
subprocess.check_call([sys.executable, "-c", "import torch_ring_backend"], cwd=os.path.join(out, "probe"))
shutil.rmtree(os.path.join(out, "probe"))
PY
size=$(du -sb "$OUT" | cut -f1)
if [ "$size" -gt $((60 * 1024 * 1024)) ]; then
  echo "gpu_prebuild: $OUT is $size bytes, over the 60 MiB this project allows itself to carry" >&2
  exit 1
fi
echo "gpu_prebuild: $OUT ($((size / 1024)) KiB) in $(($(date +%s) - start)) s; import under torch" \
  "$TORCH_VERSION: OK"
cat "$OUT/BUILD_INFO"
