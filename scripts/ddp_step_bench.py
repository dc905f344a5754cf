"""Time a DDP training step (the examples' SmallNet) on "ring" and on gloo, in the same
processes: python scripts/ddp_step_bench.py [--nproc 2] [--steps 50] [--bucket-cap-mb 25]"""
import argparse
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

from torch_ring_backend._launch import run_on_local_ranks


def _time_steps(group, rank, steps, bucket_cap_mb):
    from torch_ring_backend.models import make_batch, make_model

    model = make_model(seed=0)
    ddp = DDP(model, process_group=group, bucket_cap_mb=bucket_cap_mb)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    batches = [make_batch(rank, i, batch_size=32) for i in range(steps + 5)]
    def step(b):
        opt.zero_grad()
        nn.functional.cross_entropy(ddp(b[0], b[1]), b[2]).backward()
        opt.step()
    for b in batches[:5]:
        step(b)  # warm-up
    dist.barrier(group=group)
    start = time.perf_counter()
    for b in batches[5:]:
        step(b)
    elapsed = torch.tensor([time.perf_counter() - start])
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX, group=group)
    return elapsed.item() / steps * 1e3


def _rank(steps, bucket_cap_mb):
    import torch_ring_backend  # noqa: F401

    torch.set_num_threads(1)
    dist.init_process_group("ring")
    gloo = dist.new_group(backend="gloo")
    rank = dist.get_rank()
    results = {}
    for round_ in range(2):  # alternate, so that neither backend always runs on a warmer machine
        results.setdefault("ring", []).append(_time_steps(None, rank, steps, bucket_cap_mb))
        results.setdefault("gloo", []).append(_time_steps(gloo, rank, steps, bucket_cap_mb))
    dist.destroy_process_group()
    return {k: min(v) for k, v in results.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--bucket-cap-mb", type=float, default=25)
    args = parser.parse_args()
    r = run_on_local_ranks(_rank, args.nproc, args.steps, args.bucket_cap_mb, timeout_s=600)[0]
    print(f"DDP step, {args.nproc} ranks, bucket_cap_mb {args.bucket_cap_mb}: "
          f"ring {r['ring']:.2f} ms, gloo {r['gloo']:.2f} ms, ring/gloo time {r['ring'] / r['gloo']:.2f}")


if __name__ == "__main__":
    main()
