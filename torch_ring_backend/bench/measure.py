"""Timing. measure() checks one call of a Case against its expected result, warms up, then
times back-to-back calls after a barrier and keeps the slowest rank's time; iterations_for
decides how many calls each size gets, sweep_sizes which sizes a sweep visits, and
_measure_sweep runs one backend over all of them. measure_copy_bandwidth measures this
machine's memory-copy roofline. CUDA work is synchronised before every clock reading."""
import ctypes
import functools
import math
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist

from .cases import COLLECTIVES, DTYPES, _count_wrong
from .options import BYTES_PER_MEASUREMENT, MiB, _human

ROOFLINE_BYTES = 256 * MiB
ROOFLINE_REPEATS = 5
# Busy copying before a backend's first measurement. On the VMs this was measured on, a freshly
# started process copies memory at a fraction of its speed for its first second or two (a 1 MiB
# broadcast: 455 us in the first second of a job, 121 in the second, 48 after), so whichever
# backend went first was measured slow; each rank (ring's and MPI's) warms up alike.
WARM_UP_SECONDS = 2.0
WARM_UP_BYTES = 16 * MiB


# ---- timing ------------------------------------------------------------------------------------

def _synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _barrier(group, device):
    """A tiny all_reduce on the measured group itself: every rank starts the timed calls
    together, on the same transport (and, on CUDA, the same stream) that is measured."""
    token = torch.zeros(1, device=device)
    dist.all_reduce(token, group=group)
    _synchronize(device)


