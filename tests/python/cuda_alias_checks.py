"""Rank functions for CUDA calls whose input and output share memory (test_cuda_alias.py): the
in-place forms FSDP and users write, on the ring kernels and on the staged path (through pinned
host memory: between hosts, or with TORCH_RING_CUDA_KERNELS=0). Each checks its result against
the closed form, computed on the CPU from the same inputs: a call that reads its input from the
wrong place, or writes its output over an input another rank still needs, gives other values.
Every tensor is made on the CPU and copied over, and read back with .cpu() (no torch kernel:
they run over the emulated CUDA runtime too)."""
import torch
import torch.distributed as dist

from cuda_reference import REDUCE_SCATTER_SINGLE, ALL_GATHER_SINGLE, _path_counts, join, on


def _block(rank, n):
    """Rank's block: values that differ by rank and position (exact in float32 sums)."""
    return (torch.arange(n, dtype=torch.float32) % 13) + 100 * (rank + 1)


def rank_all_gather_into_its_own_block():
    """all_gather_into_tensor whose input is the output's view at the rank's own offset (FSDP's
    in-place all-gather): every rank but 0 has its input at an offset, and the rest of the
    output holds values no rank sent, so a call that reads its input from the output's start
    sends those."""
    rank, world, dev = join()
    n = 1000 + 3
    full = torch.full((world * n,), -7.0)
    full[rank * n:(rank + 1) * n] = _block(rank, n)
    out = on(dev, full)
    before = _path_counts()
    ALL_GATHER_SINGLE(out, out.narrow(0, rank * n, n))
    got = out.cpu()
    after = _path_counts()
    dist.destroy_process_group()
    want = torch.cat([_block(r, n) for r in range(world)])
    staged = sum(after[1].values()) - sum(before[1].values())
    return {"ok": torch.equal(got, want), "staged": staged, "kernels": after[0] - before[0],
            "first_bad": None if torch.equal(got, want) else int((got != want).nonzero()[0])}


def rank_reduce_scatter_into_another_ranks_block():
    """reduce_scatter_tensor whose output lies inside its input, over other ranks' blocks and
    off the blocks' boundaries (half a block into the next rank's): the parts of the output one
    channel of the kernels writes at its last step lie over parts of the input that another
    channel still reads at its first. The closed form: this rank's block summed over the ranks'
    inputs."""
    rank, world, dev = join()
    n = 4096 + 7
    inputs = [torch.cat([_block(r * world + b, n) for b in range(world)]) for r in range(world)]
    buf = on(dev, inputs[rank])
    nxt = (rank + 1) % world
    at = nxt * n + n // 2 if nxt < world - 1 else n // 2
    before = _path_counts()
    REDUCE_SCATTER_SINGLE(buf.narrow(0, at, n), buf)
    got = buf.cpu()[at:at + n]
    after = _path_counts()
    dist.destroy_process_group()
    want = sum(inputs[r][rank * n:(rank + 1) * n] for r in range(world))
    staged = sum(after[1].values()) - sum(before[1].values())
    return {"ok": torch.equal(got, want), "staged": staged, "kernels": after[0] - before[0],
            "first_bad": None if torch.equal(got, want) else int((got != want).nonzero()[0])}


def rank_dropped_staged_output_not_reused_early(delay_ms):
    """A staged all_gather_into_tensor whose Work and output the caller drops at once, while the
    copy of its result back to the device is held up (CUDA_EMULATOR_H2D_COPY_DELAY_MS: a busy
    copy engine). The output is not the input (an in-place call's input keeps the memory
    recorded on the copies' stream from the copy in). The caller's next tensor of that size
    must not get the dropped output's memory until the copy has landed: written at once from
    another device tensor, it must still hold its values after every stream is done (torch's
    caching allocator hands out a freed block at once unless the stream that still uses it was
    recorded). Two guards keep this today: the allocator's record of the copies' stream
    (staging.cc, finish) and the group's hold on a finished staged call until its next CUDA
    call, which itself waits behind the copies' stream; with the first removed the second still
    keeps it (measured: that mutant survives), so this test holds the contract, not one guard."""
    import time
    rank, world, dev = join()
    n = 1 << 15
    hundred = on(dev, torch.full((world * n,), 100.0))
    inp = on(dev, _block(rank, n))
    out = torch.empty(world * n, device=dev)
    small = on(dev, torch.ones(16))  # before: a copy to the device is what is held up
    torch.cuda.synchronize()
    work = ALL_GATHER_SINGLE(out, inp, async_op=True)
    del work, out
    time.sleep(delay_ms / 4000)  # the host collective and its finish run meanwhile
    # A later CUDA call lets go of the finished staged calls the group still held (their Work
    # and so the output): from here on only the allocator's record of streams guards it.
    dist.all_reduce(small)
    fresh = torch.empty(world * n, device=dev)
    fresh.copy_(hundred)  # device to device: not held up
    torch.cuda.synchronize()
    time.sleep(delay_ms / 1000)  # the held copy has landed, wherever it went
    torch.cuda.synchronize()
    got = fresh.cpu()
    dist.destroy_process_group()
    ok = torch.equal(got, torch.full((world * n,), 100.0))
    return {"ok": ok, "first_bad": None if ok else int((got != 100.0).nonzero()[0])}
