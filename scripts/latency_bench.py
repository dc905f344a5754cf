"""Latency of back-to-back small collectives: p50, p99 and the mean of N blocking calls, per
rank 0, under torchrun (the launcher users run), so that the tail is visible and not only the
average that torch-ring-bench prints.

    OMP_NUM_THREADS=1 torchrun --nproc_per_node 2 scripts/latency_bench.py [--bytes 4096]
        [--calls 5000] [--collective all_reduce|broadcast|all_gather]
"""
import argparse
import os
import time

import torch
import torch.distributed as dist

import torch_ring_backend  # noqa: F401 - registers "ring"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bytes", type=int, default=4096)
    p.add_argument("--calls", type=int, default=5000)
    p.add_argument("--collective", choices=("all_reduce", "broadcast", "all_gather"),
                   default="all_reduce")
    a = p.parse_args()
    dist.init_process_group("ring")
    world = dist.get_world_size()
    t = torch.ones(max(1, a.bytes // 4))
    out = torch.empty(t.numel() * world)
    call = {"all_reduce": lambda: dist.all_reduce(t),
            "broadcast": lambda: dist.broadcast(t, 0),
            "all_gather": lambda: dist.all_gather_into_tensor(out, t)}[a.collective]
    for _ in range(500):
        call()
    times = []
    for _ in range(a.calls):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    times.sort()
    if int(os.environ["RANK"]) == 0:
        us = [x * 1e6 for x in times]
        print(f"{a.collective} {a.bytes} B, {world} ranks, {a.calls} calls: p50 {us[len(us) // 2]:.1f} us, "
              f"p99 {us[len(us) * 99 // 100]:.1f} us, mean {sum(us) / len(us):.1f} us, "
              f"TORCH_RING_INLINE_BYTES={os.environ.get('TORCH_RING_INLINE_BYTES', 'default')}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
