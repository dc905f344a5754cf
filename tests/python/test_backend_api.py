"""The parts of torch's c10d Backend API that torch 2.14 builds features on, on "ring":
coalescing (torch's _coalescing_manager with a device, batch_isend_irecv), checked against gloo
in the same run and against the flight recorder (one task for the whole block)."""
import time

import pytest
import torch
import torch.distributed as dist
from torch.distributed.distributed_c10d import _coalescing_manager

import torch_ring_backend
from checks import Report, assert_reports_pass
from harness import WORLDS
from reference import exact_input, payload


def _last_seq():
    entries = torch_ring_backend.flight_recorder()
    return entries[-1]["seq"] if entries else -1


def _recorded_since(seq):
    """The (collective, detail) recorded after sequence `seq` (the recorder keeps the last 64)."""
    return [(e["collective"], e["detail"]) for e in torch_ring_backend.flight_recorder()
            if e["seq"] > seq]


def coalesced_all_reduces(ctx):
    """N all_reduces inside torch's coalescing manager (given a device, so the backend's
    start/endCoalescing run): the sums of gloo, and ONE fused task on the ring."""
    report = Report()
    me = ctx.rank
    sizes = [1, 7, 0, 1009, 3]
    # Sums exact in any order: equal to gloo's bit for bit.
    mine = [exact_input(me, n, torch.float32, "SUM", seed=i) for i, n in enumerate(sizes)]
    ring = [t.clone() for t in mine]
    before = _last_seq()
    with _coalescing_manager(device=torch.device("cpu")):
        for t in ring:
            dist.all_reduce(t)
    after = _recorded_since(before)
    gloo = [t.clone() for t in mine]
    for t in gloo:
        dist.all_reduce(t, group=ctx.gloo)
    for i, (got, want) in enumerate(zip(ring, gloo)):
        report.check(f"tensor {i} of the block", got, want)
    report.check("one task for the block", torch.tensor([c for c, _ in after] == ["coalesced"]),
                 torch.tensor(True), same_on_all_ranks=False)
    # torch's manager itself turns the block into one all_reduce_coalesced call: 5 tensors.
    report.check("the block's five tensors in that task",
                 torch.tensor(len(after) == 1 and "5 tensors" in after[0][1]),
                 torch.tensor(True), same_on_all_ranks=False)
    # The process group's own coalescing window (what the manager opens, and what C++ callers
    # use) hands the backend five separate all_reduces: README says they run as ONE ring pass.
    pg = dist.group.WORLD
    direct = [exact_input(me, n, torch.float32, "SUM", seed=20 + i) for i, n in enumerate(sizes)]
    before = _last_seq()
    pg._start_coalescing(torch.device("cpu"))
    for t in direct:
        dist.all_reduce(t)
    pg._end_coalescing(torch.device("cpu")).wait()
    after = _recorded_since(before)
    for i, (got, n) in enumerate(zip(direct, sizes)):
        want = exact_input(me, n, torch.float32, "SUM", seed=20 + i).clone()
        dist.all_reduce(want, group=ctx.gloo)
        report.check(f"tensor {i} of the window", got, want)
    report.check("the window's all_reduces fused into one pass",
                 torch.tensor(len(after) == 1 and after[0][1].startswith("5 all_reduces fused")),
                 torch.tensor(True), same_on_all_ranks=False)
    # async: the block's Work covers every call; a broadcast (not captured by torch) is held
    # by the backend and runs with the block too.
    b = payload(me, 33, torch.float64, seed=9)
    c = payload(me, 40, torch.float32, seed=10)
    with _coalescing_manager(device=torch.device("cpu"), async_ops=True) as cm:
        dist.broadcast(b, src=ctx.world - 1)
        dist.all_reduce(c, op=dist.ReduceOp.MAX)
    cm.wait()
    report.check("held broadcast", b, payload(ctx.world - 1, 33, torch.float64, seed=9))
    want_max = torch.stack([payload(r, 40, torch.float32, seed=10) for r in range(ctx.world)]).amax(0)
    report.check("held all_reduce MAX", c, want_max)
    # A barrier inside a block still holds every rank back until all have come, as outside
    # one: the last rank comes a second late, and the first waits for it.
    d = payload(me, 12, torch.float32, seed=11)
    with _coalescing_manager(device=torch.device("cpu")):
        dist.all_reduce(d)
        if me == ctx.world - 1:
            time.sleep(1.0)
        start = time.monotonic()
        dist.barrier()
        waited = time.monotonic() - start
    if ctx.world > 1 and me == 0 and waited < 0.5:
        report.failures.append(f"rank 0: a barrier inside a coalescing block returned after "
                               f"{waited:.3f} s, before the last rank came (1 s late)")
    want_sum = torch.stack([payload(r, 12, torch.float32, seed=11) for r in range(ctx.world)])
    report.check("an all_reduce beside the barrier", d, want_sum.sum(0))
    return report


