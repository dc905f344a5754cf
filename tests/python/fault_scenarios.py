"""Fault scenarios, one per process group, run by test_faults.py as separate processes:

    RANK=r WORLD_SIZE=n MASTER_ADDR=127.0.0.1 MASTER_PORT=p python fault_scenarios.py NAME

Each rank prints one line `RESULT <json>` describing what it observed (error type and text,
elapsed seconds, leftovers); the test asserts on those. A scenario that hangs is killed by the
test, which then fails: hanging is exactly what these scenarios must never do.
"""
import datetime
import gc
import json
import os
import signal
import sys
import threading
import time

import torch
import torch.distributed as dist

import torch_ring_backend

TIMEOUT_S = float(os.environ.get("RING_TEST_TIMEOUT_S", "3"))


def report(**fields):
    print("RESULT " + json.dumps(fields), flush=True)


def init():
    dist.init_process_group("ring", timeout=datetime.timedelta(seconds=TIMEOUT_S))
    return dist.get_rank(), dist.get_world_size()


def run_and_capture(fn):
    """Runs fn(); returns (error type name or None, message, elapsed seconds)."""
    start = time.monotonic()
    try:
        fn()
        return None, "", time.monotonic() - start
    except Exception as e:  # noqa: BLE001 - the type is what we report
        return type(e).__name__, str(e), time.monotonic() - start


def scenario_timeout():
    rank, world = init()
    if rank == 0:
        err, msg, took = run_and_capture(lambda: dist.all_reduce(torch.ones(10)))
        report(rank=rank, error=err, message=msg, elapsed=took)
        # A later collective on the broken group fails fast with the same cause.
        err2, msg2, took2 = run_and_capture(lambda: dist.all_reduce(torch.ones(10)))
        report(rank=rank, phase="after", error=err2, message=msg2, elapsed=took2)
    else:
        time.sleep(TIMEOUT_S + 2)  # never joins the first all_reduce
        err, msg, took = run_and_capture(lambda: dist.all_reduce(torch.ones(10)))
        report(rank=rank, error=err, message=msg, elapsed=took)
    os._exit(0)


def scenario_skipped_all_reduce():
    """Rank 2 skips the fourth all_reduce; the others time out in it. Every rank then writes
    its flight-recorder dump into RING_TEST_DUMP_DIR; rank 2 then issues a broadcast, which
    fails at once on the broken group. A failure also writes a dump by itself where
    TORCH_FR_DUMP_TEMP_FILE is set."""
    rank, world = init()
    for _ in range(3):
        dist.all_reduce(torch.ones(10))
    if rank == 2:
        time.sleep(TIMEOUT_S + 2)  # never issues the fourth all_reduce
        err = None
    else:
        err, _, _ = run_and_capture(lambda: dist.all_reduce(torch.ones(12)))
    path = torch_ring_backend.dump_flight_recorder(
        os.path.join(os.environ["RING_TEST_DUMP_DIR"], f"ring_trace_rank_{rank}"))
    late = None
    if rank == 2:
        late, _, _ = run_and_capture(lambda: dist.broadcast(torch.ones(12), 0))
    report(rank=rank, error=err, late_error=late, path=path)
    os._exit(0)


