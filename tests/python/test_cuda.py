"""CUDA tensors on the CUDA ring kernels (skipped without a GPU).

Ranks are processes that all use cuda:0 (several ranks on ONE GPU, linked by CUDA IPC), plus
one test with threads as ranks in this process (direct pointers). Inputs are built on the GPU
by tiling a per-rank period of small integers (or random bits) whose reduction is exact in any
order, so every result is compared BITWISE with a reference computed on the CPU; a result
equal to the reference on every rank is bitwise identical across ranks. The period (1009,
prime) is not a divisor of any chunk, channel or slot size, so misplaced data shows. Random
floats, whose sums depend on the order, are compared bitwise with the same collective run by
the CPU ring over the same inputs (the kernels add in the CPU executor's order: the host-run
kernel tests prove it), and within rounding with a float64 reference.

Every test counts the calls of its ranks that ran as ring kernels and those staged through
host memory (torch_ring_backend._C.kernel_call_count / staged_call_count): a test meant for
the kernels fails if any of its kernel-path calls was staged, since every value check would
still pass while testing nothing of the kernels.

Self-contained on purpose: scripts/gpu_check.sh runs this file alone on the GPU machine.
"""
import datetime
import hashlib
import os
import threading
import time

# Read when the CUDA context is created, so before any test touches the GPU: with CUDA's
# default of 8 hardware queues, torch's 32+ pooled streams share them, and in the threads-as-
# ranks test one rank's blocked event record can sit in front of the other rank's kernel in the
# same queue (a stall until the watchdog). 32 gives every stream in use its own queue.
os.environ.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", "32")

import pytest  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

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


# The collectives that have a ring kernel: on a group whose links have peer memory, none of
# their CUDA calls may be staged.
KERNEL_COLLECTIVES = ("all_reduce", "broadcast", "all_gather_into_tensor", "reduce_scatter_tensor")


def _path_counts():
    """(kernel calls, {collective: staged calls}) of this process so far."""
    from torch_ring_backend import _C
    return _C.kernel_call_count(), dict(_C.staged_calls())


class PathCounter:
    """The calls a rank function made on each path between its creation and done()."""

    def __init__(self, dev):
        self.cuda = dev.type == "cuda"
        self.start = _path_counts()

    def done(self):
        if not self.cuda:
            return None
        kernel, staged = _path_counts()
        by = {k: v - self.start[1].get(k, 0) for k, v in staged.items()
              if v != self.start[1].get(k, 0)}
        return {"kernel": kernel - self.start[0], "staged": sum(by.values()), "staged_by": by}


def _random_floats(rank, count, dtype, seed):
    g = torch.Generator().manual_seed(seed * 7919 + rank * 31 + count)
    return torch.randn(count, generator=g, dtype=torch.float64).to(dtype)


def _check_against_cpu_ring(rep, label, gpu_result, cpu_inputs_op):
    """`cpu_inputs_op()` runs the same collective on the CPU ring and returns its result."""
    want = cpu_inputs_op()
    rep.check(f"{label}: the CPU ring's bits", gpu_result.cpu(), want)


# ---- rank functions (module level: spawned ranks import them by name) ------------------------------

def rank_all_reduce_sweep(large_bytes, device="cuda", counts=SMALL_COUNTS):
    rank, world, dev = _setup(device=device)
    paths = PathCounter(dev)
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
    # Random floats, whose sums depend on the order: the CPU ring's bits over the same inputs,
    # within rounding of a float64 sum, and the same bits on every rank.
    for dtype in (torch.float32, torch.float64, torch.bfloat16, torch.float16):
        for count in (1000, 1 * MiB + 1):
            mine = _random_floats(rank, count, dtype, seed=11)
            x = mine.to(dev, copy=True)
            dist.all_reduce(x)
            cpu = mine.clone()
            dist.all_reduce(cpu)  # the same group's CPU path
            rep.check(f"random {dtype} {count}: the CPU ring's bits", x.cpu(), cpu)
            exact = sum(_random_floats(r, count, dtype, seed=11).double() for r in range(world))
            rel = ((x.cpu().double() - exact).norm() / exact.norm()).item()
            tol = {torch.float64: 1e-14, torch.float32: 1e-6}.get(dtype, 1e-2)
            if not rel < tol:
                rep.failures.append(f"random {dtype} {count}: relative error {rel:.3g} vs float64")
            rep.digests[f"random {dtype} {count}"] = digest(x)
    _sync(dev)
    counted = paths.done()
    dist.destroy_process_group()
    return {**rep.as_dict(), "paths": counted, "staged_expected": 0}