def results_and_durations(ctx):
    """torch's Work.get_future_result() of a coalesced block (the first part's WorkResult that is
    not SUCCESS, else SUCCESS once every part is), and Work._get_duration() as ProcessGroupNCCL
    defines it: the call's milliseconds, asked once it has completed, an error before."""
    import time
    report = Report()
    me, w = ctx.rank, ctx.world
    pg = dist.group.WORLD
    dist.barrier()
    # Every rank but 0 comes 0.5 s late: rank 0's block cannot be done before they are.
    if me != 0:
        time.sleep(0.5)
    tensors = [torch.full((n,), float(me + 1)) for n in (10, 1000, 70000)]
    pg._start_coalescing(torch.device("cpu"))
    for t in tensors:
        dist.all_reduce(t)
    block = pg._end_coalescing(torch.device("cpu"))
    result = block.get_future_result()
    early = result.done()
    block.wait()
    report.check("a coalesced block's result is SUCCESS, known only once its parts are",
                 torch.tensor([result.wait(), early if me == 0 and w > 1 else False]),
                 torch.tensor([0, False]), same_on_all_ranks=False)
    for t in tensors:
        report.check("the block's all_reduces", t, torch.full_like(t, w * (w + 1) / 2))
    if me != 0:
        time.sleep(0.5)
    issued = time.monotonic()
    work = dist.all_reduce(torch.ones(1 << 16), async_op=True)
    try:
        before = work._get_duration()
    except RuntimeError as e:
        before = str(e)
    work.wait()
    waited_ms = (time.monotonic() - issued) * 1e3
    took = work._get_duration()
    report.check("_get_duration: an error before the call has completed (rank 0: its peers are "
                 "late)", torch.tensor(me != 0 or w == 1 or (
                     isinstance(before, str) and "has not run to its end yet" in before)),
                 torch.tensor(True), same_on_all_ranks=False)
    report.check("_get_duration: the call's milliseconds once completed",
                 torch.tensor(isinstance(took, float) and 0.0 < took <= waited_ms + 1.0),
                 torch.tensor(True), same_on_all_ranks=False)
    return report


@pytest.mark.parametrize("world", WORLDS)
def test_a_blocks_result_and_a_calls_duration(pool, world):
    assert_reports_pass(pool.run(results_and_durations), f"results and durations, world {world}")


@pytest.mark.parametrize("world", WORLDS)
def test_coalescing_manager_issues_one_task(pool, world):
    assert_reports_pass(pool.run(coalesced_all_reduces), f"coalescing, world {world}")


def batch_exchange(ctx):
    """batch_isend_irecv around the ring (NCCL-style coalescing, since the backend supports it)
    with messages larger than a FIFO: the same as gloo's."""
    report = Report()
    me, w = ctx.rank, ctx.world
    report.check("supports coalescing",
                 torch.tensor(dist.group.WORLD._get_backend(torch.device("cpu")).supports_coalescing),
                 torch.tensor(True), same_on_all_ranks=False)
    if w == 1:
        return report
    send = payload(me, 1 << 20, torch.float32, seed=3)
    recv = torch.empty(1 << 20)
    ops = [dist.P2POp(dist.isend, send, (me + 1) % w), dist.P2POp(dist.irecv, recv, (me - 1) % w)]
    for work in dist.batch_isend_irecv(ops):
        work.wait()
    report.check("received from the previous rank", recv,
                 payload((me - 1) % w, 1 << 20, torch.float32, seed=3), same_on_all_ranks=False)
    return report


@pytest.mark.parametrize("world", WORLDS)
def test_batch_isend_irecv_through_coalescing(pool, world):
    assert_reports_pass(pool.run(batch_exchange), f"batch_isend_irecv, world {world}")


# ---- splitting -----------------------------------------------------------------------------------

def split_through_the_backend(ctx):
    """Backend.split (what dist.split_group calls; torch refuses split_group itself without an
    accelerator): ranks of this group in torch's order, the members get a working backend with
    their position as rank, the others None."""
    from torch.distributed.distributed_c10d import _get_default_store

    report = Report()
    me, w = ctx.rank, ctx.world
    parent = dist.group.WORLD._get_backend(torch.device("cpu"))
    report.check("supports splitting", torch.tensor(parent.supports_splitting), torch.tensor(True),
                 same_on_all_ranks=False)
    members = list(range(w - 1, -1, -2))  # e.g. [3, 1] for 4 ranks: reversed order on purpose
    store = dist.PrefixStore("split-test/", _get_default_store())
    child = parent.split(store, members, torch_ring_backend.RingOptions())
    if me not in members:
        report.check("non-member gets None", torch.tensor(child is None), torch.tensor(True),
                     same_on_all_ranks=False)
        return report
    report.check("rank and size", torch.tensor([child.rank(), child.size()]),
                 torch.tensor([members.index(me), len(members)]), same_on_all_ranks=False)
    x = exact_input(me, 999, torch.float32, "SUM", seed=5)
    child.allreduce([x], dist.AllreduceOptions()).wait()
    want = sum(exact_input(r, 999, torch.float32, "SUM", seed=5) for r in members)
    report.check("all_reduce over the split group", x, want, same_on_all_ranks=False)
    child.shutdown()
    return report


