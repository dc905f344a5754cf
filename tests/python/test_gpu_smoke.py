"""scripts/gpu_smoke.py, the GPU check's first phase, run where a CUDA device is: over the
emulated CUDA runtime in CI (scripts/test_cuda_emulated.sh: the ring kernels on host threads),
so that on the GPU machine its first 30 seconds already worked once."""
import os
import re
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

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_the_smoke_phase_links_runs_kernels_and_gives_the_closed_form():
    done = subprocess.run([sys.executable, "-P", os.path.join(ROOT, "scripts", "gpu_smoke.py"),
                           "--sizes", "4K,1M", "--calls", "2"], capture_output=True, text=True,
                          timeout=300)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "smoke: ok" in out, out
    # Each rank logged its kernels' links (not a staging fallback) and the table has both sizes
    # right, with kernels counted on both ranks: 1 + 2 calls each.
    assert len(re.findall(r"ring\.[01]\.log: CUDA ring kernels on cuda:0", out)) == 2, out
    for nbytes in (4096, 1 << 20):
        assert re.search(rf"^\s+{nbytes}\s+ok\s+[0-9.]+\s+3\s+3$", out, re.M), out
    assert "ordering stress, world 2: 1 calls per rank, 2 ring kernels" in out, out
