"""Which tensor diverged: torch_ring_backend.verify_replicas on a DDP model with plain BatchNorm.

    torchrun --nproc_per_node=2 examples/verify_replicas.py

Each rank trains on its own batches. Plain BatchNorm's running statistics are buffers, not
parameters, and DDP averages only gradients. With broadcast_buffers=False every rank keeps its
own running_mean and the replicas drift apart; verify_replicas names `bn.running_mean`. With
DDP's default (broadcast_buffers=True) rank 0's buffers are copied to every rank before each
forward, so after an evaluation forward (which does not update them) the replicas are
identical. (After a training forward they differ again: each rank has just updated its
statistics from its own batch.)
"""
import warnings

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import torch_ring_backend


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 16)
        self.bn = nn.BatchNorm1d(16)
        self.out = nn.Linear(16, 1)

    def forward(self, x):
        return self.out(torch.relu(self.bn(self.fc(x))))


def train(broadcast_buffers, steps=3):
    torch.manual_seed(0)  # the same initial weights on every rank
    if broadcast_buffers:
        model = DDP(Net())  # the default: buffers broadcast from rank 0 before each forward
    else:
        with warnings.catch_warnings():  # torch 2.15 suggests forward_sync_buffers instead
            warnings.simplefilter("ignore", FutureWarning)
            model = DDP(Net(), broadcast_buffers=False)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(100 + dist.get_rank())  # each rank its own data
    for _ in range(steps):
        x = torch.randn(32, 8, generator=gen)
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()
    # An evaluation forward: BatchNorm reads its running statistics without updating them, and
    # DDP (with broadcast_buffers) first copies rank 0's buffers to every rank.
    model.eval()
    model(torch.randn(32, 8, generator=gen))
    return torch_ring_backend.verify_replicas(model, raise_on_mismatch=False)


def main():
    dist.init_process_group("ring")
    for broadcast in (False, True):
        report = train(broadcast)
        if dist.get_rank() == 0:
            print(f"broadcast_buffers={broadcast}: {report.describe()}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