def scenario_dump_on_signal():
    """Every rank runs with TORCH_RING_FR_DUMP_SIGNAL=SIGUSR1. Rank 0 waits in an all_reduce
    that rank 1 never issues; meanwhile rank 1 sends SIGUSR1 to rank 0 and to itself, and reads
    both dumps, which must appear while rank 0 is still stuck (its main thread is inside a
    blocking C++ wait, where no Python signal handler could run)."""
    rank, world = init()
    pids = [None] * world
    dist.all_gather_object(pids, os.getpid())
    for _ in range(3):
        dist.all_reduce(torch.ones(10))
    prefix = os.environ["TORCH_FR_DUMP_TEMP_FILE"]
    if rank == 0:
        err, _, took = run_and_capture(lambda: dist.all_reduce(torch.ones(12)))
        report(rank=rank, error=err, elapsed=took)
    else:
        time.sleep(0.5)
        asked = time.monotonic()
        os.kill(pids[0], signal.SIGUSR1)
        os.kill(os.getpid(), signal.SIGUSR1)
        import pickle
        dumps = {}
        while len(dumps) < 2 and time.monotonic() - asked < TIMEOUT_S / 2:
            for r in (0, 1):
                if r not in dumps and os.path.exists(f"{prefix}{r}"):
                    with open(f"{prefix}{r}", "rb") as f:
                        dumps[r] = pickle.load(f)
            time.sleep(0.02)
        report(rank=rank, alive=True, seconds_to_dumps=time.monotonic() - asked,
               states={r: [e["state"] for e in d["entries"]] for r, d in dumps.items()},
               sizes={r: [e["input_sizes"] for e in d["entries"]] for r, d in dumps.items()})
        time.sleep(TIMEOUT_S)  # rank 0 times out meanwhile
    os._exit(0)


def scenario_kill():
    rank, world = init()
    x = torch.ones(1 << 20)
    dist.all_reduce(x)  # everyone is connected and in step
    if rank == world - 1:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.2)
    err, msg, took = run_and_capture(lambda: [dist.all_reduce(x) for _ in range(50)])
    report(rank=rank, error=err, message=msg, elapsed=took)
    err2, msg2, took2 = run_and_capture(lambda: dist.broadcast(x, src=0))
    report(rank=rank, phase="after", error=err2, message=msg2, elapsed=took2)
    os._exit(0)


def scenario_mismatch_count():
    rank, world = init()
    n = 1000 if rank == 0 else 2000
    err, msg, took = run_and_capture(lambda: dist.all_reduce(torch.ones(n)))
    report(rank=rank, error=err, message=msg, elapsed=took)
    os._exit(0)


def scenario_mismatch_collective():
    rank, world = init()
    x = torch.ones(100)
    if rank == 0:
        fn = lambda: dist.all_reduce(x)  # noqa: E731
    else:
        fn = lambda: dist.broadcast(x, src=0)  # noqa: E731
    err, msg, took = run_and_capture(fn)
    report(rank=rank, error=err, message=msg, elapsed=took)
    os._exit(0)


def scenario_mismatch_dtype():
    rank, world = init()
    x = torch.ones(100, dtype=torch.float32 if rank == 0 else torch.float64)
    err, msg, took = run_and_capture(lambda: dist.all_reduce(x))
    report(rank=rank, error=err, message=msg, elapsed=took)
    os._exit(0)


def scenario_mismatch_op():
    rank, world = init()
    op = dist.ReduceOp.SUM if rank == 0 else dist.ReduceOp.MAX
    err, msg, took = run_and_capture(lambda: dist.all_reduce(torch.ones(100), op=op))
    report(rank=rank, error=err, message=msg, elapsed=took)
    os._exit(0)


def scenario_future_of_a_failed_work():
    """A failed Work's Future (torch.distributed.Work.get_future: the Future completes with
    the Work's outcome, an error included), asked for before the failure and after it.
    float32 against float64: a mismatch every rank detects. 2**20 elements, past
    TORCH_RING_INLINE_BYTES: the call goes to the worker, so the first Future is usually
    asked for before the Work completes. The next all_reduce fails too (the group is broken),
    and its Future is first asked for after its wait()."""
    rank, world = init()
    x = torch.ones(2**20, dtype=torch.float32 if rank == 0 else torch.float64)
    work = dist.all_reduce(x, async_op=True)
    before = work.get_future()
    chained = before.then(lambda f: f.value())
    seen = []
    for label, fn in (("work", work.wait), ("before", before.wait), ("chained", chained.wait)):
        err, msg, _ = run_and_capture(fn)
        seen.append({"label": label, "error": err, "message": msg})
    next_work = dist.all_reduce(x, async_op=True)
    err, msg, _ = run_and_capture(next_work.wait)
    seen.append({"label": "next work", "error": err, "message": msg})
    after = next_work.get_future()
    done = after.done()
    err, msg, _ = run_and_capture(after.wait)
    seen.append({"label": "next future", "error": err, "message": msg, "done": done})
    report(rank=rank, seen=seen)
    os._exit(0)


