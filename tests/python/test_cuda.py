"""Issue 4: CUDA tensors on the CUDA ring kernels (skipped without a GPU).

Ranks are processes that all use cuda:0 (several ranks on ONE GPU, linked by CUDA IPC), plus
one test with threads as ranks in this process (direct pointers). Inputs are built on the GPU
by tiling a per-rank period of small integers (or random bits) whose reduction is exact in any
order, so every result is compared BITWISE with a reference computed on the CPU; a result
equal to the reference on every rank is bitwise identical across ranks. The period (1009,
prime) is not a divisor of any chunk, channel or slot size, so misplaced data shows.

Self-contained on purpose: scripts/gpu_check.sh runs this file alone on the GPU machine.
"""
import datetime
import hashlib
import os
import threading
import time

import pytest
import torch
import torch.distributed as dist

from torch_ring_backend._launch import run_on_local_ranks

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not torch.cuda.is_available(),
        reason="needs a CUDA GPU: the CUDA ring kernels run only on a device "
               "(torch.cuda.is_available() is False here)"),
]

PERIOD = 1009
FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
INTEGERS = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)
ALL_DTYPES = FLOATS + INTEGERS + (torch.bool,)
ARITHMETIC = ("SUM", "AVG", "MAX", "MIN", "PRODUCT", "PREMUL_SUM")
BITWISE = ("BAND", "BOR", "BXOR")
MiB = 1 << 20
# Element counts every (dtype, op) pair runs at: empty, tiny, below and above one slot per
# channel, not multiples of anything.
SMALL_COUNTS = (0, 1, 5, 4099, 65536 + 3)
# Bytes of the large float32 SUM all_reduces (up to 256 MiB).
LARGE_BYTES = (1 * MiB + 12, 16 * MiB, 256 * MiB)
TIMEOUT_S = 120
# torch 2.14 renamed the single-tensor collectives (the old names warn); older torch has only
# the old names.
ALL_GATHER_SINGLE = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
REDUCE_SCATTER_SINGLE = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor


# ---- reference -----------------------------------------------------------------------------------

def ops_for(dtype):
    if dtype == torch.bool:
        return ("SUM", "MAX", "MIN", "PRODUCT") + BITWISE
    return ARITHMETIC if dtype in FLOATS else ARITHMETIC + BITWISE


def factor_for(dtype):
    # Exact in every dtype: a power of two for floats, an integer for integers.
    return 0.5 if dtype in FLOATS else 3.0


def reduce_op(name, factor=None):
    if name == "PREMUL_SUM":
        return dist._make_nccl_premul_sum(factor)
    return getattr(dist.ReduceOp, name)


def period_of(rank, dtype, op, seed=0):
    """PERIOD values of `dtype` for `rank`: small integers whose sums and products stay exact
    for up to 4 ranks, or random bits for the bitwise ops and bool."""
    key = (seed * 1000003 + rank * 7919 + ALL_DTYPES.index(dtype) * 131 + hash_op(op)) % (2**31)
    g = torch.Generator().manual_seed(key)
    if dtype == torch.bool:
        return torch.randint(0, 2, (PERIOD,), generator=g).bool()
    if op in BITWISE or op == "PAYLOAD":
        if dtype in FLOATS:
            return torch.randn(PERIOD, generator=g, dtype=torch.float64).to(dtype)
        info = torch.iinfo(dtype)
        return torch.randint(info.min, info.max, (PERIOD,), generator=g, dtype=dtype)
    signed = dtype != torch.uint8
    if op == "PRODUCT":
        choices = torch.tensor([-1, 1, 2] if signed else [1, 2, 1])
        v = choices[torch.randint(0, 3, (PERIOD,), generator=g)]
    elif op in ("MAX", "MIN"):
        v = torch.randint(-5 if signed else 0, 6, (PERIOD,), generator=g)
    else:
        v = torch.randint(-3 if signed else 0, 4, (PERIOD,), generator=g)
    return v.to(dtype)


def hash_op(op):
    return int(hashlib.sha256(op.encode()).hexdigest()[:6], 16)