# torch 2.13 binds none of Backend.split, .options, .get_error to Python and has no
# dist.set_timeout: nothing reaches them there.
_BINDING = torch._C._distributed_c10d.Backend


@pytest.mark.skipif(not hasattr(_BINDING, "split"),
                    reason=f"torch {torch.__version__} does not bind Backend.split (2.14 does)")
@pytest.mark.parametrize("world", WORLDS)
def test_split_through_the_backend(pool, world):
    assert_reports_pass(pool.run(split_through_the_backend), f"split, world {world}")


# ---- settings, hooks, what torch reads back ------------------------------------------------------

def hooks_options_errors(ctx):
    """Completion hooks with timings, waitForPendingWorks, the group's options, setTimeout and
    getError, on a fresh group over every rank (the pool's default group stays clean)."""
    import datetime
    import threading
    import time

    report = Report()
    group = dist.new_group(list(range(ctx.world)),
                           pg_options=torch_ring_backend.RingOptions(transport="tcp" if ctx.world > 1 else ""))
    backend = group._get_backend(torch.device("cpu"))
    opts = backend.options if hasattr(_BINDING, "options") else None
    if opts is not None:
        report.check("options are ring's",
                     torch.tensor([isinstance(opts, torch_ring_backend.RingOptions),
                                   opts.backend == "ring"]),
                     torch.tensor([True, True]), same_on_all_ranks=False)
    if ctx.world > 1 and opts is not None:
        report.check("pg_options reached the links", torch.tensor(opts.transport == "tcp"),
                     torch.tensor(True), same_on_all_ranks=False)
    seen, lock = [], threading.Lock()

    def hook(info):
        with lock:
            seen.append((info.op_type, info.seq, info.active_duration.total_seconds()))

    group._register_on_completion_hook(hook)
    for i in range(3):
        dist.all_reduce(torch.ones(10), group=group)
    # torch's Work.get_future_result(): SUCCESS (0), asked after the outcome is known and before.
    done = dist.all_reduce(torch.ones(10), group=group, async_op=True)
    done.wait()
    later = dist.all_reduce(torch.ones(10), group=group, async_op=True)
    early = later.get_future_result()
    report.check("get_future_result says SUCCESS",
                 torch.tensor([done.get_future_result().wait(), early.wait()]),
                 torch.tensor([0, 0]), same_on_all_ranks=False)
    dist.broadcast(torch.ones(4), src=0, group=group)
    group._wait_for_pending_works()
    with lock:
        ops = [str(s[0]) for s in seen]
        durations = [s[2] for s in seen]
    report.check("hook saw every call", torch.tensor(len(seen)), torch.tensor(6),
                 same_on_all_ranks=False)
    report.check("with their types", torch.tensor([ops.count("OpType.ALLREDUCE"),
                                                   ops.count("OpType.BROADCAST")]),
                 torch.tensor([5, 1]), same_on_all_ranks=False)
    report.check("and durations", torch.tensor(all(d >= 0 for d in durations)), torch.tensor(True),
                 same_on_all_ranks=False)
    has_get_error = hasattr(_BINDING, "get_error")  # bound from torch 2.14
    if has_get_error:
        report.check("no error yet", torch.tensor(int(backend.get_error())), torch.tensor(0),
                     same_on_all_ranks=False)
    if ctx.world > 1 and hasattr(dist, "set_timeout"):  # torch 2.14 has it, 2.13 not
        # A 1.5 s timeout set now applies to the next call: rank 0 waits for the others, who
        # join only after 4 s; it fails near 1.5 s (not the group's default) and says TIMEOUT.
        dist.set_timeout(datetime.timedelta(seconds=1.5), group)
        start = time.monotonic()
        result_future = None
        try:
            if ctx.rank == 0:
                work = dist.all_reduce(torch.ones(3), group=group, async_op=True)
                result_future = work.get_future_result()  # asked before the outcome is known
                work.wait()
            else:
                time.sleep(4)
                dist.all_reduce(torch.ones(3), group=group)
            error = ""
        except Exception as e:  # noqa: BLE001
            error = str(e)
        took = time.monotonic() - start
        if ctx.rank == 0:
            report.check("the new timeout ended the wait", torch.tensor(1.5 <= took < 3.5),
                         torch.tensor(True), same_on_all_ranks=False)
            report.check("named as a timeout", torch.tensor("timed out after" in error),
                         torch.tensor(True), same_on_all_ranks=False)
            # torch's Work.get_future_result(): an int future of c10d's WorkResult (TIMEOUT = 1).
            report.check("get_future_result says TIMEOUT",
                         torch.tensor(result_future.wait() if result_future else -1),
                         torch.tensor(1), same_on_all_ranks=False)
        if ctx.rank == 0 and has_get_error:
            report.check("get_error says TIMEOUT", torch.tensor(int(backend.get_error())),
                         torch.tensor(int(dist.distributed_c10d.ErrorType.TIMEOUT)
                                      if hasattr(dist.distributed_c10d, "ErrorType") else 1),
                         same_on_all_ranks=False)
    dist.destroy_process_group(group)
    return report