def rank_other_collectives(device="cuda"):
    rank, world, dev = _setup(device=device)
    paths = PathCounter(dev)
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
    # Random floats through reduce_scatter: the CPU ring's bits over the same inputs.
    for dtype in (torch.float32, torch.bfloat16):
        mine = _random_floats(rank, world * 70001, dtype, seed=12)
        out = torch.empty(70001, dtype=dtype, device=dev)
        REDUCE_SCATTER_SINGLE(out, mine.to(dev, copy=True))
        cpu_out = torch.empty(70001, dtype=dtype)
        REDUCE_SCATTER_SINGLE(cpu_out, mine.clone())
        rep.check(f"reduce_scatter random {dtype}: the CPU ring's bits", out.cpu(), cpu_out)
    # broadcast from every root.
    for dtype in (torch.float32, torch.float16, torch.int64, torch.uint8, torch.bool):
        periods = [period_of(r, dtype, "PAYLOAD", seed=5) for r in range(world)]
        for root in range(world):
            for count in SMALL_COUNTS + (4 * MiB + 1,):
                x = tile(periods[rank], count, dev)
                dist.broadcast(x, src=root)
                rep.check(f"broadcast {dtype} root {root} count {count}", x,
                          tile(periods[root], count, dev))
    # A staged collective (list all_gather: the one staged call of this function) between
    # kernel collectives, then a barrier.
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
    counted = paths.done()
    dist.destroy_process_group()
    out = {**rep.as_dict(), "paths": counted, "staged_expected": 1}
    out["errors"] = errors
    return out


def rank_stream_order():
    """A slow producer kernel on a side stream writes the input right before all_reduce; the
    consumer reads the output after wait() on the same stream. Without the comm stream waiting
    on the producer, or the consumer waiting on the kernel, the values would be stale."""
    rank, world, dev = _setup()
    paths = PathCounter(dev)
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
    counted = paths.done()
    dist.destroy_process_group()
    return {"outcomes": outcomes, "paths": counted}


def rank_timeout(timeout_s):
    """Rank 0 runs an all_reduce that rank 1 skips: rank 0's work must fail with
    DistBackendError within the timeout plus slack, and its GPU must stay usable."""
    rank, world, dev = _setup(timeout_s)
    paths = PathCounter(dev)
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
        result["paths_before_next"] = paths.done()
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
    paths = PathCounter(dev)
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
    counted = paths.done()
    dist.destroy_process_group()
    return {"error": error, "elapsed": time.monotonic() - start, "paths": counted}


def rank_staged_over_tcp(device="cuda"):
    """TORCH_RING_TRANSPORT=tcp, as between hosts: CUDA tensors are staged through pinned host
    memory over the TCP links (no kernels), and the results are still exact."""
    os.environ["TORCH_RING_TRANSPORT"] = "tcp"
    rank, world, dev = _setup(device=device)
    paths = PathCounter(dev)
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
    counted = paths.done()
    dist.destroy_process_group()
    # Every call staged, none on the kernels: 4 collectives, and the send or the recv.
    return {**rep.as_dict(), "paths": counted, "staged_expected": 4 + (1 if rank < 2 else 0),
            "kernels_expected": 0}


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


def rank_ddp(reference):
    """DDP over "ring" and over `reference` ("gloo" or "nccl") from the same start: the
    largest parameter difference, and this rank's parameters' digest."""
    rank, world, dev = _setup()
    paths = PathCounter(dev)
    ring = _train_ddp(None, rank, dev)
    counted = paths.done()
    other = _train_ddp(dist.new_group(backend=reference), rank, dev)
    result = {"digest": digest(ring), "diff": (ring - other).abs().max().item(),
              "scale": ring.abs().max().item(), "paths": counted}
    dist.destroy_process_group()
    return result