def expected_period(periods, op, dtype, factor=None):
    """The reduction of the ranks' periods, computed wide and rounded once."""
    world = len(periods)
    stacked = torch.stack(periods)
    if dtype == torch.bool:
        if op in ("SUM", "MAX", "BOR"):
            return stacked.any(0)
        if op in ("MIN", "PRODUCT", "BAND"):
            return stacked.all(0)
        return stacked.to(torch.int64).sum(0) % 2 == 1  # BXOR
    if op in BITWISE:
        out = periods[0].clone()
        fn = {"BAND": torch.bitwise_and, "BOR": torch.bitwise_or, "BXOR": torch.bitwise_xor}[op]
        for p in periods[1:]:
            out = fn(out, p)
        return out
    if op == "MAX":
        return stacked.amax(0)
    if op == "MIN":
        return stacked.amin(0)
    wide = torch.float64 if dtype in FLOATS else torch.int64
    w = stacked.to(wide)
    if op == "PREMUL_SUM":
        # Each contribution is scaled and stored in its dtype before the sum.
        w = (stacked.to(torch.float64) * factor).to(dtype).to(wide)
        return w.sum(0).to(dtype)
    if op == "SUM":
        return w.sum(0).to(dtype)
    if op == "PRODUCT":
        return w.prod(0).to(dtype)
    total = w.sum(0)  # AVG
    if dtype in FLOATS:
        return (total / world).to(dtype)
    return torch.div(total, world, rounding_mode="trunc").to(dtype)


