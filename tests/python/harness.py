"""Long-lived rank processes that run test cases on the "ring" backend.

Starting torch in a fresh process costs seconds, so a `Pool` starts its `world` ranks once and
then runs many cases on them. A case is a module-level function `fn(ctx, *args)`; every rank
calls it with the same arguments and a `RankContext` (rank, world size, and a gloo group over
the same ranks for reference results). The pool returns each rank's return value, or its
traceback text.

Each rank joins the default group with backend "ring" (group timeout `GROUP_TIMEOUT`, so a
backend bug surfaces as an error, not a hang) and a gloo group over the same ranks. A case
that does not finish within its time limit fails, and the pool is torn down; a case that
raised on any rank also retires the pool, since its ranks may have left the collective
sequence out of step. The next case then gets fresh processes. `close` stops the ranks with
destroy_process_group and records anything that did not stop cleanly in `problems`.
"""
import ctypes
import datetime
import importlib
import os
import pickle
import queue
import signal
import socket
import tempfile
import time
import traceback
from dataclasses import dataclass

import torch.multiprocessing as mp

WORLDS = (1, 2, 3, 4)  # the world sizes the suite covers
GROUP_TIMEOUT = datetime.timedelta(seconds=30)
CASE_TIMEOUT_S = 60.0  # above GROUP_TIMEOUT: a stuck collective should report its own error first
START_TIMEOUT_S = 120.0
START_ATTEMPTS = 2  # a free port can be taken by someone else before rank 0 binds it
STOP_TIMEOUT_S = 30.0
LOG_TAIL_CHARS = 3000


@dataclass
class RankContext:
    """What a case function gets besides its arguments."""

    rank: int
    world: int
    gloo: object  # a ProcessGroup with backend gloo over the same ranks as the default group


@dataclass
class Outcome:
    """One rank's result of one case: `value` if it returned, `error` (traceback) if it raised."""

    rank: int
    ok: bool
    value: object = None
    error: str = ""


class CaseTimeout(AssertionError):
    pass


class CaseFailed(AssertionError):
    pass


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent():
    # A rank whose pytest was killed must not linger (it would hold shared memory and a port).
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass


def _context():
    """A forkserver context whose server has torch imported already.

    Importing torch takes seconds, and much longer when several ranks do it at once on a few
    cores; forking from a server that imported it once (and started no threads, so forking is
    safe) starts a rank in milliseconds. Each rank is still a fresh child of that server, not
    of pytest, so it inherits none of pytest's state."""
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["torch", "torch.distributed", "torch_ring_backend", "harness"])
    return ctx


def _resolve(module_name, qualname):
    obj = importlib.import_module(module_name)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def _worker_main(rank, world, port, env, inbox, outbox, log_path):
    """Body of one rank process: join the groups, then run cases until told to stop."""
    _die_with_parent()
    log = open(log_path, "a", buffering=1)
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    os.environ.update(env)
    try:
        import torch
        import torch.distributed as dist

        import torch_ring_backend  # noqa: F401  (registers "ring")

        # Up to 4 ranks share a few cores: more intra-op threads would only fight each other.
        torch.set_num_threads(1)

        # The debug level is read from the environment when torch.distributed is imported;
        # read it again so that `env` (e.g. TORCH_DISTRIBUTED_DEBUG=DETAIL) takes effect.
        dist.set_debug_level_from_env()
        dist.init_process_group(
            "ring",
            init_method=f"tcp://127.0.0.1:{port}",
            rank=rank,
            world_size=world,
            timeout=GROUP_TIMEOUT,
        )
        gloo = dist.new_group(backend="gloo", timeout=GROUP_TIMEOUT)
        ctx = RankContext(rank=rank, world=world, gloo=gloo)
    except BaseException:
        outbox.put(("start-failed", rank, False, traceback.format_exc()))
        return
    outbox.put(("ready", rank, True, None))
    while True:
        message = inbox.get()
        if message is None:
            break
        case_id, module_name, qualname, args = message
        try:
            value = _resolve(module_name, qualname)(ctx, *args)
            # Plain pickle copies tensors into the message; torch's shared-memory reductions
            # would leave the lifetime of the result to the other process.
            outbox.put((case_id, rank, True, pickle.dumps(value)))
        except BaseException:
            outbox.put((case_id, rank, False, traceback.format_exc()))
    try:
        dist.destroy_process_group()
        outbox.put(("stopped", rank, True, None))
    except BaseException:
        outbox.put(("stop-failed", rank, False, traceback.format_exc()))