def rank_against_nccl(reference="nccl", device="cuda"):
    """Each kernel collective on "ring" and on an nccl group over the same ranks and inputs:
    integers bitwise, random floats bitwise at world 2 for float32/float64 sums (two addends:
    the order cannot differ), and within rounding otherwise. (reference="gloo", device="cpu":
    the same checks on the CPU, for this function's own logic.)"""
    rank, world, dev = _setup(device=device)
    nccl = dist.new_group(backend=reference)
    paths = PathCounter(dev)
    rep = Report()
    ring_calls = 0

    def both(label, make, call, exact):
        nonlocal ring_calls
        a, b = make(), make()
        call(a, None)
        call(b, nccl)
        ring_calls += 1
        got, want = a[-1] if isinstance(a, tuple) else a, b[-1] if isinstance(b, tuple) else b
        if exact:
            rep.check(f"{label}: nccl's bits", got, want)
        else:
            rel = ((got.double() - want.double()).norm() / max(want.double().norm().item(), 1e-30))
            if not rel.item() < 1e-2:
                rep.failures.append(f"{label}: relative difference {rel.item():.3g} from nccl")

    n = 1 * MiB + 5
    for dtype in (torch.int32, torch.int64, torch.float32, torch.float64, torch.bfloat16,
                  torch.float16):
        exactly = dtype in (torch.int32, torch.int64) or (
            world == 2 and dtype in (torch.float32, torch.float64))
        if dtype.is_floating_point:
            mine = lambda: _random_floats(rank, n, dtype, seed=21).to(dev)  # noqa: E731
        else:
            mine = lambda: tile(period_of(rank, dtype, "SUM", seed=21), n, dev)  # noqa: E731
        both(f"all_reduce SUM {dtype}", mine, lambda x, g: dist.all_reduce(x, group=g), exactly)
        both(f"all_reduce MAX {dtype}", mine,
             lambda x, g: dist.all_reduce(x, op=dist.ReduceOp.MAX, group=g), True)
        per = n // world
        both(f"reduce_scatter {dtype}",
             lambda: (mine()[: per * world].contiguous(), torch.empty(per, dtype=dtype, device=dev)),
             lambda xy, g: REDUCE_SCATTER_SINGLE(xy[1], xy[0], group=g), exactly)
        both(f"all_gather {dtype}",
             lambda: (mine(), torch.empty(world * n, dtype=dtype, device=dev)),
             lambda xy, g: ALL_GATHER_SINGLE(xy[1], xy[0], group=g), True)
        both(f"broadcast {dtype}", mine,
             lambda x, g: dist.broadcast(x, src=world - 1, group=g), True)
    _sync(dev)
    counted = paths.done()
    dist.destroy_process_group()
    return {**rep.as_dict(), "paths": counted, "staged_expected": 0,
            "kernels_expected": ring_calls}


def rank_sync_batch_norm():
    rank, world, dev = _setup()
    paths = PathCounter(dev)
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
        "paths": paths.done(),
    }
    dist.destroy_process_group()
    return result


# ---- tests -----------------------------------------------------------------------------------------

def _assert_paths(res, staged=0, kernels_at_least=1, kernels=None):
    """The calls of one rank ran where the test meant them to: `staged` calls through host
    memory (None: any number, but none of a kernel collective), the rest as ring kernels."""
    counted = res["paths"]
    if counted is None:  # the CPU run of the rank functions (run_on_cpu)
        return
    kernel_staged = {k: v for k, v in counted["staged_by"].items() if k in KERNEL_COLLECTIVES}
    if staged is None:
        assert not kernel_staged, f"kernel collectives were staged: {counted}"
    else:
        assert counted["staged"] == staged, (
            f"{counted['staged']} CUDA calls were staged through host memory, {staged} expected: "
            f"the kernel path was declined or skipped ({counted}); TORCH_RING_DEBUG=INFO logs why")
    if kernels is not None:
        assert counted["kernel"] == kernels, counted
    else:
        assert counted["kernel"] >= kernels_at_least, f"no ring kernel ran: {counted}"