def scenario_mismatch_direct_bytes():
    # TORCH_RING_DIRECT_BYTES set on rank 0 only (read when the group starts): rank 0 moves a
    # 400-byte all_reduce around the ring, the others in one direct round.
    if os.environ["RANK"] == "0":
        os.environ["TORCH_RING_DIRECT_BYTES"] = "0"
    rank, world = init()
    err, msg, took = run_and_capture(lambda: dist.all_reduce(torch.ones(100)))
    report(rank=rank, error=err, message=msg, elapsed=took)
    os._exit(0)


def scenario_mismatch_root():
    # A broadcast root only sends, so it may finish before a receiver sees the wrong root; its
    # next collective must then fail with that cause.
    rank, world = init()
    if rank == 1:
        # Let rank 2 be waiting for its data first, so that it (not a later collective) is the
        # one that compares the roots.
        time.sleep(1.0)
    err, msg, took = run_and_capture(lambda: dist.broadcast(torch.ones(100), src=rank % 2))
    report(rank=rank, error=err, message=msg, elapsed=took)
    err, msg, took = run_and_capture(lambda: dist.all_reduce(torch.ones(4)))
    report(rank=rank, phase="after", error=err, message=msg, elapsed=took)
    os._exit(0)


def scenario_abort():
    rank, world = init()
    if rank == 0:
        work = dist.all_reduce(torch.ones(10), async_op=True)  # rank 1 never joins
        time.sleep(0.3)
        backend = dist.group.WORLD._get_backend(torch.device("cpu"))
        start = time.monotonic()
        backend.abort()
        err, msg, _ = run_and_capture(work.wait)
        report(rank=rank, error=err, message=msg, elapsed=time.monotonic() - start)
    else:
        time.sleep(1.5)
        err, msg, took = run_and_capture(lambda: dist.all_reduce(torch.ones(10)))
        report(rank=rank, error=err, message=msg, elapsed=took)
    os._exit(0)


def ring_threads():
    """Names of this library's threads alive in this process (they are named ring-*)."""
    names = []
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = f.read().strip()
        except OSError:
            continue  # the thread ended meanwhile
        if name.startswith("ring-"):
            names.append(name)
    return sorted(names)


def resources():
    return {
        "threads": len(os.listdir("/proc/self/task")),
        "ring_threads": ring_threads(),
        "fds": len(os.listdir("/proc/self/fd")),
        "shm": sorted(f for f in os.listdir("/dev/shm") if f.startswith("torch_ring_")),
        "rss_kb": int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024,
    }


def scenario_cleanup():
    # Baseline after torch has started its own threads and made its one-time allocations: a
    # tensor op, and a TCPStore server started and dropped (libuv keeps a pipe pair for good).
    torch.ones(1).add_(1)
    if int(os.environ["RANK"]) == 0:
        warm = dist.TCPStore("127.0.0.1", 0, 1, True, datetime.timedelta(seconds=10),
                             multi_tenant=True, use_libuv=True)
        del warm
        gc.collect()
    before = resources()
    for _ in range(3):
        rank, world = init()
        sub = dist.new_group(backend="ring")
        x = torch.ones(1000)
        dist.all_reduce(x)
        dist.all_reduce(x, group=sub)
        if rank == 0:
            dist.send(x, 1)
        elif rank == 1:
            dist.recv(x, 0)
        dist.barrier()
        during = resources()
        dist.destroy_process_group()
        gc.collect()
    # The last subgroup is still referenced here, as it often is in user code: destroy must have
    # released what the library holds anyway (its threads, sockets, shared memory).
    still_referenced = resources()
    # torch's ProcessGroup object itself holds the store (a TCPStore server on rank 0): only
    # after the last reference goes does the process return to its baseline.
    del sub
    gc.collect()
    after = resources()
    report(rank=rank, before=before, during=during, still_referenced=still_referenced,
           after=after)
    os._exit(0)


