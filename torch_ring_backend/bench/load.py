"""--load N: a fixed competing load for the length of a sweep, so that backends are compared as
they run in real jobs, whose cores are shared (data loaders, the autograd engine, a tokenizer):
N processes that each keep one core busy, started before the ranks' first call and stopped after
the last (the MPI ranks' too). Every backend of the run meets the same load.

Each load process is a plain Python loop of arithmetic (no system calls, no memory traffic
beyond its cache), at the default priority: what the scheduler must share a core with. It
checks now and then that the process that started it is alive and ends when it is not, so that
a benchmark killed mid-sweep leaves nothing spinning behind."""
import os
import subprocess
import sys

# Checks the parent every million additions (a few milliseconds): an orphan ends quickly.
_SPIN = """
import os
parent = os.getppid()
while os.getppid() == parent:
    x = 0
    for i in range(1000000):
        x += i
"""


def parse_load(text):
    """'0'..'N' or 'cores' (one per CPU this process may use) -> number of load processes."""
    if text == "cores":
        return len(os.sched_getaffinity(0))
    value = int(text)
    if value < 0:
        raise ValueError(f"--load must be 0 or more, or 'cores', got {text!r}")
    return value


class CompetingLoad:
    """`with CompetingLoad(n):` n busy processes for the length of the block (n = 0: none)."""

    def __init__(self, processes):
        self.processes = processes
        self._running = []

    def __enter__(self):
        for _ in range(self.processes):
            self._running.append(subprocess.Popen([sys.executable, "-c", _SPIN],
                                                  stdin=subprocess.DEVNULL))
        return self

    def __exit__(self, *exc):
        for proc in self._running:
            proc.kill()
        for proc in self._running:
            proc.wait()
        self._running = []
        return False

    def alive(self):
        """How many of the load processes are still running (all of them, unless one was
        killed from outside: the run's metadata reports it)."""
        return sum(proc.poll() is None for proc in self._running)