@pytest.mark.parametrize("world", WORLDS)
def test_hooks_options_timeout_and_errors(pools, world):
    # A pool of its own: the timeout breaks this case's group, and the ranks then leave.
    pool = pools.get(world, env={"RING_TEST_POOL": "hooks"})
    assert_reports_pass(pool.run(hooks_options_errors), f"hooks, world {world}")


def error_kind_without_a_hook(ctx):
    """Backend.get_error on a group with no completion hook: c10d's contract is the kind of the
    last failure (SUCCESS until one), whether or not a hook listens. The ranks disagree on the
    size of an all_reduce, which every rank must refuse (a collective mismatch): COMM_ERROR where
    a rank saw it itself, REMOTE_ERROR where another rank's report reached it first."""
    report = Report()
    group = dist.new_group(list(range(ctx.world)))
    backend = group._get_backend(torch.device("cpu"))
    report.check("no error yet", torch.tensor(int(backend.get_error())), torch.tensor(0),
                 same_on_all_ranks=False)
    try:
        dist.all_reduce(torch.ones(10 + ctx.rank), group=group)
        error = ""
    except Exception as e:  # noqa: BLE001
        error = str(e)
    report.check("the mismatch raised", torch.tensor("mismatch" in error), torch.tensor(True),
                 same_on_all_ranks=False)
    kind = int(backend.get_error())
    report.check("get_error names the failure (COMM_ERROR 2 or REMOTE_ERROR 3)",
                 torch.tensor(kind in (2, 3)), torch.tensor(True), same_on_all_ranks=False)
    dist.destroy_process_group(group)
    return report


@pytest.mark.parametrize("world", [w for w in WORLDS if w > 1])
def test_error_kind_without_a_completion_hook(pools, world):
    if not hasattr(_BINDING, "get_error"):
        pytest.skip("torch binds Backend.get_error to Python from 2.14")
    # A pool of its own: the mismatch breaks this case's group, and the ranks then leave.
    pool = pools.get(world, env={"RING_TEST_POOL": "no_hook_errors"})
    assert_reports_pass(pool.run(error_kind_without_a_hook), f"get_error, world {world}")


def slow_hook_holds_nothing_up(ctx):
    """A completion hook that takes its time (1.5 s a call) runs beside the group, as
    ProcessGroupNCCL runs hooks on a thread of its own: three small calls in a row do not wait
    for it (run by the hook's caller they would take 3 s at least), and destroy_process_group,
    which waits for pending works when the group has hooks (torch's Backend.hasHooks), returns
    only once the hook has seen all three."""
    import threading
    import time

    report = Report()
    group = dist.new_group(list(range(ctx.world)))
    seen, lock = [], threading.Lock()

    def hook(info):
        time.sleep(1.5)
        with lock:
            seen.append(str(info.op_type))

    group._register_on_completion_hook(hook)
    start = time.monotonic()
    for _ in range(3):
        dist.all_reduce(torch.ones(10), group=group)
    took = time.monotonic() - start
    report.check("three calls did not wait for the hook", torch.tensor(took < 1.2),
                 torch.tensor(True), same_on_all_ranks=False)
    report.check("torch sees the hook", torch.tensor(group._has_hooks()), torch.tensor(True),
                 same_on_all_ranks=False)
    dist.destroy_process_group(group)  # waits for the pending hook calls (torch's comment)
    with lock:
        calls = list(seen)
    report.check("destroy_process_group waited for every hook call",
                 torch.tensor(calls.count("OpType.ALLREDUCE")), torch.tensor(3),
                 same_on_all_ranks=False)
    return report


@pytest.mark.parametrize("world", WORLDS)
def test_a_slow_completion_hook_holds_up_no_call(pool, world):
    assert_reports_pass(pool.run(slow_hook_holds_nothing_up), f"slow hook, world {world}")