class Pool:
    """`world` rank processes, started on first use, that run cases submitted by `run`."""

    def __init__(self, world, env=None, log_dir=None):
        self.world = world
        self.env = dict(env or {})
        self.log_dir = log_dir or tempfile.mkdtemp(prefix="ring_pool_")
        self.problems = []  # shutdown problems, reported by the session-end check
        self._procs = []
        self.started_pids = []  # every rank process this pool ever started
        self._next_case = 0
        self._generation = 0

    # ---- lifecycle ---------------------------------------------------------------------------

    def _start(self):
        for attempt in range(1, START_ATTEMPTS + 1):
            try:
                return self._start_once()
            except RuntimeError:
                if attempt == START_ATTEMPTS:
                    raise

    def _start_once(self):
        ctx = _context()
        self._generation += 1
        self._outbox = ctx.Queue()
        self._inboxes = [ctx.Queue() for _ in range(self.world)]
        self._logs = [
            os.path.join(self.log_dir, f"w{self.world}_g{self._generation}_rank{r}.log")
            for r in range(self.world)
        ]
        port = _free_port()
        self._procs = [
            ctx.Process(
                target=_worker_main,
                args=(r, self.world, port, self.env, self._inboxes[r], self._outbox, self._logs[r]),
                daemon=True,
            )
            for r in range(self.world)
        ]
        self._dead = set()
        for p in self._procs:
            p.start()
            self.started_pids.append(p.pid)
        ready, deadline = set(), time.monotonic() + START_TIMEOUT_S
        while len(ready) < self.world:
            message = self._next_message(deadline)
            if message is None or message[0] == "start-failed":
                why = (f"rank {message[1]} failed to start:\n{message[3]}" if message
                       else f"ranks {sorted(set(range(self.world)) - ready)} did not join the "
                            f"groups within {START_TIMEOUT_S} s")
                tails = self._log_tails()
                self._kill()
                raise RuntimeError(f"world {self.world}: {why}\n{tails}")
            ready.add(message[1])

    def _next_message(self, deadline):
        """The next (tag, rank, ok, payload) from the ranks, or None at the deadline. A rank
        process that exits out of turn counts as an answer: ("died", rank, False, exit text)."""
        while True:
            try:
                return self._outbox.get(timeout=max(0.01, min(1.0, deadline - time.monotonic())))
            except queue.Empty:
                pass
            for rank, p in enumerate(self._procs):
                if p.exitcode is not None and rank not in self._dead:
                    self._dead.add(rank)
                    return ("died", rank, False, f"rank process exited with code {p.exitcode}")
            if time.monotonic() >= deadline:
                return None

    def _kill(self):
        for p in self._procs:
            if p.is_alive():
                p.kill()
        for p in self._procs:
            p.join(10)
        self._procs = []

    def close(self):
        """Stops the ranks cleanly (destroy_process_group); kills any that do not stop."""
        if not self._procs:
            return
        for inbox in self._inboxes:
            inbox.put(None)
        stopped, deadline = set(), time.monotonic() + STOP_TIMEOUT_S
        while len(stopped) < self.world:
            message = self._next_message(deadline)
            if message is None:
                break
            kind, rank, _, detail = message
            if rank in stopped:
                continue  # its process exiting after "stopped" is the normal end
            if kind in ("stop-failed", "died"):
                self.problems.append(f"world {self.world} rank {rank} at shutdown: {detail}")
            if kind in ("stopped", "stop-failed", "died"):
                stopped.add(rank)
        for p in self._procs:
            p.join(max(0.1, deadline - time.monotonic()))
        lingering = [p.pid for p in self._procs if p.is_alive()]
        if lingering or len(stopped) < self.world:
            self.problems.append(
                f"world {self.world}: ranks {sorted(set(range(self.world)) - stopped)} did not "
                f"stop cleanly within {STOP_TIMEOUT_S} s (pids still alive: {lingering})"
            )
        self._kill()

    def _retire(self):
        # After a timeout or an error the ranks may be out of step: start over next time.
        self._kill()

    # ---- running cases -----------------------------------------------------------------------

    def outcomes(self, fn, *args, timeout=CASE_TIMEOUT_S):
        """Runs fn(ctx, *args) on every rank; returns one Outcome per rank (rank order)."""
        if not self._procs:
            self._start()
        self._next_case += 1
        case_id = self._next_case
        message = (case_id, fn.__module__, fn.__qualname__, args)
        for inbox in self._inboxes:
            inbox.put(message)
        results, deadline = {}, time.monotonic() + timeout
        while len(results) < self.world:
            message = self._next_message(deadline)
            if message is None:
                missing = sorted(set(range(self.world)) - set(results))
                tails = self._log_tails()
                self._retire()
                raise CaseTimeout(
                    f"{fn.__qualname__}{args!r} on world {self.world}: ranks {missing} did not "
                    f"finish within {timeout} s; the pool was torn down\n{tails}"
                )
            tag, rank, ok, payload = message
            if tag == "died":
                payload += "\n" + self._log_tails()
            elif tag != case_id:
                continue  # a late answer to an earlier case
            results[rank] = (
                Outcome(rank, True, value=pickle.loads(payload)) if ok
                else Outcome(rank, False, error=payload)
            )
        outcomes = [results[r] for r in range(self.world)]
        if not all(o.ok for o in outcomes):
            self._retire()
        return outcomes

    def run(self, fn, *args, timeout=CASE_TIMEOUT_S):
        """Runs fn(ctx, *args) on every rank and returns the values in rank order; fails with
        every failing rank's traceback if any rank raised."""
        outcomes = self.outcomes(fn, *args, timeout=timeout)
        failed = [o for o in outcomes if not o.ok]
        if failed:
            text = "\n".join(f"--- rank {o.rank} ---\n{o.error}" for o in failed)
            raise CaseFailed(
                f"{fn.__qualname__}{args!r} failed on world {self.world}, "
                f"ranks {[o.rank for o in failed]}:\n{text}\n{self._log_tails()}"
            )
        return [o.value for o in outcomes]

    def _log_tails(self):
        parts = []
        for r, path in enumerate(getattr(self, "_logs", [])):
            try:
                with open(path, errors="replace") as f:
                    text = f.read()[-LOG_TAIL_CHARS:]
            except OSError:
                continue
            if text.strip():
                parts.append(f"--- rank {r} log ({path}) ---\n{text}")
        return "\n".join(parts)

