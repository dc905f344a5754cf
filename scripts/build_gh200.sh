#!/usr/bin/env bash
# The build for Grace Hopper (GH200) hosts, cross-compiled here: the CUDA ring kernels for sm_90
# with the aarch64 host compiler (nvcc -ccbin aarch64-linux-gnu-g++), the host side of the CUDA
# path, and the torch extension module against torch's aarch64 wheel (CUDA 13.0) from the
# registry. Then: the CUDA path's host tests run under qemu-user against the aarch64 CUDA
# runtime (no driver, as on a machine without a GPU), and the module is checked for what a GH200
# needs of it (an aarch64 ELF for CPython 3.11, sm_90 code inside, the CUDA runtime linked and
# never libcuda). Prints each step's result and exits non-zero on any failure.
#
#   bash scripts/build_gh200.sh                 into build/gh200; the module lands in
#                                               build/gh200/ext/_C.cpython-311-aarch64-linux-gnu.so
#   GH200_TORCH=2.13.0 bash scripts/build_gh200.sh   against another torch release
#
# What it changes on the machine: Debian's cross compiler and qemu-user if missing, and apt's
# list of architectures (arm64 added, once: `dpkg --add-architecture arm64`, for the aarch64
# Python headers); everything else lands under the build folder.
#
# On a GH200 itself none of this is needed: `pip install --no-build-isolation -e .` builds
# natively with its own nvcc. What cannot be done here (the registry lacks aarch64 builds of
# torch's pinned CUDA dependencies: nvidia-nccl-cu13, nvidia-cuda-cupti) is importing the
# module: an aarch64 torch cannot be installed to import it.
#
# The CUDA toolkit here is an x86-64 one. nvcc takes the aarch64 target's headers and libraries
# from <its root>/targets/aarch64-linux, which an x86-64 install lacks: this script lays out a
# root of its own (build/gh200/cuda) whose bin/ and nvvm/ are the installed compilers (nvcc
# finds its tools beside the path it was started by) and whose targets/aarch64-linux holds the
# aarch64 CUDA runtime of the registry's nvidia-cuda-runtime wheel (headers and libcudart), plus
# the toolkit's own architecture-free headers (crt/, cccl/) that the runtime wheel leaves out.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${GH200_BUILD_DIR:-build/gh200}
TORCH_VERSION=${GH200_TORCH:-2.14.1}
PY=cp311
source scripts/aarch64_tools.sh
command -v nvcc >/dev/null || { echo "build_gh200: no nvcc on PATH (the CUDA 13 toolkit)"; exit 1; }
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
AARCH64_WHEEL=(--only-binary=:all: --no-deps --python-version 3.11 --platform manylinux_2_28_aarch64
               --platform manylinux2014_aarch64 --platform manylinux_2_17_aarch64)

# ---- the aarch64 CUDA runtime of nvcc's release, and the toolkit root that points nvcc at it
cuda_release=$(nvcc --version | sed -n 's/.*release \([0-9]*\.[0-9]*\).*/\1/p')
nvcc_bin=$(dirname "$(readlink -f "$(nvcc -v --dryrun -c -x cu /dev/null 2>&1 |
  sed -n 's/^#\$ _HERE_=//p' | head -1)/nvcc")")
if [ ! -f "$OUT/runtime/.done" ]; then
  echo "== the aarch64 CUDA runtime (nvidia-cuda-runtime==$cuda_release.*) from the registry"
  rm -rf "$OUT/runtime" "$OUT/wheels" && mkdir -p "$OUT/wheels"
  PIP_CONSTRAINT= pip download -q "${AARCH64_WHEEL[@]}" -d "$OUT/wheels" \
    "nvidia-cuda-runtime==$cuda_release.*"
  python3 -m zipfile -e "$OUT"/wheels/nvidia_cuda_runtime-*.whl "$OUT/runtime"
  touch "$OUT/runtime/.done"
