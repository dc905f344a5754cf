"""Check that every rank holds the same gradients after one DDP step on "ring", and compare
them with a reference backend.

    torchrun --nproc_per_node=2 examples/ddp_grad_check.py --reference gloo
    torchrun --nproc_per_node=2 examples/ddp_grad_check.py --device cuda --reference nccl

Prints the per-layer grad_mean on every rank, whether all ranks agree bit for bit, and the
largest difference from the reference backend's gradients for the same step.
"""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import torch_ring_backend  # noqa: F401
from torch_ring_backend.models import grad_means, make_batch, make_model


def one_step_grads(group, device, rank):
    model = make_model(seed=0, device=device)
    ddp = DDP(model, process_group=group, device_ids=[device.index] if device.type == "cuda" else None)
    images, tokens, labels = make_batch(rank, step=0, device=device)
    nn.functional.cross_entropy(ddp(images, tokens), labels).backward()
    return grad_means(model), torch.cat([p.grad.flatten() for p in model.parameters()])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--reference", choices=["gloo", "nccl", "none"], default="gloo")
    args = parser.parse_args()

    dist.init_process_group("ring")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cpu")
    if args.device == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)) % torch.cuda.device_count())
        torch.cuda.set_device(device)

    means, flat = one_step_grads(None, device, rank)
    for name, value in means.items():
        print(f"[rank {rank}] {name:20s} grad_mean {value:+.10e}", flush=True)

    # Same bits everywhere: compare with rank 0's gradient vector.
    reference_flat = flat.clone()
    dist.broadcast(reference_flat, src=0)
    identical = torch.equal(flat, reference_flat)

    largest = float("nan")
    if args.reference != "none":
        ref_group = dist.new_group(backend=args.reference)
        _, ref_flat = one_step_grads(ref_group, device, rank)
        largest = (flat - ref_flat).abs().max().item()

    results = [None] * world
    dist.all_gather_object(results, (identical, largest))
    if rank == 0:
        all_identical = all(r[0] for r in results)
        print(f"identical across {world} ranks: {all_identical}")
        if args.reference != "none":
            worst = max(r[1] for r in results)
            print(f"largest |ring - {args.reference}| gradient difference: {worst:.3e}")
    dist.destroy_process_group()
    if not all(r[0] for r in results):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
