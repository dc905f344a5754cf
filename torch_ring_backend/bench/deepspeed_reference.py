"""The DeepSpeed reference (--reference deepspeed): DeepSpeed's shared-memory all_reduce for CPU
tensors (`deepspeed.comm.inference_all_reduce`, the path CPU tensor-parallel inference uses), in
ring's own ranks, on the same buffers and by the same timing rule as ring (measure.py).

It is loaded as DeepSpeed loads it: its op builder (`ShareMemCommBuilder`) compiles the op on
first use (torch's extension cache keeps it), `initialize(world, rank)` maps its workspaces, and
each call is `torch.ops.deepspeed.inference_all_reduce_`. What DeepSpeed leaves to its caller is
done here, because without it the numbers would be of a crash or of a fallback:

- `LOCAL_SIZE` is set to the world size. DeepSpeed's op maps its shared memory only where
  LOCAL_SIZE equals the world size; unset (as under torchrun) it still runs its reduction on the
  unmapped workspace and the rank dies of SIGSEGV.
- What the op does not do is refused by name before any call, so that a silent wrong answer is
  never timed: it reduces with SUM only (MAX returns the sum), float32/bfloat16/float16 only
  (other dtypes come back unchanged), all_reduce only, and bfloat16/float16 only where the CPU has
  AVX-512BW (DeepSpeed's own Python falls back to the process group there, which would be timing
  another backend).
- Its workspaces (/dev/shm/deepspeed_allreduce_buffer_<uid>_<addr>_<port>_<rank>, 66 MiB per
  rank) are never unlinked by DeepSpeed; close() removes this rank's once every rank is done.
- Its reductions are OpenMP loops: the rank runs them on OMP_NUM_THREADS threads (1 unless set,
  as torchrun sets it), through torch's OpenMP runtime, which the op shares.

The result of the first call at every size is checked against the closed form like every
backend's (#wrong column): DeepSpeed's sum is exact on the benchmark's small-integer inputs."""
import os

import torch
import torch.distributed as dist

# The dtypes DeepSpeed's kernels reduce, with the vector level (its vector_kernel_level()) each
# needs: float32 uses 256-bit AVX (1), bfloat16 and float16 AVX-512BW conversions (2).
_KERNEL_LEVEL = {torch.float32: 1, torch.bfloat16: 2, torch.float16: 2}
_SHM_PREFIX = "deepspeed_allreduce_buffer"


def build(verbose=False):
    """Compiles (first time) and loads DeepSpeed's shared-memory op; returns the module. Raises
    RuntimeError naming what is missing."""
    # DeepSpeed picks its accelerator at import; the op measured here is its CPU one whatever
    # GPU the machine has.
    os.environ["DS_ACCELERATOR"] = "cpu"
    try:
        from deepspeed.ops.op_builder.cpu import ShareMemCommBuilder
    except ImportError as e:
        raise RuntimeError(f"--reference deepspeed: cannot import DeepSpeed's op builder ({e}); "
                           "pip install deepspeed") from None
    builder = ShareMemCommBuilder()
    if not builder.is_compatible():
        raise RuntimeError("--reference deepspeed: DeepSpeed says its shared-memory op cannot be "
                           "built here (ShareMemCommBuilder.is_compatible() is False)")
    return builder.load(verbose=verbose)


def unsupported(dtype, level):
    """Why DeepSpeed's op cannot reduce `dtype` correctly on this CPU (its kernels' vector level
    `level`: vector_kernel_level()), or None. Called by its own kernel regardless, an unsupported
    dtype comes back unchanged and a bfloat16/float16 one without AVX-512BW dies of SIGILL."""
    needed = _KERNEL_LEVEL.get(dtype)
    if needed is None:
        return (f"DeepSpeed's shared-memory op returns {dtype} unchanged (float32, bfloat16 and "
                "float16 only)")
    if level < needed:
        return (f"DeepSpeed's {dtype} kernel needs {'AVX-512BW' if needed == 2 else 'AVX2'}, "
                "which this CPU lacks")
    return None


def workspace_name(rank):
    """The /dev/shm file DeepSpeed's op creates for `rank` (shm.cpp's shm_initialize)."""
    return (f"{_SHM_PREFIX}_{os.getuid()}_{os.environ.get('MASTER_ADDR', '')}_"
            f"{os.environ.get('MASTER_PORT', '')}_{rank}")


class DeepSpeedShm:
    """One rank's DeepSpeed shared-memory all_reduce, measured like a process group: measure.py
    asks it for a call (call_of), a barrier and the settling calls."""

    name = "deepspeed"

    def __init__(self, rank, world):
        self.rank, self.world = rank, world
        os.environ["LOCAL_SIZE"] = str(world)  # see the module's docstring
        torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
        module = build()
        module.initialize(world, rank)
        self.level = module.vector_kernel_level()
        self._op = torch.ops.deepspeed.inference_all_reduce_
        self._token = torch.zeros(1, dtype=torch.float32)
        self._closed = False

    def call_of(self, name, case, ctx):
        """A zero-argument call of collective `name` on the case's buffers; ValueError saying why
        DeepSpeed's op cannot do it correctly."""
        if name != "all_reduce":
            raise ValueError(f"DeepSpeed's shared-memory op has all_reduce only, not {name}")
        if ctx.op_name != "sum":
            raise ValueError(f"DeepSpeed's shared-memory op sums whatever op it is given "
                             f"({ctx.op_name.upper()} would return the sum)")
        reason = unsupported(ctx.dtype, self.level)
        if reason:
            raise ValueError(reason)
        buf = case.output
        if not buf.is_contiguous():  # the op reduces a contiguous copy and drops it
            raise ValueError("DeepSpeed's shared-memory op needs a contiguous tensor")
        return lambda: self._op(buf)

    def all_reduce_(self, tensor):
        """Sums `tensor` over the ranks in place (a model's call: scripts/tp_decode_bench.py)."""
        reason = unsupported(tensor.dtype, self.level)
        if reason or not tensor.is_contiguous():
            raise ValueError(reason or "DeepSpeed's shared-memory op needs a contiguous tensor")
        self._op(tensor)

    def barrier(self):
        """A one-element all_reduce through DeepSpeed's op: the ranks start the timed calls
        together, on the transport that is measured."""
        self._op(self._token)

    def settle(self, calls):
        token = torch.zeros(256, dtype=torch.float32)
        for _ in range(calls):
            self._op(token)

    def close(self, together):
        """Removes this rank's workspace file (once; later calls do nothing). `together`: every
        rank closes at this point, so a barrier on the default group comes first, as a late rank
        may still be opening the others' files by name; after an error a rank closes alone."""
        if self._closed:
            return
        self._closed = True
        if together and dist.is_initialized():
            dist.barrier()
        try:
            os.unlink(os.path.join("/dev/shm", workspace_name(self.rank)))
        except FileNotFoundError:
            pass