fi
rt=$(dirname "$(find "$OUT/runtime" -name cuda_runtime.h | head -1)")/..
target="$OUT/cuda/targets/aarch64-linux"
rm -rf "$OUT/cuda" && mkdir -p "$OUT/cuda/bin" "$target/include" "$target/lib"
for f in "$nvcc_bin"/*; do ln -s "$f" "$OUT/cuda/bin/"; done
ln -s "$(dirname "$nvcc_bin")/nvvm" "$OUT/cuda/nvvm"
for f in "$rt"/include/*; do ln -s "$(readlink -f "$f")" "$target/include/"; done
for f in "$(dirname "$nvcc_bin")"/targets/x86_64-linux/include/*; do
  [ -e "$target/include/$(basename "$f")" ] || ln -s "$f" "$target/include/"
done
for f in "$rt"/lib/*; do ln -s "$(readlink -f "$f")" "$target/lib/"; done
ln -sf libcudart.so.13 "$target/lib/libcudart.so"

# ---- the target's torch (its headers and libraries) and Python (its headers)
if [ ! -f "$OUT/torch/.done" ]; then
  echo "== torch $TORCH_VERSION for aarch64 (the registry's wheel: headers and libraries only)"
  rm -rf "$OUT/torch" && mkdir -p "$OUT/torch"
  PIP_CONSTRAINT= pip download -q "${AARCH64_WHEEL[@]}" -d "$OUT/wheels" "torch==$TORCH_VERSION"
  # Its headers, libraries and version only (not the Python package: nothing here imports it).
  python3 - "$OUT"/wheels/torch-"$TORCH_VERSION"-$PY-$PY-*aarch64.whl "$OUT/torch" <<'PY'
import sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    z.extractall(dest, [n for n in z.namelist()
                        if n.startswith(("torch/include/", "torch/lib/", "torch/share/"))
                        or n == "torch/version.py"])
PY
  rm -f "$OUT"/wheels/torch-*.whl
  touch "$OUT/torch/.done"
fi
if [ ! -f "$OUT/python/.done" ]; then
  echo "== CPython 3.11's headers for aarch64 (Debian's libpython3.11-dev:arm64)"
  dpkg --print-foreign-architectures | grep -qx arm64 ||
    { dpkg --add-architecture arm64 && apt-get update -q >/dev/null; }
  rm -rf "$OUT/python" && mkdir -p "$OUT/python"
  (cd "$OUT/python" && apt-get download -q libpython3.11-dev:arm64 >/dev/null 2>&1 &&
    dpkg -x libpython3.11-dev_*_arm64.deb . && rm -f ./*.deb)
  touch "$OUT/python/.done"
fi

# ---- build: the CUDA path's host tests, and the module
echo "== cross build for aarch64 + sm_90 into $OUT/ext"
start=$(date +%s)
if [ ! -f "$OUT/ext/build.ninja" ]; then
  cmake -S . -B "$OUT/ext" -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
    -DCMAKE_CUDA_COMPILER="$OUT/cuda/bin/nvcc" -DCMAKE_CUDA_HOST_COMPILER=aarch64-linux-gnu-g++ \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DRING_CUDA=ON -DRING_BUILD_TESTS=ON -DRING_BUILD_EXTENSION=ON \
    -DRING_TORCH_DIR="$OUT/torch/torch" -DRING_PYTHON_SOABI=cpython-311-aarch64-linux-gnu \
    "-DRING_PYTHON_INCLUDE=$OUT/python/usr/include/python3.11;$OUT/python/usr/include" >/dev/null
fi
cmake --build "$OUT/ext" -j "$(nproc)" --target ring_cuda_host_tests _C
echo "   built in $(( $(date +%s) - start )) s"

status=0
run_under_qemu "$OUT/ext/ring_cuda_host_tests" || status=1

# ---- what a GH200 needs of the module
module="$OUT/ext/_C.cpython-311-aarch64-linux-gnu.so"
check() {  # $1: what, $2...: a command that must succeed
  local what=$1
  shift
  if "$@" >/dev/null 2>&1; then echo "   ok: $what"; else echo "   FAILED: $what"; status=1; fi
}
echo "== the module: $module"
needed=$(aarch64-linux-gnu-readelf -d "$module" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | paste -sd ' ')
echo "   needs: $needed"
check "an aarch64 shared object" sh -c "file -L '$module' | grep -q 'ARM aarch64'"
check "links the CUDA runtime (libcudart.so.13)" sh -c "echo '$needed' | grep -qw libcudart.so.13"
check "never libcuda (imports without a driver)" sh -c "! echo '$needed' | grep -q libcuda.so"
check "built against torch $TORCH_VERSION (its ABI tag beside the module)" \
  grep -q "^$TORCH_VERSION" "$OUT/ext/_C.torch_version"
fatbin=$(mktemp)
aarch64-linux-gnu-objcopy -O binary --only-section=.nv_fatbin "$module" "$fatbin"
kernels=$(strings "$fatbin" | grep -c '^\.target sm_90' || true)
rm -f "$fatbin"
check "sm_90 code inside ($kernels kernel files' PTX for sm_90)" test "$kernels" -gt 0
exit $status
