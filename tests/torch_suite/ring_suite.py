"""PyTorch's own distributed test suite, run against "ring".

The suite is torch/testing/_internal/distributed/distributed_test.py, shipped in the torch wheel:
`DistributedTest._DistTestBase` holds the tests, `TestDistBackend` starts WORLD_SIZE processes
per test that join BACKEND's group. Third-party backends (torch-ucc, oneCCL's bindings) run it
the same way: set BACKEND, WORLD_SIZE and TEMP_DIR, declare the backend's features in
`DistTestCases.backend_feature` before the suite is imported (its skip decorators read them at
import), and subclass both.

Many tests are gated on the backend's NAME being gloo or nccl. expectations.LIFTED lists the
ones that exercise only what "ring" supports; their gate is lifted here (the test function
itself runs unchanged). Every spawned rank imports this module again, so the registration of
"ring" and the lifted gates hold there too.
"""
import logging
import os
import tempfile

os.environ.setdefault("BACKEND", "ring")
os.environ.setdefault("WORLD_SIZE", "3")
os.environ.setdefault("TEMP_DIR", tempfile.gettempdir())
# Read once when the suite is imported; test_barrier_timeout_global re-initializes through it
# (and needs file://, a fresh file per run). Spawned ranks inherit the same value.
os.environ.setdefault("INIT_METHOD", "file://" + os.path.join(tempfile.mkdtemp(), "init"))

import torch  # noqa: E402
from torch.testing._internal.common_distributed import DistTestCases  # noqa: E402

import torch_ring_backend  # noqa: E402,F401  (registers "ring")

# What "ring" implements, as the suite's feature table names it. ("gpu": backends that serve
# GPU tensors; the suite also uses it for CPU tests of object collectives and DDP. Tests that
# need a GPU still skip without one through their own decorators.)
for _feature in ("plugin", "subgroup", "ddp", "gpu"):
    DistTestCases.backend_feature[_feature].add("ring")
if torch.cuda.is_available():
    DistTestCases.backend_feature["cuda"].add("ring")

from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest,
    TestDistBackend,
)

from expectations import LIFTED  # noqa: E402

# One line per started process is noise at this scale: keep the suite's warnings and errors.
logging.getLogger("torch.testing._internal.common_distributed").setLevel(logging.WARNING)


class TestRingBackend(TestDistBackend, DistributedTest._DistTestBase):
    """Every test of the suite, each in WORLD_SIZE fresh processes on "ring"."""

    def setUp(self):
        super().setUp()
        # Forked, not spawned: a spawned rank imports torch and the suite again (seconds of
        # CPU each, times WORLD_SIZE ranks, times hundreds of tests on two cores). The runner
        # never starts a process group or a thread pool of its own before forking. RING_SPAWN=1
        # spawns instead, as torch's own spawn variant of this suite does.
        if os.environ.get("RING_SPAWN") == "1":
            self._spawn_processes()
        else:
            self._start_processes(torch.multiprocessing.get_context("fork").Process)


def _lift(name):
    """The test `name` without its name gate: the same function, without unittest's skip mark."""
    gated = getattr(DistributedTest._DistTestBase, name)

    def lifted(self, *args, **kwargs):
        return gated(self, *args, **kwargs)

    lifted.__name__ = name
    lifted.__qualname__ = f"TestRingBackend.{name}"
    lifted.__doc__ = gated.__doc__
    return lifted


def lifted_but_not_gated():
    """Names in LIFTED whose gate is gone in this torch (so the list can be kept honest)."""
    return [n for n in LIFTED if not getattr(getattr(DistributedTest._DistTestBase, n, None),
                                             "__unittest_skip__", False)]


for _name in LIFTED:
    if hasattr(DistributedTest._DistTestBase, _name):
        setattr(TestRingBackend, _name, _lift(_name))
