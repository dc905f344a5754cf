"""The rows of `torch-ring-check` for the calls beyond all_reduce and DDP that a user moving from
gloo (or NCCL) expects to work: each run on the default "ring" group and compared with its
closed form (what torch's documentation says the call leaves), computed here on every rank.
A call the installed torch lacks is not run; its name goes to the list of those left out."""
import datetime
import inspect

# Why at most 16 ranks for the float8 row: each rank adds 0 or 1, so every partial sum, in
# whatever order the ring adds them, is an integer of at most the world size, and float8_e4m3fn
# holds every integer up to 16 exactly: the result is exact, and one closed form serves.
FLOAT8_EXACT_WORLD = 16

# c10d::WorkResult::SUCCESS, what Work.get_future_result() holds for a call that succeeded.
WORK_RESULT_SUCCESS = 0


def _max_abs(got, want):
    import torch

    return float((got.to(torch.float64) - want.to(torch.float64)).abs().max())


def _monitored_barrier(device, rank, world):
    import torch
    import torch.distributed as dist

    dist.monitored_barrier(timeout=datetime.timedelta(seconds=60), wait_all_ranks=True)
    return torch.zeros(0), 0.0


def _gather_single(device, rank, world):
    """Every rank is the root once: the gathered rows are rank r's values, in rank order."""
    import torch
    import torch.distributed as dist

    n = 5
    mine = (torch.arange(n, dtype=torch.float32) + 100 * rank).to(device)
    kept = None
    for root in range(world):
        out = torch.empty(world * n, device=device) if rank == root else None
        dist.gather_single(mine, out, dst=root)
        if rank == root:
            kept = out.cpu()
    want = torch.cat([torch.arange(n, dtype=torch.float32) + 100 * r for r in range(world)])
    return kept, _max_abs(kept, want)


def _uint32_sum_max(device, rank, world):
    """Even ranks near the top of the range, odd ranks near the bottom: the SUM wraps around
    modulo 2^32 as C's does, and the MAX is the even ranks' (read as int32 it would not be)."""
    import torch
    import torch.distributed as dist

    n = 7

    def value(r, i):
        return 2**32 - 1 - r * 1000 - i if r % 2 == 0 else r * 1000 + i

    mine = torch.tensor([value(rank, i) for i in range(n)], dtype=torch.int64).to(torch.uint32)
    total, largest = mine.to(device, copy=True), mine.to(device, copy=True)
    dist.all_reduce(total)
    dist.all_reduce(largest, op=dist.ReduceOp.MAX)
    want = torch.tensor([sum(value(r, i) for r in range(world)) % 2**32 for i in range(n)] +
                        [max(value(r, i) for r in range(world)) for i in range(n)])
    got = torch.cat([total.cpu(), largest.cpu()])
    return got, _max_abs(got.to(torch.int64), want)


def _float8_sum(device, rank, world):
    import torch
    import torch.distributed as dist

    n = 64
    ones = torch.tensor([float((i + rank) % 2) for i in range(n)])
    x = ones.to(torch.float8_e4m3fn).to(device)
    dist.all_reduce(x)
    want = sum(torch.tensor([float((i + r) % 2) for i in range(n)]) for r in range(world))
    got = x.cpu()
    return got, _max_abs(got.float(), want)


def _sparse_sum(device, rank, world):
    """Rank r holds rows r and r+1 (of 8) with the value r+1: the sum, densely, is known."""
    import torch
    import torch.distributed as dist

    rows, cols = 8, 3

    def part(r):
        idx = torch.tensor([[r % rows, (r + 1) % rows]])
        return torch.sparse_coo_tensor(idx, torch.full((2, cols), float(r + 1)), (rows, cols))

    # Invariants checked, explicitly (torch warns when that is left implicit).
    with torch.sparse.check_sparse_tensor_invariants(True):
        x = part(rank)
        dist.all_reduce(x)
        want = sum(part(r).to_dense() for r in range(world))
        got = x.to_dense()
    return got, _max_abs(got, want)


def _future_result(device, rank, world):
    import torch
    import torch.distributed as dist

    x = torch.ones(16, device=device)
    work = dist.all_reduce(x, async_op=True)
    result = int(work.get_future_result().wait())
    want = torch.full((16,), float(world))
    got = x.cpu()
    diff = _max_abs(got, want) if result == WORK_RESULT_SUCCESS else float("inf")
    return torch.tensor([result]), diff


def _merged_halves(device, rank, world):
    """The ranks in two halves (new_group), merged back into one group of every rank through
    the default store (ProcessGroup.merge_remote_group): an all_reduce of rank + 1 there."""
    import torch
    import torch.distributed as dist

    half = world // 2
    halves = [dist.new_group(list(range(half))), dist.new_group(list(range(half, world)))]
    store = dist.PrefixStore("torch-ring-check/merge",
                             dist.distributed_c10d._get_default_store())
    merged = halves[0 if rank < half else 1].merge_remote_group(
        store, world, datetime.timedelta(seconds=60))
    x = torch.full((64,), float(rank + 1), device=device)
    merged.allreduce([x]).wait()
    got = x.cpu()
    return got, _max_abs(got, torch.full((64,), world * (world + 1) / 2))


def _calls(device, world):
    """(row name, function, why it is left out or None) for every call of the table."""
    import torch
    import torch.distributed as dist

    version = f"torch {torch.__version__.split('+')[0]}"
    takes_any_group = "_device_types" in inspect.getsource(dist.monitored_barrier)
    return [
        ("monitored_barrier (wait_all_ranks)", _monitored_barrier,
         None if takes_any_group else f"{version} runs it on gloo groups only"),
        ("gather_single to every root vs closed form", _gather_single,
         None if hasattr(dist, "gather_single") else f"{version} has no gather_single"),
        ("all_reduce uint32 SUM and MAX vs closed form", _uint32_sum_max, None),
        ("all_reduce float8_e4m3fn SUM vs closed form", _float8_sum,
         None if world <= FLOAT8_EXACT_WORLD else
         f"the row's sums are exact up to {FLOAT8_EXACT_WORLD} ranks"),
        ("all_reduce of a sparse COO tensor vs dense sum", _sparse_sum,
         None if device.type == "cpu" else "sparse all_reduce runs on CPU tensors"),
        ("merge_remote_group of two halves: all_reduce vs closed form", _merged_halves,
         None if world >= 2 else "two halves need two ranks"),
        ("Work.get_future_result() of an all_reduce", _future_result,
         None if hasattr(dist.Work, "get_future_result") else
         f"{version} has no get_future_result"),
    ]


def call_rows(device, rank, world):
    """{row name: (tensor, largest difference from its closed form)} for the calls this torch
    and device have, and the rows left out with why."""
    rows, left_out = {}, []
    for name, run, why_not in _calls(device, world):
        if why_not is not None:
            left_out.append(f"{name}: {why_not}")
            continue
        rows[name] = run(device, rank, world)
    return rows, left_out
