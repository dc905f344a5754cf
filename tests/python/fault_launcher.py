"""Starts the ranks of one fault scenario as separate processes and collects what they report.

Separate processes (not the shared rank pool) because these scenarios kill, stop and abort
ranks on purpose."""
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class ScenarioRun:
    procs: list
    outputs: list = field(default_factory=list)

    def results(self):
        """Every RESULT record, per rank (several per rank when a scenario has phases)."""
        found = []
        for text in self.outputs:
            for line in text.splitlines():
                if line.startswith("RESULT "):
                    found.append(json.loads(line[len("RESULT "):]))
        return found

    def by_rank(self, phase=None):
        return {r["rank"]: r for r in self.results() if r.get("phase") == phase}

    def every_rank(self, world, phase=None):
        """by_rank(), once each of the `world` ranks has reported: a rank that died before its
        report (a crash, an exit) fails the test by name, with the exit codes and the output,
        instead of leaving a loop over the reports with nothing to check."""
        got = self.by_rank(phase)
        missing = [r for r in range(world) if r not in got]
        assert not missing, (f"ranks {missing} reported nothing (exit codes "
                             f"{[p.returncode for p in self.procs]}); output:\n"
                             + "\n".join(self.outputs))
        return got


def start(name, world, extra_env=None, timeout_s=3.0, stdin=False):
    """stdin=True: each rank's stdin is a pipe the test can write to (proc.stdin)."""
    port = free_port()
    procs = []
    for rank in range(world):
        env = dict(os.environ)
        env.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   RING_TEST_TIMEOUT_S=str(timeout_s), PYTHONUNBUFFERED="1")
        env.update(extra_env or {})
        procs.append(subprocess.Popen([sys.executable, os.path.join(HERE, "fault_scenarios.py"), name],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      stdin=subprocess.PIPE if stdin else None, text=True))
    return ScenarioRun(procs)


def finish(run, limit_s):
    """Waits for every rank; kills all and fails if the scenario outlives limit_s (a hang)."""
    deadline = time.monotonic() + limit_s
    hung = []
    for p in run.procs:
        left = max(0.1, deadline - time.monotonic())
        try:
            out, _ = p.communicate(timeout=left)
        except subprocess.TimeoutExpired:
            hung.append(p.pid)
            p.send_signal(signal.SIGCONT)
            p.kill()
            out, _ = p.communicate()
        run.outputs.append(out or "")
    if hung:
        raise AssertionError(f"ranks (pids {hung}) hung past {limit_s} s; output:\n" + "\n".join(run.outputs))
    return run


def run_scenario(name, world, limit_s=60, extra_env=None, timeout_s=3.0):
    return finish(start(name, world, extra_env, timeout_s), limit_s)
