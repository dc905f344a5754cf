"""Rank functions of test_cuda_emulated.py about devices and failures: several GPUs per host
(which device is current where the runtime is called, GPUs hidden by CUDA_VISIBLE_DEVICES),
a peer that dies, abort, and shutting down after a peer's failure. Module level, so that
spawned ranks import them by name; no torch kernel runs (inputs are copies, results are read
after .cpu())."""
import json
import os
import threading
import time

import torch
import torch.distributed as dist

from cuda_reference import join, on


def _path_counts():
    from torch_ring_backend import _C
    return _C.kernel_call_count(), sum(dict(_C.staged_calls()).values())


def _contexts():
    """Which devices have a primary context in this process (the driver's view)."""
    return [d for d in range(torch.cuda.device_count()) if torch._C._cuda_hasPrimaryContext(d)]


def _on_a_new_thread(fn):
    """Runs fn on a thread of its own: one whose runtime device is 0, never chosen (the main
    thread's is cuda:1 once torch has used it: torch does not switch back to a device without a
    context), as a thread that waits for work or destroys the group may be."""
    errors = []

    def body():
        try:
            fn()
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    t = threading.Thread(target=body)
    t.start()
    t.join()
    if errors:
        raise errors[0]


def rank_on_the_second_gpu():
    """Every rank uses cuda:1 of two, without making it current (torch.cuda.set_device is
    never called): wait(), called on a thread whose current device is 0, must order cuda:1's
    current stream (not device 0's), the kernels start late (CUDA_EMULATOR_LAUNCH_DELAY_MS) so a
    wait on the wrong device shows as stale data, and nothing of the backend may create a
    context on cuda:0 (its threads, events, set-up and shutdown included, this last one on such
    a thread too)."""
    rank, world, dev = join(device=1, set_device=False)
    n = 1 << 14
    x = on(dev, torch.full((n,), float(rank + 1)))
    work = dist.all_reduce(x, async_op=True)
    _on_a_new_thread(work.wait)  # with cuda:0 current on that thread
    got = x.cpu()  # on cuda:1's current (default) stream: the legacy stream of cuda:1
    y = on(dev, torch.full((n,), float(rank + 1)))
    dist.reduce(y, dst=0)  # staged: the worker thread calls the runtime too
    got_reduce = y.cpu()
    torch.cuda.synchronize(dev)
    total = float(sum(range(1, world + 1)))
    result = {"wait_ok": torch.equal(got, torch.full((n,), total)),
              "reduce_ok": torch.equal(got_reduce, torch.full((n,), total if rank == 0 else
                                                             float(rank + 1))),
              "current": torch.cuda.current_device()}
    _on_a_new_thread(dist.destroy_process_group)
    del work, x, y
    import gc
    gc.collect()
    time.sleep(0.2)
    result["contexts"] = _contexts()
    result["paths"] = _path_counts()
    return result


def rank_wait_with_another_device_current():
    """A process that works on cuda:0 (current) and runs its group on cuda:1: wait() on a
    cuda:1 collective must order cuda:1's current stream, not the legacy stream of cuda:0 that
    the null handle of a default stream names while cuda:0 is current. The kernels start late
    (CUDA_EMULATOR_LAUNCH_DELAY_MS): a wait on the wrong device shows as stale data."""
    torch.cuda.set_device(0)
    on(torch.device("cuda", 0), torch.ones(4))  # cuda:0 in use: it has a context
    rank, world, dev = join(device=1, set_device=False)
    n = 1 << 14
    x = on(dev, torch.full((n,), float(rank + 1)))
    work = dist.all_reduce(x, async_op=True)
    work.wait()  # cuda:0 current
    got = x.cpu()  # on cuda:1's current (default) stream
    ok = torch.equal(got, torch.full((n,), float(sum(range(1, world + 1)))))
    torch.cuda.synchronize(dev)
    dist.destroy_process_group()
    return {"wait_ok": ok, "current": torch.cuda.current_device()}