def iterations_for(nbytes, iters, warmup):
    timed = min(iters, max(2, BYTES_PER_MEASUREMENT // nbytes))
    return timed, min(warmup, max(1, timed // 4))


@dataclass
class Measurement:
    seconds: float = None  # per call, slowest rank
    wrong: int = None      # summed over ranks
    error: str = None      # the backend refused this collective (e.g. an op it lacks)


def time_calls(call, timed, warmup, barrier, sync=lambda: None):
    """The timing rule every backend is measured by (the MPI ranks too): `warmup` untimed
    calls, a barrier so that every rank starts together, then `timed` back-to-back calls;
    seconds per call on this rank."""
    for _ in range(warmup):
        call()
    barrier()
    start = time.perf_counter()
    for _ in range(timed):
        call()
    sync()
    return (time.perf_counter() - start) / timed


def _call_and_barrier(name, case, group, ctx):
    """(call, barrier) of collective `name` on `group`: a torch process group (None: the default,
    ring's), or a reference outside torch.distributed that makes its own calls
    (deepspeed_reference.DeepSpeedShm), whose call_of raises ValueError for what it cannot do."""
    if hasattr(group, "call_of"):
        return group.call_of(name, case, ctx), group.barrier
    return (lambda: case.call(group)), (lambda: _barrier(group, ctx.device))


def measure(case, group, ctx, timed, warmup, may_refuse, name="all_reduce"):
    """Check one call against the expected result, warm up, then time `timed` calls."""
    case.prepare()
    try:
        call, barrier = _call_and_barrier(name, case, group, ctx)
        call()
        _synchronize(ctx.device)
    except Exception as e:  # noqa: BLE001 - validation errors are raised on every rank alike
        if not may_refuse:
            raise
        return Measurement(error=str(e).strip().splitlines()[0])
    wrong = _count_wrong(case.output, case.expected, ctx.op_name)
    seconds = time_calls(call, timed, warmup, barrier=barrier,
                         sync=lambda: _synchronize(ctx.device))
    return Measurement(seconds=_over_ranks(seconds, dist.ReduceOp.MAX),
                       wrong=int(_over_ranks(wrong, dist.ReduceOp.SUM)))


def _over_ranks(value, op):
    # Over the default (ring) group on CPU, outside the timed region.
    t = torch.tensor([value], dtype=torch.float64)
    dist.all_reduce(t, op=op)
    return t.item()


def measure_copy_bandwidth(device, nbytes=ROOFLINE_BYTES, repeats=ROOFLINE_REPEATS):
    """Bytes per second one process copies from one large buffer to another, best of `repeats`
    (the memory traffic is at least twice that: read + write), as {"torch": copy_'s,
    "memcpy": the C library's (CPU only)}. Both count because they differ: on some machines
    copy_ is well below memcpy, whose non-temporal stores skip reading the destination, and
    a roofline that a backend's memcpy-based transport can exceed would be no roofline."""
    src = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)  # first touch: page faults are not bandwidth
    rates = {"torch": nbytes / _best_seconds(lambda: dst.copy_(src), device, repeats)}
    if device.type == "cpu":
        copy = functools.partial(ctypes.memmove, dst.data_ptr(), src.data_ptr(), nbytes)
        rates["memcpy"] = nbytes / _best_seconds(copy, device, repeats)
    return rates


def warm_up(device, seconds=WARM_UP_SECONDS, nbytes=WARM_UP_BYTES):
    """Copies between two buffers for `seconds` (see WARM_UP_SECONDS)."""
    src = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        dst.copy_(src)
        src.copy_(dst)
    _synchronize(device)


def _best_seconds(fn, device, repeats):
    best = math.inf
    for _ in range(repeats):
        _synchronize(device)
        start = time.perf_counter()
        fn()
        _synchronize(device)
        best = min(best, time.perf_counter() - start)
    return best


# ---- the sizes of a sweep, and one backend's sweep over them -----------------------------------

def sweep_sizes(cfg, collective, world):
    """(bytes, count) per size: doubling, the count rounded down to a multiple of the world size
    where the collective splits the array; sizes that round to nothing are left out."""
    elem = DTYPES[cfg.dtype].itemsize
    size = cfg.min_bytes
    while size <= cfg.max_bytes:
        count = size // elem
        if COLLECTIVES[collective].splits:
            count -= count % world
        if count > 0:
            yield count * elem, count
        size *= 2


def _measure_sweep(name, plan, group, backend, ctx, table):
    """Yields a Measurement per size of `plan`, each measured when asked for. A backend that
    refuses the collective (the reference may lack an op or a dtype) is asked once: its refusal
    stands for the remaining sizes."""
    build = COLLECTIVES[name].build
    _settle(group, ctx.device)
    for i, (nbytes, count, timed, warmup) in enumerate(plan, 1):
        table.progress(f"{name} {_human(nbytes)} {backend} ({i}/{len(plan)})")
        case = build(ctx, count)
        m = measure(case, group, ctx, timed, warmup, may_refuse=group is not None, name=name)
        del case  # free this size's buffers before the next, larger one is allocated
        if m.error:  # this size and the rest are refused alike (as the MPI ranks report them)
            table.note(f"{backend} refused {name}: {m.error}; its columns stay empty")
            yield from [m] * (len(plan) - i + 1)
            return
        yield m


# Untimed small all_reduces before each backend's sweep of a collective (the MPI ranks make the
# same calls). Connection set-up (nccl's communicator) and the scheduler's first placement of
# the backend's threads must not be timed, and on this VM the first few hundred calls after
# the memory warm-up were now and then 4-5x slower (a 16-byte all_reduce: 25-28 us instead of
# 6 for about 250 calls; the small sizes are timed over 50 calls each, so a table's first rows
# showed it). nccl-tests warms up every size; this warms up each backend.
SETTLE_CALLS = 1000
SETTLE_ELEMENTS = 256  # 1 KiB of float32
# On CUDA the settling is the links' set-up and the first kernel launches, done in a few calls;
# and ranks that are processes of one GPU time-slice (no MPS), so every call can cost a whole
# time slice per hop: 1000 calls of 4 ranks took most of gpu_check.sh's 45 s for the sweep.
CUDA_SETTLE_CALLS = 20


def settle_calls(device):
    """Untimed calls before a sweep on `device`: scaled to what settling costs there."""
    return CUDA_SETTLE_CALLS if str(device).startswith("cuda") else SETTLE_CALLS


def _settle(group, device, calls=None):
    calls = settle_calls(device) if calls is None else calls
    if hasattr(group, "settle"):  # a reference outside torch.distributed settles itself
        group.settle(calls)
        return
    token = torch.zeros(SETTLE_ELEMENTS, device=device)
    for _ in range(calls):
        dist.all_reduce(token, group=group)
    _synchronize(device)