def scenario_setup_failure():
    # Rank 1's set-up fails (a bad setting) with a long timeout on both: rank 0 must learn it
    # from rank 1's notice in the store, not wait for the timeout.
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if rank == 1:
        name, value = os.environ.get("RING_TEST_BAD_SETTING", "TORCH_RING_TRANSPORT=bogus").split("=")
        os.environ[name] = value
    # The store outlives a failed init, as torchrun's agent store does: with env://, rank 0's
    # store went down with rank 0 when rank 0 failed first (a setting compared at set-up fails
    # on every rank), and rank 1 then saw the store vanish instead of either failure.
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world,
                          rank == 0, timeout=datetime.timedelta(seconds=TIMEOUT_S))
    err, msg, took = run_and_capture(lambda: dist.init_process_group(
        "ring", store=store, rank=rank, world_size=world,
        timeout=datetime.timedelta(seconds=TIMEOUT_S)))
    report(rank=rank, error=err, message=msg, elapsed=took)
    if err is not None and rank == 0:
        # Rank 0 hosts the store here (no torchrun agent): stay until the others have read
        # what they need from it.
        time.sleep(5)
    os._exit(0)


def scenario_secret():
    # RING_TEST_SECRETS: one TORCH_RING_SECRET per rank, comma-separated ("" leaves it unset,
    # "file:PATH" sets TORCH_RING_SECRET_FILE=PATH instead).
    rank = int(os.environ["RANK"])
    mine = os.environ["RING_TEST_SECRETS"].split(",")[rank]
    if mine.startswith("file:"):
        os.environ["TORCH_RING_SECRET_FILE"] = mine[len("file:"):]
    elif mine:
        os.environ["TORCH_RING_SECRET"] = mine

    world = int(os.environ["WORLD_SIZE"])
    # The store outlives a failed init, as torchrun's agent store does (an env:// store of
    # rank 0 would go down with rank 0's failed init, before the others read its notice).
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world,
                          rank == 0, timeout=datetime.timedelta(seconds=TIMEOUT_S))

    def init_and_reduce():
        dist.init_process_group("ring", store=store, rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=TIMEOUT_S))
        t = torch.full((4,), float(rank + 1))
        dist.all_reduce(t)
        assert t.tolist() == [float(sum(range(1, world + 1)))] * 4, t

    err, msg, took = run_and_capture(init_and_reduce)
    report(rank=rank, error=err, message=msg, elapsed=took)
    if err is not None and rank == 0:
        # Rank 0 hosts the store here (no torchrun agent): stay until the others have read
        # its failure notice from it.
        time.sleep(5)
    os._exit(0)


def scenario_regroup():
    # One store for the whole run, as under torchrun (every rank uses the agent's store): the
    # subgroup is named "1" in every cycle, with other members and another size each time.
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world,
                          rank == 0, datetime.timedelta(seconds=30))
    sums = []
    for members in ([0, 1], [1, 2], [0, 1, 2], [0, 1]):
        dist.init_process_group("ring", store=store, rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=TIMEOUT_S))
        sub = dist.new_group(members)
        x = torch.full((1000,), float(rank + 1))
        if rank in members:
            dist.all_reduce(x, group=sub)
            sums.append(x[0].item())
        dist.barrier()
        dist.destroy_process_group()
    report(rank=rank, sums=sums)
    os._exit(0)