def _no_failures(results):
    failures = [f"rank {r}: {f}" for r, res in enumerate(results) for f in res["failures"]]
    assert not failures, "\n".join(failures[:40])
    assert all(res["checked"] > 0 for res in results), "nothing was checked"
    for res in results:
        _assert_paths(res, staged=res["staged_expected"],
                      kernels=res.get("kernels_expected"),
                      kernels_at_least=0 if res.get("kernels_expected") == 0 else 1)
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

    before = _path_counts()
    counts = (0, 1, 4099, 1 * MiB + 3)
    # torch loads its own kernels lazily, and the first launch of one can synchronise the
    # context, which never goes idle while a rank's ring kernel spins waiting for the other
    # rank: every torch kernel the rank threads use runs once here first (only the ring
    # kernels are preloaded by the backend).
    for count in counts:
        warm = torch.full((count,), 1.0, device="cuda:0")
        bool((warm == 3.0).all())
    torch.cuda.synchronize()
    # Both ranks have enqueued their kernel before either makes its stream wait or runs the
    # next torch kernel, so neither's queue can hold the other's kernel back.
    enqueued = threading.Barrier(world, timeout=60)

    def rank_body(rank):
        try:
            torch.cuda.set_device(0)
            backends[rank] = _C.RingBackend(dist.PrefixStore("threads", store), rank, world,
                                            datetime.timedelta(seconds=60), "threads")
            outs = []
            # Each rank thread on its own stream: on one shared (default) stream, rank 0's
            # wait() would queue rank 1's next kernel behind kernel 0, which waits for it.
            with torch.cuda.stream(torch.cuda.Stream()):
                for count in counts:
                    x = torch.full((count,), float(rank + 1), device="cuda:0")
                    work = backends[rank].allreduce([x], dist.AllreduceOptions())
                    enqueued.wait()
                    work.wait()
                    outs.append(bool((x == sum(range(1, world + 1))).all()))
                torch.cuda.current_stream().synchronize()
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
    after = _path_counts()
    assert after[1] == before[1], f"a thread's all_reduce was staged: {before} -> {after}"
    assert after[0] - before[0] == world * 4, (before, after)
    # Together: closing is collective (each backend waits, through the store, for the other to
    # have unmapped its inbox), so shutting them down one after the other makes the first wait
    # out the whole close wait and then keep its inbox.
    started = time.monotonic()
    closers = [threading.Thread(target=b.shutdown) for b in backends]
    for t in closers:
        t.start()
    for t in closers:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in closers), "a backend's shutdown hung"
    assert time.monotonic() - started < 10, "the two backends did not close together"


def test_stream_order():
    for res in run_on_local_ranks(rank_stream_order, 2, timeout_s=300):
        assert all(ok for pair in res["outcomes"] for ok in pair), res
        _assert_paths(res, staged=0, kernels=6)


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
    # The collective that timed out was a kernel (the first all_reduce, then the skipped one).
    _assert_paths({"paths": r0["paths_before_next"]}, staged=0, kernels=2)
    assert r0["next"] and r0["next"][0] == "DistBackendError", r0
    assert r1["next"] and r1["next"][0] == "DistBackendError", r1


def test_size_mismatch_is_an_error_on_every_rank():
    results = run_on_local_ranks(rank_mismatch, 2, timeout_s=300)
    for res in results:
        assert res["error"] and res["error"][0] == "DistBackendError", res
        assert res["elapsed"] < 30, res
        _assert_paths(res, staged=0, kernels=2)  # the mismatch was found by the kernels
    assert any("mismatch" in res["error"][1] for res in results), results


def test_cuda_tensors_over_tcp_are_staged_and_exact():
    results = run_on_local_ranks(rank_staged_over_tcp, 2, timeout_s=300)
    _no_failures(results)  # counts: every call staged, none on the kernels


