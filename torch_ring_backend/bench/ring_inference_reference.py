"""torch_ring_backend.inference_all_reduce as a column of torch-ring-bench (--reference
ring_inference): ring's own all_reduce called without torch.distributed's wrapper, dispatch and
Work, as DeepSpeed's inference_all_reduce is called (deepspeed_reference.py). It runs on the
same group as ring's column (the default group), so the two differ only in the way in: what
torch's c10d layer costs a call. all_reduce of CPU tensors only; other collectives refused by
name."""
import torch
import torch.distributed as dist


class RingInference:
    """measure.py asks it for a call (call_of), a barrier and the settling calls."""

    name = "ring_inference"

    def __init__(self, rank, world):
        import torch_ring_backend
        self.rank, self.world = rank, world
        self._call = torch_ring_backend.inference_all_reduce

    def call_of(self, name, case, ctx):
        """A zero-argument call of collective `name` on the case's buffers; ValueError saying why
        it has none."""
        if name != "all_reduce":
            raise ValueError(f"torch_ring_backend.inference_all_reduce is an all_reduce only, "
                             f"not {name}")
        if ctx.device.type != "cpu":
            raise ValueError("torch_ring_backend.inference_all_reduce takes CPU tensors only")
        buf, op = case.output, ctx.op
        return lambda: self._call(buf, op)

    def barrier(self):
        dist.barrier()

    def settle(self, calls):
        token = torch.zeros(256, dtype=torch.float32)
        for _ in range(calls):
            self._call(token)
