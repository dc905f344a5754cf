"""SyncBatchNorm over "ring" (GPU only: torch refuses SyncBatchNorm on CPU tensors).

    torchrun --nproc_per_node=2 examples/syncbn_example.py

Every rank normalizes its own slice of a batch with SyncBatchNorm; the outputs and input
gradients must equal those of one plain BatchNorm applied to the whole batch on one device.
"""
import os

import torch
import torch.distributed as dist
import torch.nn as nn

import torch_ring_backend  # noqa: F401


def main():
    if not torch.cuda.is_available():
        raise SystemExit("syncbn_example.py needs a CUDA device (SyncBatchNorm is GPU-only in torch)")
    dist.init_process_group("ring")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)) % torch.cuda.device_count())
    torch.cuda.set_device(device)

    torch.manual_seed(0)
    full = torch.randn(4 * world, 6, 5, 5, device=device)  # the same whole batch on every rank
    mine = full[4 * rank: 4 * (rank + 1)].clone().requires_grad_(True)

    sync_bn = nn.SyncBatchNorm(6).to(device)
    out = sync_bn(mine)
    (out * out).sum().backward()

    plain = nn.BatchNorm2d(6).to(device)
    whole = full.clone().requires_grad_(True)
    ref = plain(whole)
    (ref * ref).sum().backward()

    out_err = (out - ref[4 * rank: 4 * (rank + 1)]).abs().max().item()
    grad_err = (mine.grad - whole.grad[4 * rank: 4 * (rank + 1)]).abs().max().item()
    print(f"[rank {rank}] SyncBatchNorm vs one BatchNorm: output {out_err:.2e}, input grad {grad_err:.2e}",
          flush=True)
    dist.destroy_process_group()
    if out_err > 1e-4 or grad_err > 1e-4:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
