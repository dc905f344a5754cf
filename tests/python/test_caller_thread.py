"""Small collectives on the caller's thread (csrc/backend/work_queue.h): a call of at most
TORCH_RING_INLINE_BYTES that every peer has already issued runs on the thread that calls it
and is complete when the call returns; a larger one, or one that some peer has not issued yet,
goes to the group's worker as before. Where each call ran is in the flight recorder ("thread").
And the reason for the "every peer has issued it" rule: ranks that issue the calls of two
groups in opposite orders still complete both, long before the group timeout. A call issued
once the previous call's Work has completed (here from a callback on its Future, which runs
while it completes) finds the group free: handing a call to the worker must not hand the
next one to it too."""
import time

import pytest
import torch
import torch.distributed as dist

import torch_ring_backend
from harness import WORLDS

INLINE_BYTES = 4 * 1024 * 1024  # the default of TORCH_RING_INLINE_BYTES
# Where a queued call runs: the worker, or the thread that waits for it if that thread comes
# first once the call ahead of it is done (test_a_queued_call_runs_on_the_thread_that_waits_for_it).
QUEUED = ("worker", "waiter")


def one_rank_at_a_time(ctx):
    """Ranks issue a small and a just-too-large all_reduce one after another, the last rank
    first: only rank 0, the last to issue, finds that every peer has issued them."""
    small = torch.full((16,), float(ctx.rank + 1))
    large = torch.full((INLINE_BYTES // 4 + 1,), float(ctx.rank + 1))
    out = {}
    for turn in reversed(range(ctx.world)):
        if ctx.rank == turn:
            w_small = dist.all_reduce(small, async_op=True)
            out["small_done_at_return"] = w_small.is_completed()
            w_large = dist.all_reduce(large, async_op=True)
        dist.barrier(group=ctx.gloo)
    w_small.wait()
    w_large.wait()
    entries = torch_ring_backend.flight_recorder()[-2:]
    out["threads"] = [e["thread"] for e in entries]
    out["collectives"] = [e["collective"] for e in entries]
    out["small"], out["large"] = small, large
    return out


@pytest.mark.parametrize("world", WORLDS)
def test_a_small_call_every_peer_has_issued_runs_on_the_callers_thread(pool, world):
    total = world * (world + 1) / 2
    for rank, r in enumerate(pool.run(one_rank_at_a_time)):
        assert r["collectives"] == ["all_reduce", "all_reduce"], r
        small_thread, large_thread = r["threads"]
        assert small_thread == ("caller" if rank == 0 else "worker"), f"rank {rank}: {r['threads']}"
        assert large_thread in QUEUED, f"rank {rank}: {r['threads']}"
        if rank == 0:
            assert r["small_done_at_return"], "ran on the caller's thread, so done at return"
        assert torch.equal(r["small"], torch.full((16,), total)), f"rank {rank}"
        assert torch.equal(r["large"], torch.full((INLINE_BYTES // 4 + 1,), total)), f"rank {rank}"


def barrier_one_rank_at_a_time(ctx):
    """Ranks enter a barrier one after another, the last rank first: the barrier is a call of
    no bytes, and only rank 0, the last to enter, finds that every peer has issued it."""
    for turn in reversed(range(ctx.world)):
        if ctx.rank == turn:
            work = dist.barrier(async_op=True)
            done_at_return = work.is_completed()
        dist.barrier(group=ctx.gloo)
    work.wait()
    entry = torch_ring_backend.flight_recorder()[-1]
    return {"collective": entry["collective"], "thread": entry["thread"],
            "done_at_return": done_at_return}


@pytest.mark.parametrize("world", WORLDS)
def test_a_barrier_every_peer_has_entered_runs_on_the_callers_thread(pool, world):
    for rank, r in enumerate(pool.run(barrier_one_rank_at_a_time)):
        assert r["collective"] == "barrier", r
        if rank == 0:
            assert r["thread"] == "caller", f"rank {rank}: {r}"
            assert r["done_at_return"], "ran on the caller's thread, so done at return"
        else:  # handed over; the worker or, if it had not taken it yet, the thread that waits
            assert r["thread"] in QUEUED, f"rank {rank}: {r}"


def all_gather_one_rank_at_a_time(ctx):
    """Ranks issue a small all_gather_into_tensor and a small list all_gather one after another,
    the last rank first. Each rank posts its part before it asks whether every peer has issued
    the call; the ranks that issue first hand the rest to the worker, which then only reads the
    peers' parts."""
    mine = torch.arange(5, dtype=torch.float32) + 100 * ctx.rank
    into = torch.full((5 * ctx.world,), -1.0)
    listed = [torch.full((5,), -1.0) for _ in range(ctx.world)]
    for turn in reversed(range(ctx.world)):
        if ctx.rank == turn:
            w_into = dist.all_gather_into_tensor(into, mine, async_op=True)
            w_list = dist.all_gather(listed, mine, async_op=True)
        dist.barrier(group=ctx.gloo)
    w_into.wait()
    w_list.wait()
    entries = torch_ring_backend.flight_recorder()[-2:]
    return {"threads": [e["thread"] for e in entries], "into": into, "listed": listed}


@pytest.mark.parametrize("world", WORLDS)
def test_a_small_all_gather_every_peer_has_issued_runs_on_the_callers_thread(pool, world):
    want = [torch.arange(5, dtype=torch.float32) + 100 * r for r in range(world)]
    for rank, r in enumerate(pool.run(all_gather_one_rank_at_a_time)):
        if rank == 0:
            assert r["threads"] == ["caller", "caller"], (rank, r["threads"])
        else:  # handed over: on the worker, or on the thread that waits if it is there first
            assert r["threads"][0] in QUEUED and r["threads"][1] in QUEUED, (rank, r["threads"])
        assert torch.equal(r["into"], torch.cat(want)), (rank, r["into"])
        for got, w in zip(r["listed"], want):
            assert torch.equal(got, w), (rank, r["listed"])


def opposite_orders(ctx):
    ranks = list(range(ctx.world))
    g1, g2 = dist.new_group(ranks, backend="ring"), dist.new_group(ranks, backend="ring")
    a = torch.full((8,), float(ctx.rank + 1))
    b = torch.full((8,), float(10 * (ctx.rank + 1)))
    start = time.monotonic()
    # Even ranks issue g1's call first, odd ranks g2's: a rank that ran its first call on its
    # own thread while a peer waits in the other group would deadlock until the timeout.
    order = [(g1, a), (g2, b)] if ctx.rank % 2 == 0 else [(g2, b), (g1, a)]
    works = [dist.all_reduce(t, group=g, async_op=True) for g, t in order]
    for w in works:
        w.wait()
    took = time.monotonic() - start
    dist.destroy_process_group(g1)
    dist.destroy_process_group(g2)
    return {"a": a, "b": b, "took": took}


@pytest.mark.parametrize("world", [2, 3, 4])
def test_groups_issued_in_opposite_orders_complete(pool, world):
    total = world * (world + 1) / 2
    for rank, r in enumerate(pool.run(opposite_orders)):
        assert torch.equal(r["a"], torch.full((8,), total)), f"rank {rank}"
        assert torch.equal(r["b"], torch.full((8,), 10 * total)), f"rank {rank}"
        assert r["took"] < 5.0, f"rank {rank} took {r['took']:.1f} s (the timeout is 30 s)"


def next_call_as_the_first_completes(ctx, first_elems):
    """Every rank but 0 issues two all_reduces back to back; then rank 0 issues the first, and
    the second from a callback on the first's Future (run by whichever thread completes the
    first Work, as it completes). Every peer has issued the second by then, so it may run on
    the thread that issues it: the first's is done with the group once its Work completes."""
    first = torch.full((first_elems,), float(ctx.rank + 1))
    second = torch.full((16,), float(10 * (ctx.rank + 1)))
    if ctx.rank != 0:
        works = [dist.all_reduce(first, async_op=True), dist.all_reduce(second, async_op=True)]
    dist.barrier(group=ctx.gloo)
    if ctx.rank == 0:
        chained = []
        w = dist.all_reduce(first, async_op=True)
        w.get_future().then(lambda _: chained.append(dist.all_reduce(second, async_op=True))).wait()
        works = [w, chained[0]]
    for w in works:
        w.wait()
    entries = torch_ring_backend.flight_recorder()[-2:]
    return {"threads": [e["thread"] for e in entries], "first": first, "second": second}


# 16 floats: rank 0's first call runs on its own thread (every peer has issued it); past
# TORCH_RING_INLINE_BYTES it runs on the worker, and the callback with it.
@pytest.mark.parametrize("first_elems", [16, INLINE_BYTES // 4 + 1], ids=["first_here", "first_on_worker"])
@pytest.mark.parametrize("world", [2, 3])
def test_a_call_issued_as_the_previous_completes_finds_the_group_free(pool, world, first_elems):
    total = world * (world + 1) / 2
    for rank, r in enumerate(pool.run(next_call_as_the_first_completes, first_elems)):
        # Ranks 1..: the first waited for rank 0 (or was too large), the second queued behind it.
        if rank == 0:
            want = ["caller" if first_elems == 16 else "worker", "caller"]
            assert r["threads"] == want, f"rank {rank}: {r['threads']}"
        else:
            # Both handed over, so each ran on the worker or on the thread that waited for it
            # (a CI run saw ['waiter', 'waiter'] on rank 2 of 3: its worker had not started the
            # first by the time its thread waited, three ranks and their workers on 2 cores).
            first_thread, second_thread = r["threads"]
            assert first_thread in QUEUED and second_thread in QUEUED, f"rank {rank}: {r['threads']}"
        assert torch.equal(r["first"], torch.full((first_elems,), total)), f"rank {rank}"
        assert torch.equal(r["second"], torch.full((16,), 10 * total)), f"rank {rank}"


def waited_for_while_the_worker_is_busy(ctx):
    """Rank 0 queues a second all_reduce behind a first that runs on the worker, and waits for
    the second while the worker is held up in a callback on the first's Future (it runs on the
    thread that completes the first). The second is next in line and the group is free, so the
    waiting thread runs it itself instead of sleeping until the worker is back."""
    import threading
    first = torch.full((INLINE_BYTES // 4 + 1,), float(ctx.rank + 1))  # always the worker's
    second = torch.full((16,), float(10 * (ctx.rank + 1)))
    out = {}
    if ctx.rank == 0:
        in_callback = threading.Event()

        def slow_callback(_):
            in_callback.set()
            time.sleep(CALLBACK_S)

        w_first = dist.all_reduce(first, async_op=True)
        chained = w_first.get_future().then(slow_callback)
        w_second = dist.all_reduce(second, async_op=True)  # queued: the first holds the group
    dist.barrier(group=ctx.gloo)  # only now do the peers issue theirs
    if ctx.rank == 0:
        assert in_callback.wait(timeout=30)
        start = time.monotonic()
        w_second.wait()
        out["second_took"] = time.monotonic() - start
        chained.wait()
    else:
        w_first = dist.all_reduce(first, async_op=True)
        w_second = dist.all_reduce(second, async_op=True)
        w_first.wait()
        w_second.wait()
    entries = torch_ring_backend.flight_recorder()[-2:]
    out["threads"] = [e["thread"] for e in entries]
    out["first"], out["second"] = first, second
    return out


CALLBACK_S = 2.0


@pytest.mark.parametrize("world", [2, 3])
def test_a_queued_call_runs_on_the_thread_that_waits_for_it(pool, world):
    total = world * (world + 1) / 2
    for rank, r in enumerate(pool.run(waited_for_while_the_worker_is_busy)):
        assert torch.equal(r["first"], torch.full((INLINE_BYTES // 4 + 1,), total)), f"rank {rank}"
        assert torch.equal(r["second"], torch.full((16,), 10 * total)), f"rank {rank}"
        if rank == 0:
            assert r["threads"] == ["worker", "waiter"], r["threads"]
            # Not after the callback: the worker is in it for CALLBACK_S.
            assert r["second_took"] < CALLBACK_S / 2, r["second_took"]


def timed_wait_while_the_worker_is_busy(ctx):
    """As waited_for_while_the_worker_is_busy, but rank 0 first waits for the second call with a
    timeout of its own (WAIT_S): torch's Work.wait(timeout) raises once that has passed with
    the call not complete (c10d::Work::wait: "Operation timed out!"). So the waiting thread must
    not run the call, which could take up to the group's timeout: it waits WAIT_S and raises,
    and a wait without a timeout then runs the call as before."""
    import datetime
    import threading
    first = torch.full((INLINE_BYTES // 4 + 1,), float(ctx.rank + 1))  # always the worker's
    second = torch.full((16,), float(10 * (ctx.rank + 1)))
    out = {}
    if ctx.rank == 0:
        in_callback = threading.Event()

        def slow_callback(_):
            in_callback.set()
            time.sleep(CALLBACK_S)

        w_first = dist.all_reduce(first, async_op=True)
        chained = w_first.get_future().then(slow_callback)
        w_second = dist.all_reduce(second, async_op=True)  # queued: the first holds the group
    dist.barrier(group=ctx.gloo)  # only now do the peers issue theirs
    if ctx.rank == 0:
        assert in_callback.wait(timeout=30)
        start = time.monotonic()
        try:
            w_second.wait(timeout=datetime.timedelta(seconds=WAIT_S))
            out["timed_wait"] = "returned"
        except RuntimeError as e:
            out["timed_wait"] = str(e)
        out["timed_wait_took"] = time.monotonic() - start
        w_second.wait()
        chained.wait()
    else:
        w_first = dist.all_reduce(first, async_op=True)
        w_second = dist.all_reduce(second, async_op=True)
        w_first.wait()
        w_second.wait()
    out["threads"] = [e["thread"] for e in torch_ring_backend.flight_recorder()[-2:]]
    out["first"], out["second"] = first, second
    return out


WAIT_S = 0.3


@pytest.mark.parametrize("world", [2])
def test_a_wait_with_its_own_timeout_does_not_run_the_call(pool, world):
    total = world * (world + 1) / 2
    for rank, r in enumerate(pool.run(timed_wait_while_the_worker_is_busy)):
        assert torch.equal(r["first"], torch.full((INLINE_BYTES // 4 + 1,), total)), f"rank {rank}"
        assert torch.equal(r["second"], torch.full((16,), 10 * total)), f"rank {rank}"
        if rank == 0:
            assert "timed out" in r["timed_wait"], r
            # Its own timeout, not the worker's callback (CALLBACK_S) nor the group's.
            assert WAIT_S <= r["timed_wait_took"] < CALLBACK_S / 2, r
            assert r["threads"][0] == "worker" and r["threads"][1] in QUEUED, r["threads"]


def callback_waits_for_the_next_call(ctx):
    """Rank 0 waits, inside a callback on one call's Future, for the call queued behind it.
    The callback runs on the worker as the first call completes, so the worker cannot take
    the second itself; the waiting callback runs it (it is next in line and the group is
    free), instead of waiting for a worker that is the thread it runs on."""
    first = torch.full((INLINE_BYTES // 4 + 1,), float(ctx.rank + 1))  # always the worker's
    second = torch.full((16,), float(10 * (ctx.rank + 1)))
    out = {}
    if ctx.rank == 0:
        queued = []

        def wait_for_the_second(_):
            queued[0].wait()
            return queued[0].is_completed()

        w_first = dist.all_reduce(first, async_op=True)
        chained = w_first.get_future().then(wait_for_the_second)
        queued.append(dist.all_reduce(second, async_op=True))
    dist.barrier(group=ctx.gloo)  # only now do the peers issue theirs
    if ctx.rank == 0:
        out["second_done_in_callback"] = chained.wait()
    else:
        works = [dist.all_reduce(first, async_op=True), dist.all_reduce(second, async_op=True)]
        for w in works:
            w.wait()
    out["threads"] = [e["thread"] for e in torch_ring_backend.flight_recorder()[-2:]]
    out["first"], out["second"] = first, second
    return out


@pytest.mark.parametrize("world", [2, 3])
def test_a_callback_that_waits_for_the_next_queued_call_runs_it(pool, world):
    total = world * (world + 1) / 2
    for rank, r in enumerate(pool.run(callback_waits_for_the_next_call)):
        assert torch.equal(r["first"], torch.full((INLINE_BYTES // 4 + 1,), total)), f"rank {rank}"
        assert torch.equal(r["second"], torch.full((16,), 10 * total)), f"rank {rank}"
        if rank == 0:
            assert r["second_done_in_callback"] is True, r
            assert r["threads"] == ["worker", "waiter"], r["threads"]
