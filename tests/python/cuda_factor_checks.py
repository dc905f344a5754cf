"""Rank functions for PREMUL_SUM with its factor as a one-element tensor on the GPU
(test_cuda_device_factor.py). The kernels read such a factor on the device, as NCCL reads its
device-resident scalar; reading it on the host (`.item()`) would make every call wait for the
caller's stream. torch's own check of that is its sync debug mode: with
torch.cuda.set_sync_debug_mode("error") a synchronizing operation through torch (`.item()` of a
CUDA tensor among them) raises. Tensors are made on the CPU and copied over, and read back with
.cpu(), outside that mode (those copies synchronize): no torch kernel, so this runs over the
emulated CUDA runtime too."""
import torch
import torch.distributed as dist

from cuda_reference import REDUCE_SCATTER_SINGLE, _path_counts, join, on

FACTOR = 0.25  # a power of two: every product below is exact in float32


def _values(rank, n):
    return (torch.arange(n, dtype=torch.float32) % 11) + 10 * (rank + 1)


def rank_premul_with_a_device_factor(collective):
    """One all_reduce or reduce_scatter_tensor with PREMUL_SUM(factor tensor on this GPU),
    under sync debug mode "error"; the closed form sum_r FACTOR * x_r."""
    rank, world, dev = join()
    n = 4096 + 5
    factor = on(dev, torch.tensor([FACTOR], dtype=torch.float32))
    op = dist._make_nccl_premul_sum(factor)
    if collective == "all_reduce":
        x = on(dev, _values(rank, n))
        want = sum(FACTOR * _values(r, n) for r in range(world))
    else:
        inp = on(dev, torch.cat([_values(rank * world + b, n) for b in range(world)]))
        x = on(dev, torch.zeros(n))
        want = sum(FACTOR * _values(r * world + rank, n) for r in range(world))
    before = _path_counts()
    error = None
    torch.cuda.set_sync_debug_mode("error")
    try:
        if collective == "all_reduce":
            dist.all_reduce(x, op=op)
        else:
            REDUCE_SCATTER_SINGLE(x, inp, op=op)
    except RuntimeError as e:
        error = str(e)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    got = x.cpu()
    after = _path_counts()
    dist.destroy_process_group()
    staged = sum(after[1].values()) - sum(before[1].values())
    return {"error": error, "ok": error is None and torch.equal(got, want),
            "kernels": after[0] - before[0], "staged": staged,
            "first_bad": None if torch.equal(got, want) else int((got != want).nonzero()[0])}


def rank_premul_with_a_device_factor_staged(collective):
    """The same calls on the staged path (through host memory), which reads the factor on the
    host: the closed form again, outside sync debug mode."""
    rank, world, dev = join()
    n = 4096 + 5
    op = dist._make_nccl_premul_sum(on(dev, torch.tensor([FACTOR], dtype=torch.float32)))
    if collective == "all_reduce":
        x = on(dev, _values(rank, n))
        dist.all_reduce(x, op=op)
        want = sum(FACTOR * _values(r, n) for r in range(world))
    else:
        inp = on(dev, torch.cat([_values(rank * world + b, n) for b in range(world)]))
        x = on(dev, torch.zeros(n))
        REDUCE_SCATTER_SINGLE(x, inp, op=op)
        want = sum(FACTOR * _values(r * world + rank, n) for r in range(world))
    got = x.cpu()
    dist.destroy_process_group()
    return {"ok": torch.equal(got, want),
            "first_bad": None if torch.equal(got, want) else int((got != want).nonzero()[0])}
