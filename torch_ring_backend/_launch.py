"""Run a function on N local ranks, the way torchrun would, and collect what each rank returns.

    from torch_ring_backend._launch import run_on_local_ranks, RankFailed

    results = run_on_local_ranks(my_module_level_fn, 4, arg1, arg2)   # [rank0's, rank1's, ...]

Each rank is a fresh process (start method "spawn": CUDA and the shm transport both need a
clean process, not a fork of one that already holds threads or a CUDA context). It gets
RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT in its
environment, so the function can call `dist.init_process_group(backend)` with the default
env:// rendezvous exactly as under torchrun. The function must be importable by name (defined
at module level) and its arguments and result must pickle. Results travel pickled by value,
tensors included (not through shared memory, which a rank's exit could tear down before the
launcher reads it), so a rank may return and exit at once.
"""
import multiprocessing as mp
import multiprocessing.connection
import os
import pickle
import signal
import socket
import time
import traceback

__all__ = ["RankFailed", "free_port", "run_on_local_ranks"]

# After the first rank fails, how long the others get to report their own errors (often the
# same validation error on every rank) before they are stopped: ranks still inside a
# collective with the failed one would otherwise wait for the group timeout.
_GRACE_AFTER_FAILURE_S = 2.0


class RankFailed(RuntimeError):
    """A rank raised or died. `failures` maps rank -> the text it reported (a traceback, or
    how the process ended); str() names the first failing rank and shows its text."""

    def __init__(self, failures):
        self.failures = dict(sorted(failures.items()))
        first = next(iter(self.failures))
        others = [r for r in self.failures if r != first]
        also = f" (ranks {others} failed too)" if others else ""
        super().__init__(f"rank {first} failed{also}:\n{self.failures[first].rstrip()}")


def free_port(host="127.0.0.1"):
    """A TCP port that was free a moment ago. Another process may take it before the rendezvous
    binds it; that is rare on a developer machine and shows as a clear bind error."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def run_on_local_ranks(fn, nproc, *args, timeout_s=None, env=None):
    """Call fn(*args) on ranks 0..nproc-1 and return their results in rank order.

    Raises RankFailed if any rank raises or exits without a result (the other ranks are
    stopped), TimeoutError if timeout_s passes first. `env` adds environment variables.
    """
    if nproc < 1:
        raise ValueError(f"nproc must be at least 1, got {nproc}")
    ctx = mp.get_context("spawn")
    rank_env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()),
                "WORLD_SIZE": str(nproc), "LOCAL_WORLD_SIZE": str(nproc), **(env or {})}
    ranks = []
    try:
        for rank in range(nproc):
            receiver, sender = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_rank_entry, name=f"rank{rank}",
                               args=(fn, args, rank, rank_env, sender), daemon=True)
            proc.start()
            sender.close()  # the child holds the only sending end: EOF on the receiver = it died
            ranks.append((proc, receiver))
        return _collect(ranks, timeout_s)
    finally:
        _stop(proc for proc, _ in ranks)


def _rank_entry(fn, args, rank, rank_env, sender):
    os.environ.update(rank_env)
    os.environ["RANK"] = os.environ["LOCAL_RANK"] = str(rank)
    try:
        result = ("ok", fn(*args))
    except BaseException:  # noqa: BLE001 - KeyboardInterrupt and SystemExit are reported too
        result = ("error", traceback.format_exc())
    try:
        payload = pickle.dumps(result)  # plain pickle: by value (Connection.send would share)
    except Exception:  # noqa: BLE001 - e.g. an unpicklable result: report that instead
        payload = pickle.dumps(("error", f"rank {rank}'s result could not be sent back:\n"
                                         f"{traceback.format_exc()}"))
    sender.send_bytes(payload)
    sender.close()


def _collect(ranks, timeout_s):
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    results, failures = {}, {}
    pending = {receiver: rank for rank, (_, receiver) in enumerate(ranks)}
    failed_at = None
    while pending:
        wait_s = _seconds_left(deadline, failed_at)
        if wait_s is not None and wait_s <= 0:
            break
        for receiver in mp.connection.wait(list(pending), timeout=wait_s):
            rank = pending.pop(receiver)
            status, value = _receive(receiver, ranks[rank][0])
            if status == "ok":
                results[rank] = value
            else:
                failures[rank] = value
                failed_at = failed_at or time.monotonic()
    if failures:
        raise RankFailed(failures)
    if pending:
        raise TimeoutError(f"ranks {sorted(pending.values())} gave no result within {timeout_s} s")
    return [results[rank] for rank in range(len(ranks))]


def _seconds_left(deadline, failed_at):
    limits = []
    if deadline is not None:
        limits.append(deadline - time.monotonic())
    if failed_at is not None:
        limits.append(failed_at + _GRACE_AFTER_FAILURE_S - time.monotonic())
    return min(limits) if limits else None


def _receive(receiver, proc):
    try:
        return pickle.loads(receiver.recv_bytes())
    except EOFError:
        proc.join(timeout=5)
        return "error", f"the process exited without a result ({_describe_exit(proc.exitcode)})"


def _describe_exit(code):
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def _stop(procs):
    procs = list(procs)
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
    for proc in procs:
        proc.join(timeout=5)
        if proc.is_alive():
            proc.kill()
            proc.join()
