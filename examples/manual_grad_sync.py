"""Data parallelism by hand: after backward, all_reduce(AVG) every parameter's gradient.
The result matches DDP's (which also averages), and is identical on every rank.

    torchrun --nproc_per_node=2 examples/manual_grad_sync.py
"""
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import torch_ring_backend  # noqa: F401
from torch_ring_backend.models import make_batch, make_model


def manual_step(rank):
    model = make_model(seed=0)
    images, tokens, labels = make_batch(rank, step=0)
    nn.functional.cross_entropy(model(images, tokens), labels).backward()
    for p in model.parameters():
        dist.all_reduce(p.grad, op=dist.ReduceOp.AVG)
    return torch.cat([p.grad.flatten() for p in model.parameters()])


def ddp_step(rank):
    model = make_model(seed=0)
    ddp = DDP(model)
    images, tokens, labels = make_batch(rank, step=0)
    nn.functional.cross_entropy(ddp(images, tokens), labels).backward()
    return torch.cat([p.grad.flatten() for p in model.parameters()])


def main():
    dist.init_process_group("ring")
    rank = dist.get_rank()
    manual = manual_step(rank)
    ddp = ddp_step(rank)
    difference = (manual - ddp).abs().max().item()
    print(f"[rank {rank}] largest |manual AVG - DDP| gradient difference: {difference:.3e}", flush=True)
    dist.destroy_process_group()
    if difference > 1e-6:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
