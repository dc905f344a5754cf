"""Rank functions of test_cuda_emulated.py about order: what a CUDA collective's Work, Future and
streams promise (ProcessGroupNCCL's semantics: docs/conventions.md section 1), the order of a
group's CUDA calls among themselves, and graph capture. Module level, so that spawned ranks
import them by name. Every tensor is made on the CPU and copied over, every result read after
.cpu(): no torch kernel runs (the emulated runtime refuses them)."""
import os
import time

import torch
import torch.distributed as dist

from cuda_reference import join, on


def _mine(rank, n):
    return torch.full((n,), float(rank + 1))


def _sum_of_mine(world, n):
    return torch.full((n,), float(sum(range(1, world + 1))))


def rank_async_wait(delay_s):
    """An async all_reduce whose kernel starts `delay_s` late (CUDA_EMULATOR_LAUNCH_DELAY_MS):
    issuing and wait() return at once, and later work on the caller's stream sees the result;
    the same through the Future on a side stream."""
    rank, world, dev = join()
    n = 1 << 16
    x = on(dev, _mine(rank, n))
    start = time.monotonic()
    work = dist.all_reduce(x, async_op=True)
    issued_s = time.monotonic() - start
    completed_at_once = work.is_completed()
    start = time.monotonic()
    work.wait()
    wait_s = time.monotonic() - start
    got = x.cpu()  # a copy on the caller's (default) stream: wait() made it wait for the kernel
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        y = on(dev, _mine(rank, n))
        value = dist.all_reduce(y, async_op=True).get_future().wait()[0]
        got_future = value.cpu()  # on the side stream, which the Future's wait ordered
    torch.cuda.synchronize()
    want = _sum_of_mine(world, n)
    result = {"issued_s": issued_s, "wait_s": wait_s, "completed_at_once": completed_at_once,
              "wait_ok": torch.equal(got, want), "future_ok": torch.equal(got_future, want),
              "finally_completed": work.is_completed()}
    dist.destroy_process_group()
    return result


def rank_freed_input(delay_s):
    """Rank 0 drops a pending (late) all_reduce's Work and input, and writes a new tensor of its
    size at once: the caching allocator may not hand it the input's memory while the comm stream
    still reads it, so every rank's sum, and rank 0's new tensor, are intact."""
    rank, world, dev = join()
    n = 1 << 18
    x = on(dev, _mine(rank, n))
    work = dist.all_reduce(x, async_op=True)
    fresh_ok = None
    if rank == 0:
        del work, x  # nothing of the caller's holds the input any more
        fresh = torch.empty(n, device=dev)
        fresh.copy_(torch.full((n,), 100.0))  # the caller's stream, not ordered after the kernel
        torch.cuda.synchronize()  # the device's every stream, the kernel's included
        fresh_ok = torch.equal(fresh.cpu(), torch.full((n,), 100.0))
        result = None
    else:
        work.wait()
        result = torch.equal(x.cpu(), _sum_of_mine(world, n))
    dist.destroy_process_group()
    return {"sum_ok": result, "fresh_ok": fresh_ok}


def rank_tensor_outlives_group():
    """CUDA tensors used by a kernel collective and a staged one are freed after
    destroy_process_group: the caching allocator then records events on the streams the
    backend used, which must still exist (the process used to abort here)."""
    rank, world, dev = join()
    x = on(dev, _mine(rank, 4099))
    dist.all_reduce(x)
    y = on(dev, _mine(rank, 333))
    dist.reduce(y, dst=0)
    torch.cuda.synchronize()
    dist.destroy_process_group()
    ok = torch.equal(x.cpu(), _sum_of_mine(world, 4099))
    del x, y
    torch.cuda.empty_cache()
    return {"ok": ok}


def rank_staged_after_kernel():
    """all_reduce(x, async) on the ring kernel, whose kernel starts late
    (CUDA_EMULATOR_LAUNCH_DELAY_MS), then reduce(x), staged through host memory: the staged
    call must copy x in after the kernel wrote it."""
    rank, world, dev = join()
    n = 4096
    x = on(dev, _mine(rank, n))
    dist.all_reduce(x, async_op=True)
    dist.reduce(x, dst=0)
    total = _sum_of_mine(world, n)
    got = x.cpu()
    dist.destroy_process_group()
    return {"ok": torch.equal(got, total * world if rank == 0 else total),
            "got": got[:3].tolist()}


