"""The classic all_reduce demo, on the "ring" backend.

    torchrun --nproc_per_node=4 examples/allreduce_demo.py            # CPU tensors
    torchrun --nproc_per_node=2 examples/allreduce_demo.py --device cuda

Each rank starts with a tensor full of (rank + 1); after all_reduce(SUM) every rank holds
1 + 2 + ... + world_size, bit for bit the same everywhere.
"""
import argparse
import os

import torch
import torch.distributed as dist

import torch_ring_backend  # noqa: F401  (registers the "ring" backend)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--numel", type=int, default=4)
    args = parser.parse_args()

    dist.init_process_group("ring")
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.device == "cuda":
        if not torch.cuda.is_available():
            raise SystemExit("--device cuda: no CUDA device is visible on this machine")
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)) % torch.cuda.device_count())
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")

    x = torch.full((args.numel,), float(rank + 1), device=device)
    before = x.tolist()
    dist.all_reduce(x, op=dist.ReduceOp.SUM)
    after = x.tolist()
    # Rank 0 prints every rank's lines, in rank order: lines printed by several processes at
    # once can reach the terminal cut into one another.
    seen = [None] * world
    dist.all_gather_object(seen, (before, after))
    if rank == 0:
        for when in (0, 1):
            for r, values in enumerate(seen):
                label = "before" if when == 0 else "after"
                print(f"[rank {r}] {label} all_reduce: {values[when]}")

    expected = world * (world + 1) / 2
    # Every rank checks the value, and that it holds exactly the same bits as rank 0.
    reference = x.clone()
    dist.broadcast(reference, src=0)
    ok = bool(torch.all(x == expected)) and torch.equal(x, reference)
    flags = [None] * world
    dist.all_gather_object(flags, ok)
    if rank == 0:
        verdict = "OK" if all(flags) else "MISMATCH"
        print(f"[rank 0] expected {expected} on {world} ranks: {verdict}", flush=True)
    dist.destroy_process_group()
    if not all(flags):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
