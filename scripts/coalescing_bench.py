"""N small all_reduces on "ring": one by one, inside torch's _coalescing_manager (one
all_reduce_coalesced task), and in the process group's coalescing window (the backend fuses the
held calls into one ring pass); gloo one by one as the reference, in the same processes.

    python scripts/coalescing_bench.py [--nproc 2] [--calls 32] [--numel 256] [--iters 200]
"""
import argparse
import statistics
import time

import torch
import torch.distributed as dist

from torch_ring_backend._launch import run_on_local_ranks


def _block_us(how, group, tensors, iters):
    from torch.distributed.distributed_c10d import _coalescing_manager

    cpu = torch.device("cpu")

    def block():
        if how == "one by one":
            for t in tensors:
                dist.all_reduce(t, group=group)
        elif how == "_coalescing_manager":
            with _coalescing_manager(group=group, device=cpu):
                for t in tensors:
                    dist.all_reduce(t, group=group)
        else:  # the process group's own window: the backend holds the calls, then fuses them
            pg = group if group is not None else dist.group.WORLD
            pg._start_coalescing(cpu)
            for t in tensors:
                dist.all_reduce(t, group=group)
            pg._end_coalescing(cpu).wait()

    for _ in range(max(3, iters // 10)):
        block()
    times = []
    for _ in range(iters):
        dist.barrier(group=group)
        start = time.perf_counter()
        block()
        times.append((time.perf_counter() - start) * 1e6)
    return statistics.median(times)


def _rank(calls, numel, iters):
    import torch_ring_backend  # noqa: F401

    torch.set_num_threads(1)
    dist.init_process_group("ring")
    gloo = dist.new_group(backend="gloo")
    tensors = [torch.ones(numel) for _ in range(calls)]
    rows = {}
    for how in ("one by one", "_coalescing_manager", "coalescing window"):
        rows[f"ring, {how}"] = _block_us(how, None, tensors, iters)
    rows["gloo, one by one"] = _block_us("one by one", gloo, tensors, iters)
    dist.destroy_process_group()
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--calls", type=int, default=32)
    parser.add_argument("--numel", type=int, default=256, help="float32 elements per tensor")
    parser.add_argument("--iters", type=int, default=200)
    args = parser.parse_args()
    rows = run_on_local_ranks(_rank, args.nproc, args.calls, args.numel, args.iters,
                              timeout_s=600)[0]
    base = rows["ring, one by one"]
    print(f"{args.calls} all_reduces of {args.numel} float32, {args.nproc} ranks, "
          f"median of {args.iters} blocks (rank 0):")
    for name, us in rows.items():
        print(f"  {name:28} {us:9.1f} us per block   {base / us:5.2f}x ring one by one")


if __name__ == "__main__":
    main()