def _exchange_rows(rank, world, n):
    """Rank `rank`'s all_to_all input: row j (for rank j) is j's base row plus 1000 x rank."""
    return torch.arange(world * n, dtype=torch.float32).reshape(world, n) + 1000 * rank


def _exchanged(me, world, n):
    """What all_to_all_single gives rank `me`: every rank's row for it, in rank order."""
    return torch.cat([_exchange_rows(r, world, n)[me] for r in range(world)])


def rank_later_calls_after_staged():
    """A staged collective issued async (all_to_all_single), its copies slowed
    (CUDA_EMULATOR_DELAY_MS), then a call that reads its output: a ring kernel (all_reduce)
    and another staged call (a list all_gather). Each must see the output once it landed."""
    rank, world, dev = join()
    n = 1024
    failures = []
    out = torch.empty(world * n, device=dev)
    dist.all_to_all_single(out, on(dev, _exchange_rows(rank, world, n).reshape(-1)),
                           async_op=True)
    dist.all_reduce(out)
    if not torch.equal(out.cpu(), sum(_exchanged(me, world, n) for me in range(world))):
        failures.append("all_reduce after all_to_all_single reduced something else than the "
                        "all_to_all's output")
    out2 = torch.empty(world * n, device=dev)
    dist.all_to_all_single(out2, on(dev, _exchange_rows(rank, world, n).reshape(-1)),
                           async_op=True)
    gathered = [torch.empty(world * n, device=dev) for _ in range(world)]
    dist.all_gather(gathered, out2)
    for r in range(world):
        if not torch.equal(gathered[r].cpu(), _exchanged(r, world, n)):
            failures.append(f"all_gather after all_to_all_single: block {r} is not rank {r}'s "
                            f"all_to_all output")
    dist.destroy_process_group()
    return {"failures": failures}


# What _exception_text says where torch cannot hand Work.exception() to Python.
EXCEPTION_NOT_BOUND = "not bound in this torch"


def _exception_text(work):
    """Work.exception() as "Type: text", or None. torch 2.11's binding cannot return it at all
    (pybind11 has no conversion for std::exception_ptr: TypeError, on gloo's Works too);
    there this says EXCEPTION_NOT_BOUND and the caller checks what else it can."""
    try:
        exc = work.exception()
    except TypeError as e:
        if "exception_ptr" in str(e):
            return EXCEPTION_NOT_BOUND
        raise
    return None if exc is None else f"{type(exc).__name__}: {exc}"


def rank_capture_while_collective_pending():
    """Rank 0 captures a CUDA graph (torch.cuda.CUDAGraph, CUDA's default global mode) on a
    side stream while its all_reduce waits for rank 1, which comes a second later: the
    backend's watchdog polls the pending kernel meanwhile, and must neither break the capture
    nor take it for a failed kernel."""
    rank, world, dev = join()
    x = on(dev, _mine(rank, 1000))
    dist.all_reduce(x)  # sets up the CUDA path on both ranks first
    result = {"capture": None, "replay_ok": None}
    if rank == 0:
        work = dist.all_reduce(x, async_op=True)
        side = torch.cuda.Stream()
        src = on(dev, torch.arange(4096, dtype=torch.float32))
        dst = torch.empty_like(src)
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.stream(side):
                graph.capture_begin()
                dst.copy_(src)
                time.sleep(0.5)  # the watchdog polls the pending all_reduce
                graph.capture_end()
            graph.replay()
            torch.cuda.synchronize()
            result["capture"] = "ok"
            result["replay_ok"] = torch.equal(dst.cpu(), src.cpu())
        except Exception as e:  # noqa: BLE001
            result["capture"] = f"{type(e).__name__}: {e}"
        work.wait()
    else:
        time.sleep(1.5)
        dist.all_reduce(x)
    torch.cuda.synchronize()
    result["first_ok"] = torch.equal(x.cpu(), _sum_of_mine(world, 1000) * world)
    y = on(dev, _mine(rank, 10))
    try:
        dist.all_reduce(y)
        result["after_ok"] = torch.equal(y.cpu(), _sum_of_mine(world, 10))
    except Exception as e:  # noqa: BLE001
        result["after_ok"] = f"{type(e).__name__}: {e}"
    dist.destroy_process_group()
    return result


