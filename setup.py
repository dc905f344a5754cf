"""Drives the CMake build (CMakeLists.txt holds every source and flag) and packages the module.

Environment:
  TORCH_RING_CUDA=0|1     compile the CUDA sources or not (default: whenever nvcc is found)
  TORCH_CUDA_ARCH_LIST    CUDA architectures, e.g. "9.0" (default) or "8.0;9.0"
  TORCH_RING_BUILD_DIR    where CMake builds (default: build/cmake-<python tag>)
  MAX_JOBS                parallel compile jobs (default: number of cores)
"""
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
SIDECAR = "_C.torch_version"

# The extension builds against the torch already installed. pip's default isolated build has
# none, and without this check the user would get a CMake traceback from inside it.
try:
    import torch  # noqa: F401
except ImportError:
    sys.exit("torch_ring_backend builds against your installed torch, which this build "
             "environment cannot see: run `pip install --no-build-isolation .` "
             "(with torch 2.11 or newer installed)")


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build_dir = Path(
            os.environ.get("TORCH_RING_BUILD_DIR")
            or ROOT / "build" / f"cmake-{sys.implementation.cache_tag}"
        )
        build_dir.mkdir(parents=True, exist_ok=True)
        cuda = os.environ.get("TORCH_RING_CUDA", "AUTO").upper()
        cuda = {"1": "ON", "0": "OFF", "ON": "ON", "OFF": "OFF"}.get(cuda, "AUTO")
        configure = [
            "cmake",
            "-S", str(ROOT),
            "-B", str(build_dir),
            "-G", "Ninja" if shutil.which("ninja") else "Unix Makefiles",
            f"-DPython_EXECUTABLE={sys.executable}",
            f"-DRING_CUDA={cuda}",
            "-DRING_BUILD_EXTENSION=ON",
            "-DRING_BUILD_TESTS=OFF",
            "-DCMAKE_BUILD_TYPE=Release",
        ]
        subprocess.check_call(configure)
        jobs = os.environ.get("MAX_JOBS") or str(os.cpu_count() or 1)
        subprocess.check_call(["cmake", "--build", str(build_dir), "--target", "_C", "-j", jobs])
        built = next(build_dir.glob("_C*" + sysconfig.get_config_var("EXT_SUFFIX")))
        target = Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built, target)
        # The torch version it was built against: checked at import (torch_ring_backend/__init__).
        shutil.copy2(build_dir / "_C.torch_version", target.parent / SIDECAR)

    def copy_extensions_to_source(self):
        # An editable install builds into a scratch folder and copies only the extension itself
        # into the source tree; the sidecar must go with it or the import check finds nothing.
        super().copy_extensions_to_source()
        built = Path(self.build_lib) / "torch_ring_backend" / SIDECAR
        source = ROOT / "torch_ring_backend" / SIDECAR
        if built.resolve() != source.resolve():
            shutil.copy2(built, source)

    def get_outputs(self):
        return super().get_outputs() + [
            str(Path(self.get_ext_fullpath("torch_ring_backend._C")).parent / SIDECAR)]


# Metadata (name, version, dependencies, scripts, entry points) is in pyproject.toml; this file
# only builds the extension.
setup(
    ext_modules=[CMakeExtension("torch_ring_backend._C")],
    cmdclass={"build_ext": CMakeBuild},
    zip_safe=False,
)
