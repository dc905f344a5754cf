"""ring's flight recorders in torch's dump format, the one `python -m
torch.distributed.flight_recorder.fr_trace` reads: a pickled dict with "version",
"pg_config" and "entries", one file per rank, holding every ring group of the process
(csrc/backend/fr_dump.cc builds it).

Each entry is one collective of one group on this rank, as ring's recorder keeps it (the last
TORCH_FR_BUFFER_SIZE per group), with torch's fields:
- the group, and collective_seq_id (the group's sequence number, counted from 1 as torch counts);
- profiling_name "ring:<collective>";
- the sizes and dtypes of its tensors;
- the state: "scheduled", "started" or "completed"; a failed collective stays "started", as torch
  leaves one that never completed;
- its creation and discovery times, and its timeout.

Dumps are written:
- by dump_flight_recorder(), on request;
- on the first failed collective of the process, when TORCH_FR_DUMP_TEMP_FILE is set, at that
  prefix followed by the global rank, as torch names its own dumps.

torch 2.15's fr_trace accepts a backend outside its own list, with a warning; torch 2.14's
refuses one. `python -m torch_ring_backend.trace DIR` reads the same files on any torch."""
import os
import pickle

import torch.distributed as dist

from . import _C


def flight_recorder_dump():
    """This rank's dump, as the dict torch's fr_trace loads."""
    return pickle.loads(_C.flight_recorder_dump_bytes())


def dump_flight_recorder(path=None):
    """Writes this rank's dump and returns its path: `path`, or TORCH_FR_DUMP_TEMP_FILE
    (torch's default /tmp/nccl_trace_rank_) followed by the global rank. Call it on every rank,
    for example where a collective's error is caught; then run `python -m
    torch_ring_backend.trace` (or torch 2.15's fr_trace) on the folder."""
    if path is None:
        path = f"{_C.knob_text_or_default('TORCH_FR_DUMP_TEMP_FILE')}{dist.get_rank()}"
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    _C.write_flight_recorder_dump(path)
    return path
