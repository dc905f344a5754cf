"""torch_ring_backend: the "ring" backend for torch.distributed.

Importing this package registers the backend name "ring" for cpu and cuda tensors:

    import torch_ring_backend  # noqa: F401
    torch.distributed.init_process_group("ring")
"""
import datetime
import os

import torch
import torch.distributed as dist

from ._version import __version__


def _check_built_for():
    """Refuses, in one line, a module built against another torch (it would fail to load with
    an undefined symbol)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_C.torch_version")
    try:
        with open(path) as f:
            built = f.read().strip()
    except OSError:
        return  # a build that predates the check
    if built != torch.__version__:
        raise ImportError(
            f"torch_ring_backend was built against torch {built} but torch {torch.__version__} "
            f"is installed: rebuild it with `pip install --no-build-isolation --force-reinstall "
            f".` in its source folder")


_check_built_for()
from . import _C  # noqa: E402

__all__ = ["__version__", "flight_recorder", "register", "RingOptions", "BACKEND_NAME",
           "verify_replicas", "ReplicaMismatch", "ReplicaReport", "straggler_report",
           "dump_flight_recorder", "flight_recorder_dump"]

BACKEND_NAME = "ring"


RingOptions = _C.RingOptions


def _create_backend(dist_backend_opts, pg_options):
    timeout = dist_backend_opts.timeout
    if not isinstance(timeout, datetime.timedelta):
        timeout = datetime.timedelta(seconds=float(timeout))
    group_id = getattr(dist_backend_opts, "group_id", "") or "default"
    if pg_options is not None and not isinstance(pg_options, RingOptions):
        raise TypeError(f"pg_options for the 'ring' backend must be torch_ring_backend.RingOptions, "
                        f"not {type(pg_options).__name__}")
    options = RingOptions(timeout=timeout)
    if pg_options is not None:
        options.transport = pg_options.transport
        options.slot_bytes = pg_options.slot_bytes
        options.slots = pg_options.slots
        # A timeout set in the options wins over the group's (as ProcessGroupNCCL's options do).
        if pg_options._timeout != RingOptions()._timeout:
            options._timeout = pg_options._timeout
    options.group_name = str(group_id)
    options.global_ranks_in_group = list(getattr(dist_backend_opts, "global_ranks_in_group", []))
    if getattr(dist_backend_opts, "enable_reconfigure", False):
        if not hasattr(options, "enable_reconfigure"):
            raise RuntimeError("ring: enable_reconfigure needs a build against torch 2.14 or later")
        options.enable_reconfigure = True
    return _C.RingBackend(dist_backend_opts.store, dist_backend_opts.group_rank,
                          dist_backend_opts.group_size, options)


def register():
    """Registers "ring" with torch.distributed (done on import; also the entry point that torch
    2.14 calls for an unknown backend name, so that a script need not import this package)."""
    if hasattr(dist.Backend, BACKEND_NAME.upper()):
        return  # already registered (module imported twice under different names)
    dist.Backend.register_backend(
        BACKEND_NAME, _create_backend, extended_api=True, devices=["cpu", "cuda"]
    )
    _declare_self_recording()


def _declare_self_recording():
    """torch 2.15 attaches its own flight-recorder hook to every group whose backends are not
    in distributed_c10d._FR_SELF_RECORDING_BACKENDS (gloo, legacy NCCL and XCCL record
    themselves). "ring" records every collective in its own flight recorder, so it is listed
    there: each collective is recorded once, and no call pays for torch's hook (about 2.5 us of
    a 4 KiB all_reduce's 8.5 us on torch 2.15 here: docs/observability.md).
    On torch releases without that set there is no hook, and nothing to declare."""
    listed = getattr(dist.distributed_c10d, "_FR_SELF_RECORDING_BACKENDS", None)
    if isinstance(listed, set):
        listed.add(BACKEND_NAME)


def _ring_backend_of(group, device):
    pg = group if group is not None else dist.group.WORLD
    backend = pg._get_backend(torch.device(device))
    # TORCH_DISTRIBUTED_DEBUG=DETAIL wraps every backend in a checking wrapper: look inside.
    backend = getattr(backend, "wrapped_pg", backend)
    if not isinstance(backend, _C.RingBackend):
        raise ValueError(f"the {device} backend of this group is {type(backend).__name__}, not ring")
    return backend


def straggler_report(group=None, threshold_ms=1.0, device="cpu"):
    """Which ranks of `group` the others waited for, over its last 512 collectives (ranks that
    share a host's shared memory; on other groups it covers no collective). For each rank: in
    how many collectives it issued last ("last_in"), and by how much it issued after the
    earliest rank (median_ms, p90_ms, max_ms). "stragglers" lists the ranks whose median
    lateness is at least `threshold_ms`, and "text" says it in one line. Every rank holds the
    same report; nothing is exchanged to make it. After a failure, "failure" (and the end of
    "text") names the group's first failed collective on this rank and its error: a rank that
    is gone (a dead or frozen host, a cut link) issues nothing more, so lateness alone would
    never name it. TORCH_RING_STRAGGLER_LOG_S=N logs that line
    on rank 0 every N seconds (at TORCH_RING_DEBUG=INFO)."""
    return _ring_backend_of(group, device).straggler_report(float(threshold_ms))


# The group inference_all_reduce served last, and its ring backend: a model calls it for one
# group per layer, and finding the backend (pg._get_backend) costs about a microsecond.
_last_served = (None, None)


def inference_all_reduce(tensor, op=dist.ReduceOp.SUM, group=None):
    """All-reduces the CPU tensor `tensor` in place over `group` (default: the whole world) with
    `op`, and returns once it is done: dist.all_reduce(tensor, op, group) without its Work and
    without torch.distributed's Python wrapper and dispatch, which cost a small call more than
    the collective itself. For the all_reduce of each tensor-parallel layer of a model, as
    DeepSpeed's inference_all_reduce; the call is one of the group's collectives like any other
    (its sequence, plan, flight recorder entry, errors and timeout are dist.all_reduce's). CPU
    tensors only, outside coalescing blocks (both refused by name)."""
    global _last_served
    pg = group if group is not None else dist.group.WORLD
    served, backend = _last_served
    if served is not pg:
        backend = _ring_backend_of(pg, "cpu")
        _last_served = (pg, backend)
    backend._all_reduce_now(tensor, op)


def flight_recorder(group=None, device="cpu"):
    """The last collectives of `group` on this rank (oldest first), as a list of dicts with
    seq, collective, detail, state (queued/running/completed/failed), thread (where it ran:
    "worker", the group's thread, "caller", the thread that called it, or "waiter", a thread
    that waited for it before the worker took it), times and error."""
    return _ring_backend_of(group, device).flight_recorder()


register()

from .fr_dump import dump_flight_recorder, flight_recorder_dump  # noqa: E402
from .replicas import ReplicaMismatch, ReplicaReport, verify_replicas  # noqa: E402
