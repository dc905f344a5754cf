"""CUDA calls whose input is a view into their output, or whose output lies inside their input
(cuda_alias_checks.py), on the ring kernels and on the staged path, at world 2 and 3: each
against the closed form. Over the emulated CUDA runtime in CI (scripts/test_cuda_emulated.sh),
on a GPU in scripts/gpu_check.sh."""
import pytest
import torch

from torch_ring_backend._launch import run_on_local_ranks

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not torch.cuda.is_available(),
        reason="needs a CUDA GPU or the emulated CUDA runtime (scripts/test_cuda_emulated.sh)"),
]

from cuda_alias_checks import (  # noqa: E402
    rank_all_gather_into_its_own_block, rank_reduce_scatter_into_another_ranks_block)

PATHS = {"kernels": {}, "staged": {"TORCH_RING_CUDA_KERNELS": "0"}}


def _check(results, path):
    for rank, res in enumerate(results):
        assert res["ok"], f"rank {rank}: first wrong element {res['first_bad']} ({res})"
        if path == "staged":
            assert res["staged"] == 1 and res["kernels"] == 0, res
        else:
            assert res["staged"] == 0 and res["kernels"] == 1, res


@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize("world", [2, 3])
def test_in_place_all_gather_reads_each_ranks_own_block(world, path):
    _check(run_on_local_ranks(rank_all_gather_into_its_own_block, world, env=PATHS[path],
                              timeout_s=180), path)


@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize("world", [2, 3])
def test_reduce_scatter_into_another_ranks_block_of_its_input(world, path):
    _check(run_on_local_ranks(rank_reduce_scatter_into_another_ranks_block, world,
                              env=PATHS[path], timeout_s=180), path)


def test_a_dropped_staged_output_is_not_handed_out_before_its_copy_back_lands():
    from cuda_alias_checks import rank_dropped_staged_output_not_reused_early
    delay_ms = 1200
    env = {"TORCH_RING_CUDA_KERNELS": "0", "CUDA_EMULATOR_H2D_COPY_DELAY_MS": str(delay_ms)}
    for rank, res in enumerate(run_on_local_ranks(rank_dropped_staged_output_not_reused_early, 2,
                                                  delay_ms, env=env, timeout_s=180)):
        assert res["ok"], f"rank {rank}: the new tensor was overwritten from element {res['first_bad']}"
