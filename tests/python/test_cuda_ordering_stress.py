"""tests/python/cuda_ordering_stress.py as a test: in a process of its own, because its knobs
(the smallest FIFO) are read once per process. Over the emulated CUDA runtime here (the ring
kernels run on host threads, with the host shim's fences), on a GPU in scripts/gpu_check.sh."""
import os
import subprocess
import sys

import pytest
import torch

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not torch.cuda.is_available(),
        reason="needs a CUDA GPU or the emulated CUDA runtime (scripts/test_cuda_emulated.sh)"),
]

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cuda_ordering_stress.py")


@pytest.mark.parametrize("world", [2, 4])
def test_every_call_of_the_smallest_fifo_holds_its_own_values(world):
    calls = int(os.environ.get("TORCH_RING_STRESS_CALLS", "300"))
    done = subprocess.run([sys.executable, "-P", SCRIPT, "--world", str(world), "--calls",
                           str(calls)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"world {world}: {calls} calls per rank, {world * calls} ring kernels" in done.stdout, (
        done.stdout)
