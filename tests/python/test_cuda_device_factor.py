"""PREMUL_SUM with a factor tensor on the GPU (cuda_factor_checks.py): the ring kernels read it
on the device, so the call never waits for the caller's stream (torch's sync debug mode raises
if it does), at world 1 (the one-rank scale kernel) and 2, for all_reduce and
reduce_scatter_tensor, against the closed form; and the staged path, which reads it on the
host, gives the same. Over the emulated CUDA runtime in CI (scripts/test_cuda_emulated.sh), on
a GPU in scripts/gpu_check.sh."""
import pytest
import torch

from torch_ring_backend._launch import run_on_local_ranks

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not torch.cuda.is_available(),
        reason="needs a CUDA GPU or the emulated CUDA runtime (scripts/test_cuda_emulated.sh)"),
]

from cuda_factor_checks import (  # noqa: E402
    rank_premul_with_a_device_factor, rank_premul_with_a_device_factor_staged)

COLLECTIVES = ["all_reduce", "reduce_scatter_tensor"]


@pytest.mark.parametrize("collective", COLLECTIVES)
@pytest.mark.parametrize("world", [1, 2])
def test_the_kernels_read_a_device_factor_without_waiting_for_the_stream(world, collective):
    for rank, res in enumerate(run_on_local_ranks(rank_premul_with_a_device_factor, world,
                                                  collective, timeout_s=180)):
        assert res["error"] is None, f"rank {rank}: {res['error']}"
        assert res["ok"], f"rank {rank}: first wrong element {res['first_bad']}"
        assert res["staged"] == 0 and res["kernels"] == 1, res


@pytest.mark.parametrize("collective", COLLECTIVES)
def test_the_staged_path_reads_a_device_factor_on_the_host(collective):
    for rank, res in enumerate(run_on_local_ranks(rank_premul_with_a_device_factor_staged, 2,
                                                  collective, timeout_s=180,
                                                  env={"TORCH_RING_CUDA_KERNELS": "0"})):
        assert res["ok"], f"rank {rank}: first wrong element {res['first_bad']}"
