"""The GPU tests' reference (test_cuda.py): inputs tiled from a per-rank period of small
integers whose reduction is exact in any order, the expected result computed on the CPU, bitwise
comparison, and the count of calls that ran as ring kernels or were staged through host memory.
Kept apart from the rank functions (cuda_rank_checks.py) and the tests so that each file has one
job; all three run together, on the GPU machine as here."""
import datetime
import hashlib
import os

import torch
import torch.distributed as dist


PERIOD = 1009
FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
INTEGERS = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)
ALL_DTYPES = FLOATS + INTEGERS + (torch.bool,)
ARITHMETIC = ("SUM", "AVG", "MAX", "MIN", "PRODUCT", "PREMUL_SUM")
BITWISE = ("BAND", "BOR", "BXOR")
MiB = 1 << 20
# Element counts every (dtype, op) pair runs at: empty, tiny, below and above one slot per
# channel, not multiples of anything.
SMALL_COUNTS = (0, 1, 5, 4099, 65536 + 3)
# Bytes of the large float32 SUM all_reduces (up to 256 MiB).
LARGE_BYTES = (1 * MiB + 12, 16 * MiB, 256 * MiB)
# The tests' group timeout: a collective that hangs fails after it. scripts/gpu_check.sh sets
# 20 s, so that one hang does not eat a phase's cap of the GPU machine's minutes.
TIMEOUT_S = int(os.environ.get("TORCH_RING_TEST_TIMEOUT_S", "20"))
# torch 2.14 renamed the single-tensor collectives (the old names warn); older torch has only
# the old names.
ALL_GATHER_SINGLE = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
REDUCE_SCATTER_SINGLE = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor

# ---- reference -----------------------------------------------------------------------------------

def ops_for(dtype):
    if dtype == torch.bool:
        return ("SUM", "MAX", "MIN", "PRODUCT") + BITWISE
    return ARITHMETIC if dtype in FLOATS else ARITHMETIC + BITWISE


def factor_for(dtype):
    # Exact in every dtype: a power of two for floats, an integer for integers.
    return 0.5 if dtype in FLOATS else 3.0


def reduce_op(name, factor=None):
    if name == "PREMUL_SUM":
        return dist._make_nccl_premul_sum(factor)
    return getattr(dist.ReduceOp, name)


def period_of(rank, dtype, op, seed=0):
    """PERIOD values of `dtype` for `rank`: small integers whose sums and products stay exact
    for up to 4 ranks, or random bits for the bitwise ops and bool."""
    key = (seed * 1000003 + rank * 7919 + ALL_DTYPES.index(dtype) * 131 + hash_op(op)) % (2**31)
    g = torch.Generator().manual_seed(key)
    if dtype == torch.bool:
        return torch.randint(0, 2, (PERIOD,), generator=g).bool()
    if op in BITWISE or op == "PAYLOAD":
        if dtype in FLOATS:
            return torch.randn(PERIOD, generator=g, dtype=torch.float64).to(dtype)
        info = torch.iinfo(dtype)
        return torch.randint(info.min, info.max, (PERIOD,), generator=g, dtype=dtype)
    signed = dtype != torch.uint8
    if op == "PRODUCT":
        choices = torch.tensor([-1, 1, 2] if signed else [1, 2, 1])
        v = choices[torch.randint(0, 3, (PERIOD,), generator=g)]
    elif op in ("MAX", "MIN"):
        v = torch.randint(-5 if signed else 0, 6, (PERIOD,), generator=g)
    else:
        v = torch.randint(-3 if signed else 0, 4, (PERIOD,), generator=g)
    return v.to(dtype)


def hash_op(op):
    return int(hashlib.sha256(op.encode()).hexdigest()[:6], 16)


def expected_period(periods, op, dtype, factor=None):
    """The reduction of the ranks' periods, computed wide and rounded once."""
    world = len(periods)
    stacked = torch.stack(periods)
    if dtype == torch.bool:
        if op in ("SUM", "MAX", "BOR"):
            return stacked.any(0)
        if op in ("MIN", "PRODUCT", "BAND"):
            return stacked.all(0)
        return stacked.to(torch.int64).sum(0) % 2 == 1  # BXOR
    if op in BITWISE:
        out = periods[0].clone()
        fn = {"BAND": torch.bitwise_and, "BOR": torch.bitwise_or, "BXOR": torch.bitwise_xor}[op]
        for p in periods[1:]:
            out = fn(out, p)
        return out
    if op == "MAX":
        return stacked.amax(0)
    if op == "MIN":
        return stacked.amin(0)
    wide = torch.float64 if dtype in FLOATS else torch.int64
    w = stacked.to(wide)
    if op == "PREMUL_SUM":
        # Each contribution is scaled and stored in its dtype before the sum.
        w = (stacked.to(torch.float64) * factor).to(dtype).to(wide)
        return w.sum(0).to(dtype)
    if op == "SUM":
        return w.sum(0).to(dtype)
    if op == "PRODUCT":
        return w.prod(0).to(dtype)
    total = w.sum(0)  # AVG
    if dtype in FLOATS:
        return (total / world).to(dtype)
    return torch.div(total, world, rounding_mode="trunc").to(dtype)