def rank_staged_call_under_capture():
    """Every rank calls a staged collective (reduce) while its stream is being captured: the
    call must be refused at once with a clear error, before any communication, leaving the
    capture and the group usable."""
    rank, world, dev = join()
    x = on(dev, _mine(rank, 100))
    side = torch.cuda.Stream()
    graph = torch.cuda.CUDAGraph()
    result = {}
    with torch.cuda.stream(side):
        graph.capture_begin()
        start = time.monotonic()
        try:
            dist.reduce(x, dst=0)
            result["reduce"] = None
        except Exception as e:  # noqa: BLE001
            result["reduce"] = f"{type(e).__name__}: {e}"
        result["refused_s"] = time.monotonic() - start
        try:
            graph.capture_end()
            result["capture"] = "ok"
        except Exception as e:  # noqa: BLE001
            result["capture"] = f"{type(e).__name__}: {e}"
    torch.cuda.synchronize()
    y = on(dev, _mine(rank, 10))
    try:
        dist.all_reduce(y)
        dist.reduce(y, dst=0)
        want = _sum_of_mine(world, 10) * (world if rank == 0 else 1)
        result["after_ok"] = torch.equal(y.cpu(), want)
    except Exception as e:  # noqa: BLE001
        result["after_ok"] = f"{type(e).__name__}: {e}"
    dist.destroy_process_group()
    return result


def rank_completion_hook():
    """A completion hook registered on the group runs for CUDA kernel collectives too, with
    their op type, once each."""
    rank, world, dev = join()
    seen = []
    group = dist.group.WORLD
    group._register_on_completion_hook(lambda info: seen.append(str(info.op_type)))
    x = on(dev, _mine(rank, 1000))
    for _ in range(3):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    deadline = time.monotonic() + 10
    while len(seen) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    import torch_ring_backend
    plans = [e["plan"] for e in torch_ring_backend.flight_recorder()[-3:]]
    dist.destroy_process_group()
    return {"seen": seen, "plans": plans}


def rank_completed_failure_raises(timeout_s):
    """torch's Work contract for a kernel collective that fails: wait() raises, and once
    is_completed() is True, exception() holds the failure. Rank 0's all_reduce, which rank 1
    skips, times out, while a completion hook that takes its time (a user's may: 6 s) still runs
    for the call before: the hook runs beside the group (ProcessGroupNCCL's hooks have a thread
    of their own), so it must hold up neither the watchdog's timeout nor the failure's report."""
    rank, world, dev = join(timeout_s=timeout_s)
    slow_hook = {"on": rank == 0, "returned_at": None}

    def hook(info):
        if slow_hook["on"]:
            time.sleep(6)
            slow_hook["returned_at"] = time.monotonic()

    dist.group.WORLD._register_on_completion_hook(hook)
    x = on(dev, _mine(rank, 1 << 12))
    dist.all_reduce(x)  # the CUDA set-up is collective: before the skip
    torch.cuda.synchronize()
    result = {"wait_error": None, "raised_after": None, "raised_before_hook_returned": None,
              "completed_without_exception": None, "exception": None}
    if rank == 0:
        start = time.monotonic()
        work = dist.all_reduce(x, async_op=True)
        result_future = work.get_future_result()  # asked before the outcome is known
        deadline = start + timeout_s + 30
        raised_at = None
        # wait() does not block for a kernel (NCCL's semantics): call it until it raises.
        while result["wait_error"] is None and time.monotonic() < deadline:
            try:
                work.wait()
                time.sleep(0.01)
            except Exception as e:  # noqa: BLE001
                raised_at = time.monotonic()
                result["wait_error"] = f"{type(e).__name__}: {e}"
        slow_hook["on"] = False
        returned = slow_hook["returned_at"]
        result["raised_after"] = None if raised_at is None else raised_at - start
        result["raised_before_hook_returned"] = raised_at is not None and (
            returned is None or raised_at < returned)
        completed = work.is_completed()
        exc = _exception_text(work)
        result["completed_without_exception"] = (
            None if exc == EXCEPTION_NOT_BOUND else completed and exc is None)
        while not work.is_completed() and time.monotonic() < deadline:
            time.sleep(0.005)
        result["exception"] = _exception_text(work)
        result["work_result"] = result_future.wait()
    else:
        time.sleep(timeout_s + 5)
    # torch waits for the pending completion hooks here; the failure was reported above.
    try:
        dist.destroy_process_group()
        result["destroy_error"] = None
    except Exception as e:  # noqa: BLE001
        result["destroy_error"] = f"{type(e).__name__}: {e}"
    return result


