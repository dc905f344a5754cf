"""all_reduce of sparse COO tensors against gloo in the same job (gloo's documented semantics:
the SUM of every rank's tensor, coalesced, written into each rank's tensor), against the dense
sum computed without any backend, and DDP over an nn.Embedding(sparse=True) trained on ring and
on gloo side by side. Results are compared bitwise, across ranks too."""
import pytest
import torch
import torch.distributed as dist
import torch.nn as nn

from checks import Report, assert_reports_pass

SHAPES = {"hybrid": ((50, 4), 1), "two sparse dims": ((30, 20), 2), "one dim": ((64,), 1)}


def _sparse_input(rank, shape, sparse_dims, dtype, seed, exact):
    """An uncoalesced COO tensor with repeated indices; rank 1 holds no nonzeros at all."""
    g = torch.Generator().manual_seed(1000 * seed + rank)
    nnz = [9, 0, 23, 5][rank % 4]
    indices = torch.stack([torch.randint(0, shape[d], (nnz,), generator=g)
                           for d in range(sparse_dims)])
    value_shape = (nnz,) + tuple(shape[sparse_dims:])
    if exact or not dtype.is_floating_point:
        values = torch.randint(-8, 9, value_shape, generator=g).to(dtype)
    else:
        values = torch.randn(value_shape, generator=g, dtype=torch.float64).to(dtype)
    return torch.sparse_coo_tensor(indices, values, shape)


def _check_sparse(report, label, got, want):
    if not (got.is_sparse and got.is_coalesced()):
        report.failures.append(f"{label}: not a coalesced sparse tensor: {got.layout}, "
                               f"coalesced {got.is_sparse and got.is_coalesced()}")
        return
    report.check(f"{label} indices", got._indices(), want._indices())
    report.check(f"{label} values", got._values(), want._values())


def sparse_against_gloo(ctx):
    report = Report()
    for seed, (name, (shape, sparse_dims)) in enumerate(SHAPES.items()):
        for dtype in (torch.float32, torch.float64, torch.int64):
            for exact in (True, False):
                label = f"{name} {dtype} {'exact' if exact else 'random'}"
                inputs = [_sparse_input(r, shape, sparse_dims, dtype, seed, exact)
                          for r in range(ctx.world)]
                got = inputs[ctx.rank].clone()
                work = dist.all_reduce(got, async_op=True)
                work.wait()
                by_gloo = inputs[ctx.rank].clone()
                dist.all_reduce(by_gloo, group=ctx.gloo)
                _check_sparse(report, f"{label} vs gloo", got, by_gloo)
                if exact:  # small integers: the dense sum is exact in any order
                    dense = sum(x.to_dense().double() for x in inputs).to(dtype)
                    report.check(f"{label} dense sum", got.to_dense(), dense)
                report.check(f"{label} the work's result", work.result()[0].to_dense(),
                             got.to_dense())
    return report


def sparse_refusals(ctx):
    report = Report()
    t = _sparse_input(ctx.rank, (50, 4), 1, torch.float32, 0, True)
    report.check_raises("MAX of a sparse tensor", lambda: dist.all_reduce(t, op=dist.ReduceOp.MAX),
                        ["ring: all_reduce on rank", "sparse", "SUM"])
    # A rank whose tensor has another shape: every rank's call fails naming a rank and both
    # shapes, nobody hangs, and the group goes on.
    shape = (50, 4) if ctx.rank != ctx.world - 1 else (51, 4)
    odd = _sparse_input(ctx.rank, shape, 1, torch.float32, 0, True)
    try:
        dist.all_reduce(odd)
    except RuntimeError as e:
        for needle in ("all_reduce on rank", "sparse tensor is [5", "one shape"):
            if needle not in str(e):
                report.failures.append(f"shape mismatch: {needle!r} not in {e}")
    else:
        report.failures.append("shape mismatch: no error")
    x = torch.full((10,), float(ctx.rank))
    dist.all_reduce(x)
    report.check("a dense all_reduce after the failed sparse one", x,
                 torch.full((10,), float(sum(range(ctx.world)))))
    return report


class _SparseModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(200, 8, sparse=True)
        self.head = nn.Linear(8, 1)

    def forward(self, ids):
        return self.head(self.embedding(ids).mean(dim=1))


def ddp_sparse_embedding(ctx):
    """Two DDP replicas from one initial state, one over ring and one over gloo, fed the same
    batches: after each step their parameters must be the same bits."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    report = Report()
    torch.manual_seed(0)
    base = _SparseModel()
    models = {}
    for name, group in (("ring", None), ("gloo", ctx.gloo)):
        copy = _SparseModel()
        copy.load_state_dict(base.state_dict())
        models[name] = DDP(copy, process_group=group)
    optimizers = {n: torch.optim.SGD(m.parameters(), lr=0.1) for n, m in models.items()}
    g = torch.Generator().manual_seed(ctx.rank + 7)
    for step in range(4):
        ids = torch.randint(0, 200, (16, 5), generator=g)
        target = torch.randn(16, 1, generator=g)
        for name, model in models.items():
            optimizers[name].zero_grad()
            nn.functional.mse_loss(model(ids), target).backward()
            optimizers[name].step()
        for (pname, p), (_, q) in zip(models["ring"].module.named_parameters(),
                                      models["gloo"].module.named_parameters()):
            p, q = p.detach(), q.detach()
            # The same bits where the order of additions cannot differ: two ranks, or the
            # first step's embedding (its sparse gradients are summed as gloo sums them). The
            # dense head's gradients over three ranks are summed in the ring's order, not
            # gloo's: within float32 rounding, then, and so is what it feeds back.
            if ctx.world == 2 or (step == 0 and pname == "embedding.weight"):
                report.check(f"step {step} {pname}", p, q)
            else:
                report.check_close(f"step {step} {pname}", p, q, 1e-6 * (1 + q.abs()))
    return report


@pytest.mark.parametrize("world", [2, 3, 4])
def test_sparse_all_reduce_is_gloos_result_bit_for_bit(pool, world):
    assert_reports_pass(pool.run(sparse_against_gloo), f"sparse all_reduce world {world}")


@pytest.mark.parametrize("world", [3])
def test_sparse_all_reduce_refuses_what_it_cannot_sum_and_goes_on(pool, world):
    assert_reports_pass(pool.run(sparse_refusals), f"sparse refusals world {world}")


@pytest.mark.parametrize("world", [2, 3])
def test_ddp_with_a_sparse_embedding_trains_as_over_gloo(pool, world):
    assert_reports_pass(pool.run(ddp_sparse_embedding), f"DDP sparse embedding world {world}")
