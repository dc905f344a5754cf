"""A small DDP training loop on "ring": the model from a common seed, data seeded by rank.

    torchrun --nproc_per_node=2 examples/ddp_train.py --steps 20 --bucket-cap-mb 1 --accumulation-steps 2

With --accumulation-steps k, gradients accumulate locally for k-1 micro-batches under
no_sync() and are all-reduced on the k-th. Prints the loss and, at the end, a checksum of the
parameters that is identical on every rank.
"""
import argparse
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import torch_ring_backend  # noqa: F401
from torch_ring_backend.models import make_batch, make_model


def train(backend_group, steps, bucket_cap_mb, accumulation_steps, rank, lr=0.05):
    model = make_model(seed=0)
    ddp = DDP(model, process_group=backend_group, bucket_cap_mb=bucket_cap_mb)
    opt = torch.optim.SGD(ddp.parameters(), lr=lr, momentum=0.9)
    losses = []
    for step in range(steps):
        for micro in range(accumulation_steps):
            images, tokens, labels = make_batch(rank, step * accumulation_steps + micro)
            last = micro == accumulation_steps - 1
            context = ddp.no_sync() if not last else _nothing()
            with context:
                loss = nn.functional.cross_entropy(ddp(images, tokens), labels) / accumulation_steps
                loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item() * accumulation_steps)
    return model, losses


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--bucket-cap-mb", type=float, default=25.0)
    parser.add_argument("--accumulation-steps", type=int, default=1)
    args = parser.parse_args()

    dist.init_process_group("ring")
    rank = dist.get_rank()
    start = time.perf_counter()
    model, losses = train(None, args.steps, args.bucket_cap_mb, args.accumulation_steps, rank)
    elapsed = time.perf_counter() - start
    checksum = torch.cat([p.detach().flatten() for p in model.parameters()]).double().sum().item()
    print(f"[rank {rank}] loss first {losses[0]:.4f} last {losses[-1]:.4f}; "
          f"{args.steps} steps in {elapsed:.2f} s; parameter checksum {checksum:.12e}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