def test_sync_batch_norm_matches_one_batch_norm():
    for res in run_on_local_ranks(rank_sync_batch_norm, 2, timeout_s=300):
        assert res["out"] < 1e-4 and res["grad"] < 1e-4 and res["running_mean"] < 1e-5, res
        _assert_paths(res, staged=0)  # all_gather_into_tensor and all_reduce: kernels


def _nccl_two_ranks_on_one_gpu():
    """"" if nccl can run 2 ranks on this one GPU (NCCL 2.30 or newer, with
    NCCL_MULTI_RANK_GPU_ENABLE=1), else why not."""
    if not dist.is_nccl_available():
        return "this torch has no NCCL"
    try:
        version = torch.cuda.nccl.version()
    except Exception as e:  # noqa: BLE001
        return f"torch.cuda.nccl.version() failed: {e}"
    if tuple(version[:2]) < (2, 30):
        return (f"NCCL {'.'.join(map(str, version))} refuses two ranks on one GPU "
                f"('Duplicate GPU detected'); NCCL 2.30+ allows it with "
                f"NCCL_MULTI_RANK_GPU_ENABLE=1")
    return ""


NCCL_ENV = {"NCCL_MULTI_RANK_GPU_ENABLE": "1"}


def test_ddp_two_ranks_on_one_gpu_against_gloo():
    results = run_on_local_ranks(rank_ddp, 2, "gloo", timeout_s=300)
    assert results[0]["digest"] == results[1]["digest"], "ranks' parameters differ"
    for res in results:
        # Relative to the parameters: DDP over gloo reduces in another order.
        assert res["diff"] <= 1e-5 * max(res["scale"], 1.0), res
        # DDP checks parameter shapes with a list all_gather (staged); its gradient buckets
        # and buffer broadcasts must run as kernels.
        _assert_paths(res, staged=None)


def test_ddp_two_ranks_on_one_gpu_against_nccl():
    why = _nccl_two_ranks_on_one_gpu()
    if why:
        pytest.skip(why)
    results = run_on_local_ranks(rank_ddp, 2, "nccl", timeout_s=300, env=NCCL_ENV)
    for res in results:
        assert res["diff"] <= 1e-5 * max(res["scale"], 1.0), res
        _assert_paths(res, staged=None)


def test_each_kernel_collective_against_nccl():
    why = _nccl_two_ranks_on_one_gpu()
    if why:
        pytest.skip(why)
    _no_failures(run_on_local_ranks(rank_against_nccl, 2, timeout_s=300, env=NCCL_ENV))


# Three and four processes time-slice one GPU (without MPS their kernels never run at once):
# slower, so they come last, with fewer sizes per (dtype, op) pair.
@pytest.mark.parametrize("world", [3, 4])
def test_all_reduce_every_op_and_dtype_bitwise_more_ranks(world):
    _no_failures(run_on_local_ranks(rank_all_reduce_sweep, world, LARGE_BYTES[:2] + (64 * MiB,),
                                    "cuda", (0, 1, 4099, 65536 + 3), timeout_s=600))


def test_other_collectives_three_ranks():
    _check_other_collectives(run_on_local_ranks(rank_other_collectives, 3, timeout_s=600))


def run_on_cpu(world=2):
    """The rank functions on the CPU path: a check of this file's reference logic without a GPU
    (tests/python/test_cuda_logic_on_cpu.py runs it in CI)."""
    sweep = run_on_local_ranks(rank_all_reduce_sweep, world, (1 * MiB + 12,), "cpu",
                               timeout_s=900)
    _no_failures(sweep)
    others = run_on_local_ranks(rank_other_collectives, world, "cpu", timeout_s=900)
    _no_failures(others)
    against = run_on_local_ranks(rank_against_nccl, world, "gloo", "cpu", timeout_s=900)
    _no_failures(against)
    return {"checked": [r["checked"] for r in sweep + others + against],
            "digests": len(sweep[0]["digests"]), "errors": [o["errors"] for o in others]}


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(pytest.main([os.path.abspath(__file__), "-v"]))
