"""torch_ring_backend: the "ring" backend for torch.distributed.

Importing this package registers the backend name "ring" for cpu and cuda tensors:

    import torch_ring_backend  # noqa: F401
    torch.distributed.init_process_group("ring")
"""
import datetime

import torch
import torch.distributed as dist

from . import _C
from ._version import __version__

__all__ = ["__version__", "flight_recorder", "BACKEND_NAME"]

BACKEND_NAME = "ring"


def _create_backend(dist_backend_opts, pg_options):
    timeout = dist_backend_opts.timeout
    if not isinstance(timeout, datetime.timedelta):
        timeout = datetime.timedelta(seconds=float(timeout))
    group_id = getattr(dist_backend_opts, "group_id", "") or "default"
    return _C.RingBackend(
        dist_backend_opts.store,
        dist_backend_opts.group_rank,
        dist_backend_opts.group_size,
        timeout,
        str(group_id),
    )


def _register():
    if hasattr(dist.Backend, BACKEND_NAME.upper()):
        return  # already registered (module imported twice under different names)
    dist.Backend.register_backend(
        BACKEND_NAME, _create_backend, extended_api=True, devices=["cpu", "cuda"]
    )


def flight_recorder(group=None, device="cpu"):
    """The last collectives of `group` on this rank (oldest first), as a list of dicts with
    seq, collective, detail, state (queued/running/completed/failed), times and error."""
    pg = group if group is not None else dist.group.WORLD
    backend = pg._get_backend(torch.device(device))
    # TORCH_DISTRIBUTED_DEBUG=DETAIL wraps every backend in a checking wrapper: look inside.
    backend = getattr(backend, "wrapped_pg", backend)
    if not isinstance(backend, _C.RingBackend):
        raise ValueError(f"the {device} backend of this group is {type(backend).__name__}, not ring")
    return backend.flight_recorder()


_register()