def tile(period, count, device):
    """`count` values of the period, repeated: built on the CPU and copied to `device`, so that
    no torch kernel runs (on the emulated CUDA runtime none can)."""
    return period.repeat(count // PERIOD + 1)[:count].contiguous().to(device)


def on(device, cpu_tensor):
    """`cpu_tensor` copied to `device`: how a test makes a CUDA tensor without a torch kernel."""
    return cpu_tensor.contiguous().to(device)


def on_emulated_runtime():
    """Whether torch runs over this project's emulated CUDA runtime
    (scripts/test_cuda_emulated.sh), where torch's own kernels cannot run."""
    return torch.cuda.is_available() and torch.cuda.get_device_name(0).startswith(
        "Emulated CUDA device")


NEEDS_TORCH_KERNELS = ("needs torch's own CUDA kernels, which the emulated CUDA runtime refuses; "
                       "runs on a GPU (scripts/gpu_check.sh)")


def same_bits(got, want):
    if got.dtype != want.dtype or got.shape != want.shape:
        return False
    if got.dtype == torch.bool:
        return torch.equal(got, want)
    as_int = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[got.element_size()]
    return torch.equal(got.view(as_int), want.view(as_int))


def first_difference(got, want):
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"got {got.dtype} {tuple(got.shape)}, want {want.dtype} {tuple(want.shape)}"
    bad = (got != want)
    if got.dtype != torch.bool and got.is_floating_point():
        bad |= torch.signbit(got) != torch.signbit(want)
    idx = bad.nonzero()
    if idx.numel() == 0:
        return "bit patterns differ (NaN payloads?)"
    i = int(idx[0][0])
    return (f"{int(bad.sum())} of {got.numel()} differ; first at {i}: got {got[i].item()!r}, "
            f"want {want[i].item()!r}")


def digest(t):
    flat = t.detach().contiguous().view(-1).cpu()
    return hashlib.sha1(flat.view(torch.uint8).numpy().tobytes()).hexdigest()


class Report:
    def __init__(self):
        self.failures = []
        self.digests = {}
        self.checked = 0

    def check(self, label, got, want):
        # Compared on the CPU: no torch kernel runs on a device for the comparison.
        got, want = got.cpu(), want.cpu()
        self.checked += 1
        if not same_bits(got, want):
            self.failures.append(f"{label}: {first_difference(got, want)}")

    def as_dict(self):
        return {"failures": self.failures, "digests": self.digests, "checked": self.checked}


def join(timeout_s=60, device=0, set_device=True):
    """Joins the group with every rank on cuda:`device` (set as the current device unless
    `set_device` is False); returns rank, world, the device."""
    if set_device:
        torch.cuda.set_device(device)
    dist.init_process_group("ring", timeout=datetime.timedelta(seconds=timeout_s))
    return dist.get_rank(), dist.get_world_size(), torch.device("cuda", device)


def _setup(timeout_s=TIMEOUT_S, device="cuda"):
    """Joins the group; every rank uses cuda:0. device="cpu" runs the same checks on the CPU
    path, which is how the reference logic of this file is checked on a machine without a GPU
    (python -c "import test_cuda as t; print(t.run_on_cpu())" from tests/python)."""
    if device == "cuda":
        return join(timeout_s)
    dist.init_process_group("ring", timeout=datetime.timedelta(seconds=timeout_s))
    return dist.get_rank(), dist.get_world_size(), torch.device("cpu")


def device_usable(dev):
    """Whether the device still works: a round trip of copies, and on a GPU a kernel too."""
    values = torch.arange(4.0)
    if not torch.equal(on(dev, values).cpu(), values):
        return False
    return on_emulated_runtime() or torch.ones(4, device=dev).sum().item() == 4


def _sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize()


# The collectives that have a ring kernel: on a group whose links have peer memory, none of
# their CUDA calls may be staged.
KERNEL_COLLECTIVES = ("all_reduce", "broadcast", "all_gather_into_tensor", "reduce_scatter_tensor")


def _path_counts():
    """(kernel calls, {collective: staged calls}) of this process so far."""
    from torch_ring_backend import _C
    return _C.kernel_call_count(), dict(_C.staged_calls())


class PathCounter:
    """The calls a rank function made on each path between its creation and done()."""

    def __init__(self, dev):
        self.cuda = dev.type == "cuda"
        self.start = _path_counts()

    def done(self):
        if not self.cuda:
            return None
        kernel, staged = _path_counts()
        by = {k: v - self.start[1].get(k, 0) for k, v in staged.items()
              if v != self.start[1].get(k, 0)}
        return {"kernel": kernel - self.start[0], "staged": sum(by.values()), "staged_by": by}


def _random_floats(rank, count, dtype, seed):
    g = torch.Generator().manual_seed(seed * 7919 + rank * 31 + count)
    return torch.randn(count, generator=g, dtype=torch.float64).to(dtype)


def _check_against_cpu_ring(rep, label, gpu_result, cpu_inputs_op):
    """`cpu_inputs_op()` runs the same collective on the CPU ring and returns its result."""
    want = cpu_inputs_op()
    rep.check(f"{label}: the CPU ring's bits", gpu_result.cpu(), want)