def scenario_p2p_timeout():
    # Rank 0 receives from rank 1, which never sends: a timeout naming both, at the timeout.
    rank, world = init()
    if rank == 0:
        err, msg, took = run_and_capture(lambda: dist.recv(torch.ones(10), 1))
        report(rank=rank, error=err, message=msg, elapsed=took)
    else:
        time.sleep(TIMEOUT_S + 2)
        report(rank=rank, error=None, message="", elapsed=0.0)
    os._exit(0)


def scenario_p2p_peer_killed():
    # Rank 0 waits in a receive (and an irecv of a larger message) while rank 1 dies.
    rank, world = init()
    dist.barrier()
    if rank == 1:
        time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGKILL)
    small = dist.irecv(torch.ones(10), 1)
    err, msg, took = run_and_capture(lambda: small.wait())
    report(rank=rank, error=err, message=msg, elapsed=took)
    os._exit(0)


def scenario_p2p_peer_destroyed():
    # Rank 1 waits in a receive while rank 0 shuts its process group down in order and lives on.
    rank, world = init()
    dist.barrier()
    if rank == 0:
        time.sleep(0.5)
        dist.destroy_process_group()
        time.sleep(8)
        report(rank=rank, error=None, message="", elapsed=0.0)
    else:
        err, msg, took = run_and_capture(lambda: dist.recv(torch.ones(10), 0))
        report(rank=rank, error=err, message=msg, elapsed=took)
    os._exit(0)


def scenario_leave_early():
    # Rank 2 is done first (as a last pipeline stage may be): it shuts its group down in order
    # and exits, while rank 0 still sends to rank 1. That must not fail ranks 0 and 1.
    rank, world = init()
    dist.barrier()
    if rank == 2:
        dist.destroy_process_group()
        report(rank=rank, error=None, message="", elapsed=0.0)
        os._exit(0)
    x = torch.zeros(1000)
    def exchange():
        if rank == 0:
            time.sleep(1.0)  # rank 2's process is gone by now
            dist.send(torch.ones(1000), 1)
        else:
            dist.recv(x, 0)
    err, msg, took = run_and_capture(exchange)
    report(rank=rank, error=err, message=msg, elapsed=took, got=float(x[0]))
    os._exit(0)


def scenario_use_after_destroy():
    # Through the backend object itself: dist.all_reduce would stop at torch's own "not
    # initialized" check and never reach the backend.
    rank, world = init()
    # Every rank past its set-up before any leaves: rank 0 hosts the store, and a rank still
    # reading its last set-up keys when rank 0 has exited fails in init_process_group, not in
    # the call under test (seen once in CI: rank 1 in chooseCopyStart's store read).
    dist.barrier()
    backend = dist.group.WORLD._get_backend(torch.device("cpu"))
    dist.destroy_process_group()
    err, msg, took = run_and_capture(
        lambda: backend.allreduce([torch.ones(4)], dist.AllreduceOptions()).wait())
    report(rank=rank, error=err, message=msg, elapsed=took)
    os._exit(0)


def scenario_flight_recorder():
    rank, world = init()
    for i in range(5):
        dist.all_reduce(torch.ones(10 + i))
    dist.broadcast(torch.ones(7), src=0)
    entries = torch_ring_backend.flight_recorder()
    report(rank=rank, entries=entries)
    os._exit(0)


