"""Fixtures: one pool of rank processes per world size for the whole session, and the
session-end check that every rank stopped cleanly and left nothing in /dev/shm."""
import glob
import os

import pytest

from harness import Pool
SHM_PATTERN = "/dev/shm/torch_ring_*"


class Pools:
    """Pools keyed by world size (and environment), started lazily, closed at session end."""

    def __init__(self, log_dir):
        self.log_dir = log_dir
        self._pools = {}
        self.closed = []

    def get(self, world, env=None):
        key = (world, tuple(sorted((env or {}).items())))
        if key not in self._pools:
            self._pools[key] = Pool(world, env=env, log_dir=self.log_dir)
        return self._pools[key]

    def close_all(self):
        for pool in self._pools.values():
            pool.close()
            self.closed.append(pool)
        self._pools.clear()


@pytest.fixture(scope="session", autouse=True)
def pools(tmp_path_factory):
    shm_before = set(glob.glob(SHM_PATTERN))
    registry = Pools(str(tmp_path_factory.mktemp("rank_logs")))
    yield registry
    registry.close_all()
    problems = [p for pool in registry.closed for p in pool.problems]
    leaked = sorted(set(glob.glob(SHM_PATTERN)) - shm_before)
    if leaked:
        problems.append(f"shared-memory files left behind: {leaked}")
    alive = [pid for pool in registry.closed for pid in pool.started_pids if _alive(pid)]
    if alive:
        problems.append(f"rank processes still alive: {alive}")
    assert not problems, "session-end check failed:\n" + "\n".join(problems)


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture
def pool(pools, world):
    """The session's pool of `world` ranks (tests parametrize `world`)."""
    return pools.get(world)