def rank_one_gpu_each(visible_per_rank):
    """Rank r sees only the GPUs CUDA_VISIBLE_DEVICES gives it (`visible_per_rank`, the SLURM
    way: one each, so every rank's cuda:0 is another GPU), or, with it None, rank r uses cuda:r
    of all. Returns the all_reduce results and the calls that ran as kernels or were staged."""
    rank = int(os.environ["RANK"])
    if visible_per_rank is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = visible_per_rank[rank]
        device = 0
    else:
        device = rank
    rank, world, dev = join(device=device)
    x = on(dev, torch.full((4099,), float(rank + 1)))
    dist.all_reduce(x)
    b = on(dev, torch.full((333,), float(rank)))
    dist.broadcast(b, src=world - 1)
    torch.cuda.synchronize()
    total = float(sum(range(1, world + 1)))
    result = {"ok": torch.equal(x.cpu(), torch.full((4099,), total)) and
              torch.equal(b.cpu(), torch.full((333,), float(world - 1))),
              "paths": _path_counts(), "contexts": _contexts(), "device": device}
    dist.destroy_process_group()
    return result


def _joined_with_the_cuda_path(timeout_s):
    """Joins the group and runs one all_reduce, which sets the CUDA path up on every rank."""
    rank, world, dev = join(timeout_s=timeout_s)
    x = on(dev, torch.full((1000,), 1.0))
    dist.all_reduce(x)
    torch.cuda.synchronize()
    return rank, dev, x


def _error_of(call):
    """None, or the exception `call` raised, as "Type: text"."""
    try:
        call()
        return None
    except Exception as e:  # noqa: BLE001
        return f"{type(e).__name__}: {e}"


def rank_peer_killed(timeout_s, report_path):
    """Rank 1 dies (os._exit) while rank 0's all_reduce waits for it: rank 0's work must fail
    with a clear error long before the group's timeout. Rank 0 writes what it saw to
    `report_path` (the launcher gives no results once a rank died)."""
    rank, dev, x = _joined_with_the_cuda_path(timeout_s)
    if rank == 1:
        time.sleep(0.5)
        os._exit(0)
    start = time.monotonic()
    work = dist.all_reduce(x, async_op=True)
    while not work.is_completed() and time.monotonic() - start < timeout_s + 30:
        time.sleep(0.02)
    elapsed = time.monotonic() - start
    error = _error_of(lambda: (work.wait(), torch.cuda.synchronize()))
    with open(report_path, "w") as f:
        json.dump({"elapsed": elapsed, "error": error}, f)
    return {"elapsed": elapsed, "error": error}


def rank_abort_pending():
    """Rank 0 aborts its group while its all_reduce waits for rank 1 (which never issues it):
    the pending work fails at once naming the abort, and rank 1's next collective fails too."""
    rank, dev, x = _joined_with_the_cuda_path(120)
    result = {}
    if rank == 0:
        work = dist.all_reduce(x, async_op=True)
        time.sleep(0.3)
        start = time.monotonic()
        dist.group.WORLD._get_backend(dev).abort()
        while not work.is_completed() and time.monotonic() - start < 60:
            time.sleep(0.02)
        result["elapsed"] = time.monotonic() - start
        result["error"] = _error_of(work.wait)
    else:
        time.sleep(1.5)
        start = time.monotonic()
        result["error"] = _error_of(lambda: (dist.all_reduce(x), torch.cuda.synchronize()))
        result["elapsed"] = time.monotonic() - start
    return result


def rank_shutdown_after_peer_failure():
    """Rank 1 aborts its group with an all_reduce in flight (its kernel is stopped, its group
    broken); rank 0, with no kernel in flight, learns of it only when its next CUDA collective
    raises. Rank 0's destroy_process_group must then not wait for rank 1 to close the CUDA
    links with it (rank 1 never will): the group's timeout is a minute, the close wait half."""
    rank, dev, x = _joined_with_the_cuda_path(60)
    result = {}
    if rank == 1:
        work = dist.all_reduce(x, async_op=True)
        time.sleep(0.3)
        dist.group.WORLD._get_backend(dev).abort()
        while not work.is_completed():
            time.sleep(0.02)
        time.sleep(15)  # alive, but never closing the links: rank 0 must not wait for it
    else:
        time.sleep(1.5)
        result["error"] = _error_of(lambda: (dist.all_reduce(x), torch.cuda.synchronize()))
    start = time.monotonic()
    dist.destroy_process_group()
    result["destroy_s"] = time.monotonic() - start
    return result