def scenario_stress():
    rank, world = init()
    other = dist.new_group(backend="ring")
    dist.all_reduce(torch.ones(1))
    print(f"READY {rank} {os.getpid()}", flush=True)  # set up, links mapped
    problems = []

    def burst(count):
        # Every rank starts from its own values, so a call that did not run shows.
        x = torch.arange(16, dtype=torch.float32) + rank
        y = torch.arange(16, dtype=torch.int64) - rank
        for i in range(count):
            dist.all_reduce(x, op=dist.ReduceOp.MAX)
            dist.all_reduce(y, group=other, op=dist.ReduceOp.MIN)
        if not torch.equal(x, torch.arange(16, dtype=torch.float32) + world - 1):
            problems.append(f"MAX: {x.tolist()}")
        if not torch.equal(y, torch.arange(16, dtype=torch.int64) - (world - 1)):
            problems.append(f"MIN: {y.tolist()}")
        tensors = [torch.full((8,), float(i + rank)) for i in range(200)]
        works = [dist.all_reduce(t, async_op=True) for t in tensors]
        for i, (w, t) in enumerate(zip(works, tensors)):
            w.wait()
            want = float(world * i + world * (world - 1) // 2)
            if not torch.all(t == want):
                problems.append(f"async {i}: {t.tolist()} != {want}")

    burst(500)  # warm-up: allocator pools, flight recorder filled
    gc.collect()
    before = resources()
    start = time.monotonic()
    burst(4500)  # with the warm-up: 10,000 small collectives over two groups, plus async
    took = time.monotonic() - start
    gc.collect()
    after = resources()
    report(rank=rank, before=before, after=after, elapsed=took, values_ok=not problems,
           problems=problems[:5])
    dist.destroy_process_group()
    os._exit(0)


def scenario_sigstop():
    # Rank 1 is stopped (by the test) right after the first collective; the others time out
    # at about the timeout; after SIGCONT rank 1 errors cleanly instead of hanging.
    rank, world = init()
    dist.all_reduce(torch.ones(4))
    print(f"READY {rank} {os.getpid()}", flush=True)
    if rank == 1:
        # The test stops this rank while it waits here, and lets it go after the others timed
        # out: it cannot reach the next collective before it is stopped.
        sys.stdin.readline()
    err, msg, took = run_and_capture(lambda: dist.all_reduce(torch.ones(4)))
    report(rank=rank, error=err, message=msg, elapsed=took)
    os._exit(0)


def scenario_frozen_peer():
    # Rank 2 is stopped by the test (SIGSTOP) right after saying READY, while the others run
    # an all_reduce with the test's long group timeout: each must fail within seconds, naming
    # it (the same-host heartbeat, TORCH_RING_LINK_SILENCE_MS), not at the timeout.
    rank, world = init()
    dist.all_reduce(torch.ones(4))
    print(f"READY {rank} {os.getpid()}", flush=True)
    if rank == 2:
        sys.stdin.readline()  # stopped here; killed by the test afterwards
        os._exit(0)
    err, msg, took = run_and_capture(lambda: dist.all_reduce(torch.ones(1 << 14)))
    report(rank=rank, error=err, message=msg, elapsed=took)
    os._exit(0)


def scenario_late_but_live():
    # Rank 1 is late by more than twice TORCH_RING_LINK_SILENCE_MS (set by the test): first
    # asleep in Python, then inside a C call that holds the GIL (libc's sleep through
    # ctypes.PyDLL, which keeps it). A live process keeps beating: nobody is flagged.
    import ctypes
    rank, world = init()
    dist.all_reduce(torch.ones(4))
    late_s = 2.5 * int(os.environ["TORCH_RING_LINK_SILENCE_MS"]) / 1000
    if rank == 1:
        time.sleep(late_s)
    err, msg, took = run_and_capture(lambda: dist.all_reduce(torch.ones(4)))
    report(rank=rank, phase="asleep in python", error=err, message=msg, elapsed=took)
    if rank == 1:
        ctypes.PyDLL(None).sleep(int(late_s + 0.5))
    err, msg, took = run_and_capture(lambda: dist.all_reduce(torch.ones(4)))
    report(rank=rank, phase="in a C call holding the GIL", error=err, message=msg, elapsed=took)
    dist.destroy_process_group()
    os._exit(0)


def scenario_debug_log():
    rank, world = init()
    dist.all_reduce(torch.ones(8))
    report(rank=rank, ok=True)
    dist.destroy_process_group()
    os._exit(0)


if __name__ == "__main__":
    globals()["scenario_" + sys.argv[1]]()
