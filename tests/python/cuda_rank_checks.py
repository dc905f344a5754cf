"""The rank functions of the GPU tests (test_cuda.py), at module level so that spawned ranks
import them by name. Each joins the group (cuda_reference._setup), runs its collectives on CUDA
tensors (or on the CPU, device="cpu": run_on_cpu), and returns its Report with the calls it
made on each path."""
import os
import time

import torch
import torch.distributed as dist

from cuda_reference import (
    ALL_DTYPES, ALL_GATHER_SINGLE, REDUCE_SCATTER_SINGLE, SMALL_COUNTS, MiB, PathCounter, Report,
    _random_floats, _setup, _sync, device_usable, digest, expected_period, factor_for, on,
    ops_for, period_of, reduce_op, tile)



def _cpu_path_on_the_ring():
    """The CPU reference of the random-float checks is the CPU path's ring, whose order of
    additions the CUDA kernels follow; a small all_reduce would otherwise take one direct
    round, which adds in another order once three or more ranks contribute."""
    os.environ["TORCH_RING_DIRECT_BYTES"] = "0"


def rank_all_reduce_sweep(large_bytes, device="cuda", counts=SMALL_COUNTS):
    _cpu_path_on_the_ring()
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
    _cpu_path_on_the_ring()
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
            want = torch.cat([tile(p, count, "cpu") for p in periods])
            x = tile(periods[rank], count, dev)
            out = torch.empty(world * count, dtype=dtype, device=dev)
            ALL_GATHER_SINGLE(out, x)
            rep.check(f"all_gather {dtype} count {count}", out, want)
            out2 = on(dev, torch.zeros(world * count, dtype=dtype))
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
    x = on(dev, torch.full((1000,), rank + 1, dtype=torch.int32))
    outs = [torch.empty_like(x) for _ in range(world)]
    dist.all_gather(outs, x)
    for r in range(world):
        rep.check(f"list all_gather block {r}", outs[r],
                  torch.full((1000,), r + 1, dtype=torch.int32))
    y = on(dev, torch.ones(7))
    dist.all_reduce(y)
    dist.barrier()
    rep.check("all_reduce after staged", y, torch.full((7,), float(world)))
    # Bad input: clear errors before any communication, the group stays usable.
    errors = {}
    for label, call in {
        "mixed devices": lambda: ALL_GATHER_SINGLE(torch.empty(world * 4), on(dev, torch.ones(4))),
        "non-contiguous": lambda: dist.all_reduce(on(dev, torch.ones(4, 4)).t()),
    }.items():
        try:
            call()
            errors[label] = None
        except Exception as e:  # noqa: BLE001
            errors[label] = f"{type(e).__name__}: {e}"
    z = on(dev, torch.ones(3))
    dist.all_reduce(z)
    rep.check("all_reduce after bad input", z, torch.full((3,), float(world)))
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
    x = on(dev, torch.ones(1 << 16))
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
        result["gpu_usable"] = device_usable(dev)
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
    x = on(dev, torch.ones(16))
    dist.all_reduce(x)
    torch.cuda.synchronize()
    y = on(dev, torch.ones(100 * (rank + 1)))
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


def rank_staged_over_tcp(device="cuda", setting=("TORCH_RING_TRANSPORT", "tcp")):
    """TORCH_RING_TRANSPORT=tcp, as between hosts (or another `setting` that turns the kernels
    off, e.g. TORCH_RING_CUDA_KERNELS=0): CUDA tensors are staged through pinned host memory
    (no kernels), and the results are still exact."""
    os.environ[setting[0]] = setting[1]
    rank, world, dev = _setup(device=device)
    paths = PathCounter(dev)
    rep = Report()
    n = (1 << 20) + 3
    x = on(dev, torch.arange(n, dtype=torch.float32) % 251 + rank)
    dist.all_reduce(x)
    want = (torch.arange(n, dtype=torch.float32) % 251) * world + sum(range(world))
    rep.check("all_reduce", x, want)
    b = on(dev, torch.full((4099,), float(rank), dtype=torch.float64))
    dist.broadcast(b, src=world - 1)
    rep.check("broadcast", b, torch.full((4099,), float(world - 1), dtype=torch.float64))
    g = torch.empty(world * 1000, device=dev, dtype=torch.bfloat16)
    dist.all_gather_into_tensor(g, on(dev, torch.full((1000,), float(rank), dtype=torch.bfloat16)))
    rep.check("all_gather_into_tensor", g,
              torch.arange(world).repeat_interleave(1000).to(torch.bfloat16))
    out = torch.empty(777, device=dev, dtype=torch.int32)
    dist.reduce_scatter_tensor(out, on(dev, torch.ones(world * 777, dtype=torch.int32)))
    rep.check("reduce_scatter_tensor", out, torch.full((777,), world, dtype=torch.int32))
    p = on(dev, torch.full((12345,), float(rank + 1)))
    if rank == 0:
        dist.send(p, 1)
    elif rank == 1:
        dist.recv(p, 0)
        rep.check("recv", p, torch.ones(12345))
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
