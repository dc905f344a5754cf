"""Which tensor diverged: every parameter and buffer of a module compared bitwise across the
ranks of a group.

Replicas drift apart silently. Plain BatchNorm keeps its running statistics per rank unless DDP
broadcasts buffers. A per-rank seed, or a parameter updated outside the optimizer, does the
same. The loss still goes down, and no collective fails. `verify_replicas` hashes each tensor's
bytes on every rank and gathers the hashes, so the exchange is one small object gather whatever
the model's size. It names the first tensor (in the module's order, parameters before buffers)
whose bytes differ, which ranks differ from rank 0, and the largest absolute difference; only
that one tensor is gathered in full, to measure the difference."""
import hashlib
from dataclasses import dataclass, field

import torch
import torch.distributed as dist


class ReplicaMismatch(AssertionError):
    """Raised by verify_replicas when a tensor differs across ranks; `report` says which."""

    def __init__(self, report):
        super().__init__(report.describe())
        self.report = report


@dataclass
class ReplicaReport:
    checked: int                  # tensors compared
    mismatch: str = ""            # the first differing tensor ("bn.running_mean"), "" if none
    kind: str = ""                # "parameter" or "buffer"
    differing_ranks: list = field(default_factory=list)  # ranks (of the group) unlike rank 0
    max_abs_diff: float = 0.0     # the largest |x_rank - x_rank0| over those ranks
    mismatches: list = field(default_factory=list)  # every differing tensor's name

    @property
    def ok(self):
        return not self.mismatch

    def describe(self):
        if self.ok:
            return f"verify_replicas: all {self.checked} parameters and buffers are identical on every rank"
        more = len(self.mismatches) - 1
        return (f"verify_replicas: {self.kind} '{self.mismatch}' differs across ranks: ranks "
                f"{self.differing_ranks} hold other bits than rank 0 (largest absolute difference "
                f"{self.max_abs_diff:g})" + (f"; {more} more tensor(s) differ: "
                                             f"{self.mismatches[1:6]}" if more else ""))


def _digest(t):
    """A hash of the tensor's dtype, shape and bytes (NaNs compare by their bits)."""
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    t = t.contiguous()
    h = hashlib.sha256(f"{t.dtype}{tuple(t.shape)}".encode())
    if t.numel():
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def _tensors(module):
    for name, p in module.named_parameters():
        yield name, "parameter", p
    for name, b in module.named_buffers():
        yield name, "buffer", b


def verify_replicas(module, group=None, raise_on_mismatch=True):
    """Compares every parameter and buffer of `module` bitwise across the ranks of `group`
    (default: the whole job); collective, every rank must call it. Returns a ReplicaReport; if a
    tensor differs and `raise_on_mismatch`, raises ReplicaMismatch naming the first one (on
    every rank). A DDP-wrapped module is compared through its inner module."""
    group = group if group is not None else dist.group.WORLD
    inner = getattr(module, "module", module)
    named = list(_tensors(inner))
    mine = [(name, kind, _digest(t)) for name, kind, t in named]
    everyone = [None] * dist.get_world_size(group)
    dist.all_gather_object(everyone, mine, group=group)
    names = [n for n, _, _ in mine]
    for r, theirs in enumerate(everyone):
        if [n for n, _, _ in theirs] != names:
            raise ValueError(f"verify_replicas: rank {r} of the group has other parameters and "
                             f"buffers than this rank: the modules are not replicas")
    differing = [i for i in range(len(mine)) if len({theirs[i][2] for theirs in everyone}) > 1]
    report = ReplicaReport(checked=len(mine), mismatches=[names[i] for i in differing])
    if not differing:
        return report
    first = differing[0]
    name, kind, tensor = named[first]
    report.mismatch, report.kind = name, kind
    report.differing_ranks = [r for r, theirs in enumerate(everyone)
                              if theirs[first][2] != everyone[0][first][2]]
    gathered = [torch.empty_like(tensor) for _ in everyone]
    dist.all_gather(gathered, tensor.detach().contiguous(), group=group)
    base = gathered[0].double() if gathered[0].is_floating_point() else gathered[0].long()
    diffs = [(g.double() if g.is_floating_point() else g.long()) - base for g in gathered]
    report.max_abs_diff = float(max(d.abs().max().item() if d.numel() else 0 for d in diffs))
    if raise_on_mismatch:
        raise ReplicaMismatch(report)
    return report