def tile(period, count, device):
    return period.to(device).repeat(count // PERIOD + 1)[:count].contiguous()


def same_bits(got, want):
    if got.dtype != want.dtype or got.shape != want.shape:
        return False
    if got.dtype == torch.bool:
        return torch.equal(got, want)
    as_int = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[got.element_size()]
    return torch.equal(got.view(as_int), want.view(as_int))


def first_difference(got, want):
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"got {got.dtype} {tuple(got.shape)}, want {want.dtype} {tuple(want.shape)}"
    bad = (got != want)
    if got.dtype != torch.bool and got.is_floating_point():
        bad |= torch.signbit(got) != torch.signbit(want)
    idx = bad.nonzero()
    if idx.numel() == 0:
        return "bit patterns differ (NaN payloads?)"
    i = int(idx[0][0])
    return (f"{int(bad.sum())} of {got.numel()} differ; first at {i}: got {got[i].item()!r}, "
            f"want {want[i].item()!r}")


def digest(t):
    flat = t.detach().contiguous().view(-1).cpu()
    return hashlib.sha1(flat.view(torch.uint8).numpy().tobytes()).hexdigest()


class Report:
    def __init__(self):
        self.failures = []
        self.digests = {}
        self.checked = 0

    def check(self, label, got, want):
        self.checked += 1
        if not same_bits(got, want):
            self.failures.append(f"{label}: {first_difference(got, want)}")

    def as_dict(self):
        return {"failures": self.failures, "digests": self.digests, "checked": self.checked}


def _setup(timeout_s=TIMEOUT_S, device="cuda"):
    """Joins the group; every rank uses cuda:0. device="cpu" runs the same checks on the CPU
    path, which is how the reference logic of this file is checked on a machine without a GPU
    (python -c "import test_cuda as t; print(t.run_on_cpu())" from tests/python)."""
    if device == "cuda":
        torch.cuda.set_device(0)
    dist.init_process_group("ring", timeout=datetime.timedelta(seconds=timeout_s))
    dev = torch.device("cuda", 0) if device == "cuda" else torch.device("cpu")
    return dist.get_rank(), dist.get_world_size(), dev


def _sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize()


def _ran_on_kernels(dev):
    """Whether this rank's recent CUDA collectives ran as ring kernels (the flight recorder marks
    them "(CUDA)"), not staged through host memory: a declined peer path would pass every
    value check while testing nothing of the kernels."""
    if dev.type != "cuda":
        return None
    import torch_ring_backend
    return any("(CUDA)" in e["detail"] for e in torch_ring_backend.flight_recorder(device="cuda"))


# ---- rank functions (module level: spawned ranks import them by name) ------------------------------

def rank_all_reduce_sweep(large_bytes, device="cuda", counts=SMALL_COUNTS):
    rank, world, dev = _setup(device=device)
    rep = Report()
    for dtype in ALL_DTYPES:
        for op in ops_for(dtype):
            factor = factor_for(dtype) if op == "PREMUL_SUM" else None
            periods = [period_of(r, dtype, op) for r in range(world)]
            want = expected_period(periods, op, dtype, factor)
            for count in counts:
                x = tile(periods[rank], count, dev)
                dist.all_reduce(x, op=reduce_op(op, factor))
                rep.check(f"all_reduce {dtype} {op} count {count}", x, tile(want, count, dev))
    # Large sizes: float32 SUM up to 256 MiB, and a few other pairs at 16 MiB.
    big = [(torch.float32, "SUM", b // 4) for b in large_bytes]
    big += [(torch.bfloat16, "AVG", 8 * MiB + 1), (torch.int64, "MAX", 2 * MiB + 3),
            (torch.float16, "PREMUL_SUM", 8 * MiB), (torch.uint8, "BXOR", 16 * MiB + 7)]
    for dtype, op, count in big:
        factor = factor_for(dtype) if op == "PREMUL_SUM" else None
        periods = [period_of(r, dtype, op, seed=1) for r in range(world)]
        x = tile(periods[rank], count, dev)
        dist.all_reduce(x, op=reduce_op(op, factor))
        want = tile(expected_period(periods, op, dtype, factor), count, dev)
        rep.check(f"all_reduce {dtype} {op} count {count}", x, want)
        del x, want
    # Random floats: not exact, but every rank must hold the same bits.
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        for count in (1000, 1 * MiB + 1):
            g = torch.Generator().manual_seed(rank * 31 + count)
            x = torch.randn(count, generator=g).to(dtype).to(dev)
            dist.all_reduce(x)
            rep.digests[f"random {dtype} {count}"] = digest(x)
    _sync(dev)
    kernels = _ran_on_kernels(dev)
    dist.destroy_process_group()
    return {**rep.as_dict(), "kernels": kernels}


def rank_other_collectives(device="cuda"):
    rank, world, dev = _setup(device=device)
    rep = Report()
    # reduce_scatter_tensor: output block `rank` of the reduction of every rank's input.
    for dtype in (torch.float32, torch.bfloat16, torch.float64, torch.int64, torch.int8,
                  torch.uint8, torch.bool):
        for op in ops_for(dtype):
            factor = factor_for(dtype) if op == "PREMUL_SUM" else None
            periods = [period_of(r, dtype, op, seed=2) for r in range(world)]
            want_p = expected_period(periods, op, dtype, factor)
            for count in SMALL_COUNTS:
                x = tile(periods[rank], world * count, dev)
                out = torch.empty(count, dtype=dtype, device=dev)
                REDUCE_SCATTER_SINGLE(out, x, op=reduce_op(op, factor))
                want = tile(want_p, world * count, dev)[rank * count:(rank + 1) * count]
                rep.check(f"reduce_scatter {dtype} {op} count {count}", out, want)
                rep.check(f"reduce_scatter {dtype} {op} count {count} input untouched", x,
                          tile(periods[rank], world * count, dev))
    # reduce_scatter with the output inside the input (staged through a copy).
    periods = [period_of(r, torch.float32, "SUM", seed=3) for r in range(world)]
    x = tile(periods[rank], world * 4099, dev)
    want = tile(expected_period(periods, "SUM", torch.float32), world * 4099, dev)
    out = x.narrow(0, rank * 4099, 4099)
    REDUCE_SCATTER_SINGLE(out, x)
    rep.check("reduce_scatter output inside input", out.clone(),
              want[rank * 4099:(rank + 1) * 4099])
    # all_gather_into_tensor, separate and in place (input = output's own block, as FSDP).
    for dtype in ALL_DTYPES:
        periods = [period_of(r, dtype, "PAYLOAD", seed=4) for r in range(world)]
        for count in SMALL_COUNTS:
            want = torch.cat([tile(p, count, dev) for p in periods])
            x = tile(periods[rank], count, dev)
            out = torch.empty(world * count, dtype=dtype, device=dev)
            ALL_GATHER_SINGLE(out, x)
            rep.check(f"all_gather {dtype} count {count}", out, want)
            out2 = torch.zeros(world * count, dtype=dtype, device=dev)
            own = out2.narrow(0, rank * count, count)
            own.copy_(x)
            ALL_GATHER_SINGLE(out2, own)
            rep.check(f"all_gather in place {dtype} count {count}", out2, want)
    # broadcast from every root.
    for dtype in (torch.float32, torch.float16, torch.int64, torch.uint8, torch.bool):
        periods = [period_of(r, dtype, "PAYLOAD", seed=5) for r in range(world)]
        for root in range(world):
            for count in SMALL_COUNTS + (4 * MiB + 1,):
                x = tile(periods[rank], count, dev)
                dist.broadcast(x, src=root)
                rep.check(f"broadcast {dtype} root {root} count {count}", x,
                          tile(periods[root], count, dev))
    # A staged collective (list all_gather) between kernel collectives, then a barrier.
    x = torch.full((1000,), rank + 1, dtype=torch.int32, device=dev)
    outs = [torch.empty_like(x) for _ in range(world)]
    dist.all_gather(outs, x)
    for r in range(world):
        rep.check(f"list all_gather block {r}", outs[r], torch.full_like(x, r + 1))
    y = torch.ones(7, device=dev)
    dist.all_reduce(y)
    dist.barrier()
    rep.check("all_reduce after staged", y, torch.full_like(y, world))
    # Bad input: clear errors before any communication, the group stays usable.
    errors = {}
    for label, call in {
        "mixed devices": lambda: ALL_GATHER_SINGLE(torch.empty(world * 4), torch.ones(4, device=dev)),
        "non-contiguous": lambda: dist.all_reduce(torch.ones(4, 4, device=dev).t()),
    }.items():
        try:
            call()
            errors[label] = None
        except Exception as e:  # noqa: BLE001
            errors[label] = f"{type(e).__name__}: {e}"
    z = torch.ones(3, device=dev)
    dist.all_reduce(z)
    rep.check("all_reduce after bad input", z, torch.full_like(z, world))
    _sync(dev)
    kernels = _ran_on_kernels(dev)
    dist.destroy_process_group()
    out = {**rep.as_dict(), "kernels": kernels}
    out["errors"] = errors
    return out


def rank_stream_order():
    """A slow producer kernel on a side stream writes the input right before all_reduce; the
    consumer reads the output after wait() on the same stream. Without the comm stream waiting
    on the producer, or the consumer waiting on the kernel, the values would be stale."""
    rank, world, dev = _setup()
    side = torch.cuda.Stream()
    outcomes = []
    n = 4 * MiB
    for trial in range(3):
        with torch.cuda.stream(side):
            x = torch.zeros(n, device=dev)
            torch.cuda._sleep(20_000_000)  # tens of milliseconds of GPU time before the write
            x.fill_(rank + 1 + trial)
            work = dist.all_reduce(x, async_op=True)
            work.wait()
            y = x * 2
            fut = dist.all_reduce(torch.full((5,), float(rank), device=dev), async_op=True).get_future()
            chained = fut.then(lambda f: f.value()[0] + 1)
        side.synchronize()
        want = 2 * sum(r + 1 + trial for r in range(world))
        want_chained = sum(range(world)) + 1
        outcomes.append((bool((y == want).all()), bool((chained.wait() == want_chained).all())))
    torch.cuda.synchronize()
    dist.destroy_process_group()
    return outcomes


def rank_timeout(timeout_s):
    """Rank 0 runs an all_reduce that rank 1 skips: rank 0's work must fail with
    DistBackendError within the timeout plus slack, and its GPU must stay usable."""
    rank, world, dev = _setup(timeout_s)
    x = torch.ones(1 << 16, device=dev)
    dist.all_reduce(x)  # the CUDA set-up is collective: do it before the skip
    torch.cuda.synchronize()
    result = {}
    if rank == 0:
        start = time.monotonic()
        work = dist.all_reduce(x, async_op=True)
        while not work.is_completed() and time.monotonic() - start < timeout_s + 60:
            time.sleep(0.02)
        result["elapsed"] = time.monotonic() - start
        try:
            work.wait()
            result["error"] = None
        except Exception as e:  # noqa: BLE001
            result["error"] = (type(e).__name__, str(e))
        torch.cuda.synchronize()
        result["gpu_usable"] = torch.ones(4, device=dev).sum().item() == 4
    else:
        time.sleep(timeout_s + 3)
    try:
        dist.all_reduce(x)
        torch.cuda.synchronize()
        result["next"] = None
    except Exception as e:  # noqa: BLE001
        result["next"] = (type(e).__name__, str(e))
    dist.destroy_process_group()
    return result


def rank_mismatch():
    """Ranks disagree about the size: the kernels' header checks stop them, each rank's work
    fails with DistBackendError, and nobody hangs."""
    rank, world, dev = _setup(30)
    x = torch.ones(16, device=dev)
    dist.all_reduce(x)
    torch.cuda.synchronize()
    y = torch.ones(100 * (rank + 1), device=dev)
    start = time.monotonic()
    work = dist.all_reduce(y, async_op=True)
    while not work.is_completed() and time.monotonic() - start < 60:
        time.sleep(0.02)
    try:
        work.wait()
        error = None
    except Exception as e:  # noqa: BLE001
        error = (type(e).__name__, str(e))
    torch.cuda.synchronize()
    dist.destroy_process_group()
    return {"error": error, "elapsed": time.monotonic() - start}


def rank_staged_over_tcp(device="cuda"):
    """TORCH_RING_TRANSPORT=tcp, as between hosts: CUDA tensors are staged through pinned host
    memory over the TCP links (no kernels), and the results are still exact."""
    os.environ["TORCH_RING_TRANSPORT"] = "tcp"
    rank, world, dev = _setup(device=device)
    rep = Report()
    n = (1 << 20) + 3
    x = torch.arange(n, device=dev, dtype=torch.float32) % 251 + rank
    dist.all_reduce(x)
    want = (torch.arange(n, device=dev, dtype=torch.float32) % 251) * world + sum(range(world))
    rep.check("all_reduce", x, want)
    b = torch.full((4099,), float(rank), device=dev, dtype=torch.float64)
    dist.broadcast(b, src=world - 1)
    rep.check("broadcast", b, torch.full_like(b, float(world - 1)))
    g = torch.empty(world * 1000, device=dev, dtype=torch.bfloat16)
    dist.all_gather_into_tensor(g, torch.full((1000,), float(rank), device=dev,
                                              dtype=torch.bfloat16))
    rep.check("all_gather_into_tensor", g, torch.arange(world, device=dev).repeat_interleave(
        1000).to(torch.bfloat16))
    out = torch.empty(777, device=dev, dtype=torch.int32)
    dist.reduce_scatter_tensor(out, torch.ones(world * 777, device=dev, dtype=torch.int32))
    rep.check("reduce_scatter_tensor", out, torch.full_like(out, world))
    p = torch.full((12345,), float(rank + 1), device=dev)
    if rank == 0:
        dist.send(p, 1)
    elif rank == 1:
        dist.recv(p, 0)
        rep.check("recv", p, torch.ones_like(p))
    _sync(dev)
    staged = not _ran_on_kernels(dev)
    dist.destroy_process_group()
    return {**rep.as_dict(), "staged": staged}


def _train_ddp(group, rank, dev, steps=8):
    from torch.nn.parallel import DistributedDataParallel as DDP

    from torch_ring_backend.models import make_batch, make_model
    model = make_model(seed=0, device=dev)
    ddp = DDP(model, device_ids=[dev.index], process_group=group, bucket_cap_mb=0.01)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    for step in range(steps):
        images, tokens, labels = make_batch(rank, step, device=dev)
        loss = torch.nn.functional.cross_entropy(ddp(images, tokens), labels)
        loss.backward()
        opt.step()
        opt.zero_grad()
    torch.cuda.synchronize()
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def rank_ddp(with_nccl):
    rank, world, dev = _setup()
    ring = _train_ddp(None, rank, dev)
    gloo = _train_ddp(dist.new_group(backend="gloo"), rank, dev)
    result = {"digest": digest(ring), "vs_gloo": (ring - gloo).abs().max().item(), "nccl": None}
    if with_nccl:
        try:
            nccl = _train_ddp(dist.new_group(backend="nccl"), rank, dev)
            result["nccl"] = (ring - nccl).abs().max().item()
        except Exception as e:  # noqa: BLE001 - reported, the comparison with gloo still holds
            result["nccl"] = f"{type(e).__name__}: {str(e).splitlines()[0]}"
    dist.destroy_process_group()
    return result


def rank_sync_batch_norm():
    rank, world, dev = _setup()
    torch.manual_seed(0)
    full = torch.randn(4 * world, 6, 5, 5, device=dev)  # the same whole batch on every rank
    mine = full[4 * rank:4 * (rank + 1)].clone().requires_grad_(True)
    sync_bn = torch.nn.SyncBatchNorm(6).to(dev)
    out = sync_bn(mine)
    (out * out).sum().backward()
    plain = torch.nn.BatchNorm2d(6).to(dev)
    whole = full.clone().requires_grad_(True)
    ref = plain(whole)
    (ref * ref).sum().backward()
    result = {
        "out": (out - ref[4 * rank:4 * (rank + 1)]).abs().max().item(),
        "grad": (mine.grad - whole.grad[4 * rank:4 * (rank + 1)]).abs().max().item(),
        "running_mean": (sync_bn.running_mean - plain.running_mean).abs().max().item(),
    }
    dist.destroy_process_group()
    return result


# ---- tests -----------------------------------------------------------------------------------------

def _no_failures(results):
    failures = [f"rank {r}: {f}" for r, res in enumerate(results) for f in res["failures"]]
    assert not failures, "\n".join(failures[:40])
    assert all(res["checked"] > 0 for res in results), "nothing was checked"
    kernels = [res.get("kernels") for res in results]
    assert all(k is None for k in kernels) or all(kernels), (
        f"the CUDA collectives were staged through host memory, not run as ring kernels "
        f"({kernels}); TORCH_RING_DEBUG=INFO logs why the peer path was declined")
    for label in results[0]["digests"]:
        values = {res["digests"][label] for res in results}
        assert len(values) == 1, f"{label}: ranks hold different bits"


def test_threads_as_ranks_in_one_process():
    """Two RingBackend objects in this process, one per thread, on cuda:0: the links are
    direct pointers (an IPC handle cannot be opened by its own process)."""
    import torch_ring_backend  # noqa: F401
    from torch_ring_backend import _C

    world = 2
    store = dist.HashStore()
    backends = [None] * world
    results = [None] * world
    errors = []

    def rank_body(rank):
        try:
            torch.cuda.set_device(0)
            backends[rank] = _C.RingBackend(dist.PrefixStore("threads", store), rank, world,
                                            datetime.timedelta(seconds=60), "threads")
            outs = []
            for count in (0, 1, 4099, 1 * MiB + 3):
                x = torch.full((count,), float(rank + 1), device="cuda:0")
                work = backends[rank].allreduce([x], dist.AllreduceOptions())
                work.wait()
                outs.append(bool((x == sum(range(1, world + 1))).all()))
            torch.cuda.current_stream().synchronize()
            outs.append(any("(CUDA)" in e["detail"] for e in backends[rank].flight_recorder()))
            results[rank] = outs
        except Exception as e:  # noqa: BLE001
            errors.append(f"rank {rank}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=rank_body, args=(r,)) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a rank thread hung"
    assert not errors, errors
    assert all(all(r) for r in results), results
    for b in backends:
        b.shutdown()


def test_stream_order():
    for outcomes in run_on_local_ranks(rank_stream_order, 2, timeout_s=300):
        assert all(ok for pair in outcomes for ok in pair), outcomes


def test_all_reduce_every_op_and_dtype_bitwise():
    _no_failures(run_on_local_ranks(rank_all_reduce_sweep, 2, LARGE_BYTES, timeout_s=600))


def test_other_collectives():
    _check_other_collectives(run_on_local_ranks(rank_other_collectives, 2, timeout_s=600))


def _check_other_collectives(results):
    _no_failures(results)
    for res in results:
        assert "different devices" in (res["errors"]["mixed devices"] or ""), res["errors"]
        assert "not contiguous" in (res["errors"]["non-contiguous"] or ""), res["errors"]


def test_timeout_fails_within_bound_and_gpu_stays_usable():
    timeout_s = 5
    r0, r1 = run_on_local_ranks(rank_timeout, 2, timeout_s, timeout_s=300)
    assert r0["error"] is not None and r0["error"][0] == "DistBackendError", r0
    for needle in ("timed out", "all_reduce", "sequence", "rank 0"):
        assert needle in r0["error"][1], r0
    assert r0["elapsed"] < timeout_s + 15, r0
    assert r0["gpu_usable"], r0
    assert r0["next"] and r0["next"][0] == "DistBackendError", r0
    assert r1["next"] and r1["next"][0] == "DistBackendError", r1


def test_size_mismatch_is_an_error_on_every_rank():
    results = run_on_local_ranks(rank_mismatch, 2, timeout_s=300)
    for res in results:
        assert res["error"] and res["error"][0] == "DistBackendError", res
        assert res["elapsed"] < 30, res
    assert any("mismatch" in res["error"][1] for res in results), results


def test_cuda_tensors_over_tcp_are_staged_and_exact():
    results = run_on_local_ranks(rank_staged_over_tcp, 2, timeout_s=300)
    _no_failures(results)
    assert all(r["staged"] for r in results), "TORCH_RING_TRANSPORT=tcp still ran the kernels"


def test_sync_batch_norm_matches_one_batch_norm():
    for res in run_on_local_ranks(rank_sync_batch_norm, 2, timeout_s=300):
        assert res["out"] < 1e-4 and res["grad"] < 1e-4 and res["running_mean"] < 1e-5, res


def _nccl_multi_rank_ok():
    try:
        return dist.is_nccl_available() and torch.cuda.nccl.version() >= (2, 30, 0)
    except Exception:  # noqa: BLE001
        return False


def test_ddp_world_1_against_nccl_and_gloo():
    (res,) = run_on_local_ranks(rank_ddp, 1, dist.is_nccl_available(), timeout_s=300)
    assert res["vs_gloo"] < 1e-5, res
    if isinstance(res["nccl"], float):
        assert res["nccl"] < 1e-5, res


def test_ddp_two_ranks_on_one_gpu():
    with_nccl = _nccl_multi_rank_ok()
    env = {"NCCL_MULTI_RANK_GPU_ENABLE": "1"} if with_nccl else None
    results = run_on_local_ranks(rank_ddp, 2, with_nccl, timeout_s=300, env=env)
    assert results[0]["digest"] == results[1]["digest"], "ranks' parameters differ"
    for res in results:
        assert res["vs_gloo"] < 1e-4, res
        if isinstance(res["nccl"], float):
            assert res["nccl"] < 1e-4, res


# Three and four processes time-slice one GPU (without MPS their kernels never run at once):
# slower, so they come last, with fewer sizes per (dtype, op) pair.
@pytest.mark.parametrize("world", [3, 4])
def test_all_reduce_every_op_and_dtype_bitwise_more_ranks(world):
    _no_failures(run_on_local_ranks(rank_all_reduce_sweep, world, LARGE_BYTES[:2] + (64 * MiB,),
                                    "cuda", (0, 1, 4099, 65536 + 3), timeout_s=600))


def test_other_collectives_three_ranks():
    _check_other_collectives(run_on_local_ranks(rank_other_collectives, 3, timeout_s=600))


def run_on_cpu(world=2):
    """The sweeps on the CPU path: a check of this file's reference logic without a GPU."""
    sweep = run_on_local_ranks(rank_all_reduce_sweep, world, (1 * MiB + 12,), "cpu",
                               timeout_s=900)
    _no_failures(sweep)
    others = run_on_local_ranks(rank_other_collectives, world, "cpu", timeout_s=900)
    _no_failures(others)
    return {"checked": [r["checked"] for r in sweep + others],
            "digests": len(sweep[0]["digests"]), "errors": [o["errors"] for o in others]}


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(pytest.main([os.path.abspath(__file__), "-v"]))