def rank_failure_reported(dump_prefix):
    """A kernel collective that fails (the ranks disagree on its size) is reported as any
    failure is: the backend's last error is set, and the flight recorder is dumped by itself
    (TORCH_FR_DUMP_TEMP_FILE)."""
    os.environ["TORCH_FR_DUMP_TEMP_FILE"] = dump_prefix
    rank, world, dev = join(timeout_s=30)
    x = on(dev, _mine(rank, 16))
    dist.all_reduce(x)
    y = on(dev, _mine(rank, 100 * (rank + 1)))
    work = dist.all_reduce(y, async_op=True)
    deadline = time.monotonic() + 20
    while not work.is_completed() and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        work.wait()  # raises the kernel's error once it is known (it does not block for it)
        torch.cuda.synchronize()
        error = None
    except Exception as e:  # noqa: BLE001
        error = f"{type(e).__name__}: {e}"
    backend = dist.group.WORLD._get_backend(dev)
    last_error = int(backend.get_error()) if hasattr(backend, "get_error") else None
    deadline = time.monotonic() + 10
    path = f"{dump_prefix}{rank}"
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.05)
    dist.destroy_process_group()
    return {"error": error, "last_error": last_error, "dumped": os.path.exists(path)}


def _duration(work):
    try:
        return work._get_duration(), None
    except RuntimeError as e:
        return None, str(e)


def rank_durations(delay_s):
    """Work._get_duration of CUDA calls, as ProcessGroupNCCL's: for a kernel collective, refused
    while collective timing is off, and refused before the kernel has ended; once timing is on
    (ProcessGroup._enable_collectives_timing()), the kernel's time between events recorded on
    the comm stream around it, which includes the `delay_s` the emulator holds the kernel back
    (CUDA_EMULATOR_LAUNCH_DELAY_MS). A call staged through host memory (reduce) tells its host
    part's time, which lies within the wall time from issue to its end."""
    rank, world, dev = join()
    x = on(dev, _mine(rank, 4096))
    untimed = dist.all_reduce(x, async_op=True)
    untimed.wait()
    torch.cuda.synchronize()
    _, untimed_error = _duration(untimed)
    dist.distributed_c10d._get_default_group()._enable_collectives_timing()
    timed = dist.all_reduce(x, async_op=True)
    early, early_error = _duration(timed)  # the kernel starts delay_s late: not ended yet
    timed.wait()
    torch.cuda.synchronize()
    kernel_ms, kernel_error = _duration(timed)
    start = time.monotonic()
    staged = dist.reduce(x, dst=0, async_op=True)
    staged.wait()
    torch.cuda.synchronize()
    wall_ms = (time.monotonic() - start) * 1000
    staged_ms, staged_error = _duration(staged)
    dist.destroy_process_group()
    return {"untimed_error": untimed_error, "early": early, "early_error": early_error,
            "kernel_ms": kernel_ms, "kernel_error": kernel_error, "staged_ms": staged_ms,
            "staged_error": staged_error, "wall_ms": wall_ms}
