"""Rank functions of test_torch_215_calls.py: torch 2.15's Backend calls that gloo and NCCL
answer (abort hooks, addEphemeralTimeout), each on "ring" beside the closed form of torch's
documented contract (torch/csrc/distributed/c10d/Backend.hpp). Module level: spawned ranks
import them by name."""
import datetime
import time

import torch
import torch.distributed as dist


def _join(timeout_s):
    dist.init_process_group("ring", timeout=datetime.timedelta(seconds=timeout_s))
    return dist.get_rank(), dist.get_world_size()


def _backend():
    return dist.group.WORLD._get_backend(torch.device("cpu"))


def rank_abort_hooks_run_on_abort():
    """Two hooks registered, one unregistered again; abort() runs the other, once."""
    rank, _ = _join(30)
    ran = []
    backend = _backend()
    supported = backend.supports_abort_hooks  # a property in torch 2.15's binding
    backend.register_abort_hook(7, lambda: ran.append(7))
    backend.register_abort_hook(8, lambda: ran.append(8))
    backend.unregister_abort_hook(8)
    dist.all_reduce(torch.ones(4))
    backend.abort()
    backend.abort()  # a second abort runs nothing more
    return {"supported": supported, "ran": ran}


def rank_abort_hooks_run_when_a_call_fails(timeout_s):
    """Rank 1 never joins the second all_reduce: rank 0's times out, which breaks the group and
    runs its abort hook, before the error reaches the caller."""
    rank, _ = _join(timeout_s)
    ran = []
    _backend().register_abort_hook(1, lambda: ran.append(time.monotonic()))
    dist.all_reduce(torch.ones(4))
    error = None
    if rank == 0:
        try:
            dist.all_reduce(torch.ones(4))
        except Exception as e:  # noqa: BLE001
            error = f"{type(e).__name__}: {e}"
    else:
        time.sleep(timeout_s + 3)
    return {"ran": len(ran), "error": error}


def rank_ephemeral_timeout(timeout_s, late_s, extra_s):
    """Group timeout `timeout_s`; rank 1 comes `late_s` late to each of three all_reduces.
    First, with an extension of `extra_s` added just before: succeeds (timeout + extra >
    late). Second, the extension has expired with the first call: times out. Backend.hpp: the
    extension "remains active for all later work until the first work created after this call
    completes"."""
    rank, _ = _join(timeout_s)
    dist.all_reduce(torch.ones(4))
    outcomes = []
    _backend()._add_ephemeral_timeout(datetime.timedelta(seconds=extra_s))
    for _ in range(2):
        if rank == 1:
            time.sleep(late_s)
        start = time.monotonic()
        try:
            x = torch.ones(4)
            dist.all_reduce(x)
            outcomes.append(("ok", round(time.monotonic() - start, 2), float(x[0])))
        except Exception as e:  # noqa: BLE001
            outcomes.append((type(e).__name__, round(time.monotonic() - start, 2), str(e)[:200]))
            if rank == 0:
                break
    return {"outcomes": outcomes}


def rank_completion_hooks():
    """Backend.hpp's CompletionHook contract: fired once per Work that completed successfully,
    with the key that Work answers to getCompletionKey; never for a failed one; nothing after
    the hook is unregistered. Calls of every route a CPU group has: collectives run by the
    worker or the caller, point-to-point, a coalesced block (torch folds its all_reduces into one held call, run by the block's task)."""
    from torch_ring_backend import _C

    rank, world = _join(2)
    backend = _backend()
    supported = backend._supports_completion_hooks()
    backend._record_completions(11)
    works = [dist.all_reduce(torch.ones(n), async_op=True) for n in (4, 1000, 300000)]
    works.append(dist.all_gather_into_tensor(torch.empty(8), torch.ones(4), async_op=True))
    peer = 1 - rank
    works += [dist.isend(torch.ones(16), peer), dist.irecv(torch.empty(16), peer)]
    # A coalesced block: its calls' Works stay inside torch (Python gets IllegalWork), but
    # their hooks still fire; only their count is seen here.
    with dist._coalescing_manager(device=torch.device("cpu"), async_ops=True) as coalesced:
        for _ in range(2):
            dist.all_reduce(torch.ones(8), async_op=True)
    coalesced.wait()
    for w in works:
        w.wait()
    dist.barrier()  # every hook of the calls above has run (they run before their Works end)
    keys = [_C._completion_key(w) for w in works]
    heard = _C._heard_completions(11)
    heard_keys = [k for k, _ in heard]
    # Host collectives are timed; point-to-point and held calls report no duration.
    durations = {k: ms for k, ms in heard}
    timed = [durations.get(k) for k in keys[:4]]
    backend._unregister_completion_hook(11)
    dist.all_reduce(torch.ones(4))
    after_unregister = len(_C._heard_completions(11))
    # A failed call: rank 1 stays away, rank 0's all_reduce times out (2 s) and fires nothing.
    backend._record_completions(12)
    failed = None
    if rank == 0:
        work = dist.all_reduce(torch.ones(4), async_op=True)
        try:
            work.wait()
        except Exception as e:  # noqa: BLE001
            failed = type(e).__name__
        failed_key = _C._completion_key(work)
    else:
        time.sleep(4)
        failed_key = None
    return {"supported": supported, "keys": keys, "heard_keys": heard_keys, "timed": timed,
            "heard_before_unregister": len(heard), "heard_others": len(set(heard_keys) - set(keys)), "after_unregister": after_unregister,
            "failed": failed, "failed_key": failed_key,
            "heard_for_failed": [k for k, _ in _C._heard_completions(12)]}
