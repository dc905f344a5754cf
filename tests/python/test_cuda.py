"""CUDA tensors on the CUDA ring kernels (skipped without a GPU or the emulated CUDA runtime).

Ranks are processes that all use cuda:0 (several ranks on ONE GPU, linked by CUDA IPC), plus
one test with threads as ranks in this process (direct pointers). Inputs are built on the GPU
by tiling a per-rank period of small integers (or random bits) whose reduction is exact in any
order, so every result is compared BITWISE with a reference computed on the CPU; a result
equal to the reference on every rank is bitwise identical across ranks. The period (1009,
prime) is not a divisor of any chunk, channel or slot size, so misplaced data shows. Random
floats, whose sums depend on the order, are compared bitwise with the same collective run by
the CPU ring over the same inputs (the kernels add in the CPU executor's order: the host-run
kernel tests prove it), and within rounding with a float64 reference.

Every test counts the calls of its ranks that ran as ring kernels and those staged through
host memory (torch_ring_backend._C.kernel_call_count / staged_call_count): a test meant for
the kernels fails if any of its kernel-path calls was staged, since every value check would
still pass while testing nothing of the kernels.

scripts/gpu_check.sh runs this file on the GPU machine; scripts/test_cuda_emulated.sh runs it in
CI over the emulated CUDA runtime, where torch's own kernels are refused: inputs are built on the
CPU and copied over, results are compared after .cpu(), and the tests that need torch's kernels
(DDP, SyncBatchNorm, nccl, a sleeping producer kernel) skip there with that reason. Its reference
is cuda_reference.py and its rank functions are in cuda_rank_checks.py, beside it.
"""
import datetime
import os
import threading
import time

# Read when the CUDA context is created, so before any test touches the GPU: streams share
# hardware queues (CUDA's default is 8; torch's pool has about 128 streams), and in the threads-
# as-ranks test one rank's blocked stream wait can sit in front of the other rank's kernel in
# the same queue (a stall until the watchdog). 32 queues (the most) make that rarer, not
# impossible: the test also enqueues both ranks' calls before either waits.
os.environ.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", "32")

import pytest  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from torch_ring_backend._launch import run_on_local_ranks

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not torch.cuda.is_available(),
        reason="needs a CUDA GPU or the emulated CUDA runtime (scripts/test_cuda_emulated.sh): "
               "torch.cuda.is_available() is False here"),
]

from cuda_rank_checks import (
    rank_against_nccl, rank_all_reduce_sweep, rank_ddp, rank_mismatch, rank_other_collectives,
    rank_staged_over_tcp, rank_stream_order, rank_sync_batch_norm, rank_timeout)
from cuda_dtype_checks import rank_wide_unsigned_float8  # noqa: E402
from cuda_reference import (  # noqa: E402
    KERNEL_COLLECTIVES, LARGE_BYTES, NEEDS_TORCH_KERNELS, TIMEOUT_S, MiB, _path_counts, on,
    on_emulated_runtime)

needs_torch_kernels = pytest.mark.skipif(on_emulated_runtime(), reason=NEEDS_TORCH_KERNELS)


# ---- tests -----------------------------------------------------------------------------------------

def _assert_paths(res, staged=0, kernels_at_least=1, kernels=None):
    """The calls of one rank ran where the test meant them to: `staged` calls through host
    memory (None: any number, but none of a kernel collective), the rest as ring kernels."""
    counted = res["paths"]
    if counted is None:  # the CPU run of the rank functions (run_on_cpu)
        return
    kernel_staged = {k: v for k, v in counted["staged_by"].items() if k in KERNEL_COLLECTIVES}
    if staged is None:
        assert not kernel_staged, f"kernel collectives were staged: {counted}"
    else:
        assert counted["staged"] == staged, (
            f"{counted['staged']} CUDA calls were staged through host memory, {staged} expected: "
            f"the kernel path was declined or skipped ({counted}); TORCH_RING_DEBUG=INFO logs why")
    if kernels is not None:
        assert counted["kernel"] == kernels, counted
    else:
        assert counted["kernel"] >= kernels_at_least, f"no ring kernel ran: {counted}"


def _no_failures(results):
    failures = [f"rank {r}: {f}" for r, res in enumerate(results) for f in res["failures"]]
    assert not failures, "\n".join(failures[:40])
    assert all(res["checked"] > 0 for res in results), "nothing was checked"
    for res in results:
        _assert_paths(res, staged=res["staged_expected"],
                      kernels=res.get("kernels_expected"),
                      kernels_at_least=0 if res.get("kernels_expected") == 0 else 1)
    for label in results[0]["digests"]:
        values = {res["digests"][label] for res in results}
        assert len(values) == 1, f"{label}: ranks hold different bits"


@needs_torch_kernels
def test_stream_order():
    for res in run_on_local_ranks(rank_stream_order, 2, timeout_s=300):
        assert all(ok for pair in res["outcomes"] for ok in pair), res
        _assert_paths(res, staged=0, kernels=6)


def test_all_reduce_every_op_and_dtype_bitwise():
    _no_failures(run_on_local_ranks(rank_all_reduce_sweep, 2, LARGE_BYTES, timeout_s=600))


def test_all_reduce_wide_unsigned_and_float8_bitwise():
    _no_failures(run_on_local_ranks(rank_wide_unsigned_float8, 2, timeout_s=600))


def test_other_collectives():
    _check_other_collectives(run_on_local_ranks(rank_other_collectives, 2, timeout_s=600))


def _check_other_collectives(results):
    _no_failures(results)
    for res in results:
        assert "different devices" in (res["errors"]["mixed devices"] or ""), res["errors"]
        assert "not contiguous" in (res["errors"]["non-contiguous"] or ""), res["errors"]


def test_timeout_fails_within_bound_and_gpu_stays_usable():
    timeout_s = 5
    r0, r1 = run_on_local_ranks(rank_timeout, 2, timeout_s, timeout_s=300)
    assert r0["error"] is not None and r0["error"][0] == "DistBackendError", r0
    for needle in ("timed out", "all_reduce", "sequence", "rank 0"):
        assert needle in r0["error"][1], r0
    assert r0["elapsed"] < timeout_s + 15, r0
    assert r0["gpu_usable"], r0
    # The collective that timed out was a kernel (the first all_reduce, then the skipped one).
    _assert_paths({"paths": r0["paths_before_next"]}, staged=0, kernels=2)
    assert r0["next"] and r0["next"][0] == "DistBackendError", r0
    assert r1["next"] and r1["next"][0] == "DistBackendError", r1


def test_size_mismatch_is_an_error_on_every_rank():
    results = run_on_local_ranks(rank_mismatch, 2, timeout_s=300)
    for res in results:
        assert res["error"] and res["error"][0] == "DistBackendError", res
        assert res["elapsed"] < 30, res
        _assert_paths(res, staged=0, kernels=2)  # the mismatch was found by the kernels
    assert any("mismatch" in res["error"][1] for res in results), results


def test_cuda_tensors_over_tcp_are_staged_and_exact():
    results = run_on_local_ranks(rank_staged_over_tcp, 2, timeout_s=300)
    _no_failures(results)  # counts: every call staged, none on the kernels


def test_cuda_tensors_with_the_kernels_off_are_staged_and_exact():
    results = run_on_local_ranks(rank_staged_over_tcp, 2, "cuda",
                                 ("TORCH_RING_CUDA_KERNELS", "0"), timeout_s=300)
    _no_failures(results)


@needs_torch_kernels
def test_sync_batch_norm_matches_one_batch_norm():
    for res in run_on_local_ranks(rank_sync_batch_norm, 2, timeout_s=300):
        assert res["out"] < 1e-4 and res["grad"] < 1e-4 and res["running_mean"] < 1e-5, res
        _assert_paths(res, staged=0)  # all_gather_into_tensor and all_reduce: kernels


def _nccl_two_ranks_on_one_gpu():
    """"" if nccl can run 2 ranks on this one GPU (NCCL 2.30 or newer, with
    NCCL_MULTI_RANK_GPU_ENABLE=1), else why not."""
    if not dist.is_nccl_available():
        return "this torch has no NCCL"
    try:
        version = torch.cuda.nccl.version()
    except Exception as e:  # noqa: BLE001
        return f"torch.cuda.nccl.version() failed: {e}"
    if tuple(version[:2]) < (2, 30):
        return (f"NCCL {'.'.join(map(str, version))} refuses two ranks on one GPU "
                f"('Duplicate GPU detected'); NCCL 2.30+ allows it with "
                f"NCCL_MULTI_RANK_GPU_ENABLE=1")
    return ""


NCCL_ENV = {"NCCL_MULTI_RANK_GPU_ENABLE": "1"}


@needs_torch_kernels
def test_ddp_two_ranks_on_one_gpu_against_gloo():
    results = run_on_local_ranks(rank_ddp, 2, "gloo", timeout_s=300)
    assert results[0]["digest"] == results[1]["digest"], "ranks' parameters differ"
    for res in results:
        # Relative to the parameters: DDP over gloo reduces in another order.
        assert res["diff"] <= 1e-5 * max(res["scale"], 1.0), res
        # DDP checks parameter shapes with a list all_gather (staged); its gradient buckets
        # and buffer broadcasts must run as kernels.
        _assert_paths(res, staged=None)


@needs_torch_kernels
def test_ddp_two_ranks_on_one_gpu_against_nccl():
    why = _nccl_two_ranks_on_one_gpu()
    if why:
        pytest.skip(why)
    results = run_on_local_ranks(rank_ddp, 2, "nccl", timeout_s=300, env=NCCL_ENV)
    for res in results:
        assert res["diff"] <= 1e-5 * max(res["scale"], 1.0), res
        _assert_paths(res, staged=None)


@needs_torch_kernels
def test_each_kernel_collective_against_nccl():
    why = _nccl_two_ranks_on_one_gpu()
    if why:
        pytest.skip(why)
    _no_failures(run_on_local_ranks(rank_against_nccl, 2, timeout_s=300, env=NCCL_ENV))


# Three and four processes time-slice one GPU (without MPS their kernels never run at once):
# slower, so they come last, with fewer sizes per (dtype, op) pair.
@pytest.mark.parametrize("world", [3, 4])
def test_all_reduce_every_op_and_dtype_bitwise_more_ranks(world):
    _no_failures(run_on_local_ranks(rank_all_reduce_sweep, world, LARGE_BYTES[:2] + (64 * MiB,),
                                    "cuda", (0, 1, 4099, 65536 + 3), timeout_s=600))


def test_other_collectives_three_ranks():
    _check_other_collectives(run_on_local_ranks(rank_other_collectives, 3, timeout_s=600))


# Last: threads as ranks share one CUDA context, the one case that can hang on a device (a
# ring kernel waits for another rank's kernel while something synchronises the device).
def test_threads_as_ranks_in_one_process():
    """Two RingBackend objects in this process, one per thread, on cuda:0: the links are
    direct pointers (an IPC handle cannot be opened by its own process)."""
    import torch_ring_backend  # noqa: F401
    from torch_ring_backend import _C

    world = 2
    store = dist.HashStore()
    backends = [None] * world
    results = [None] * world
    errors = []

    before = _path_counts()
    counts = (0, 1, 4099, 1 * MiB + 3)
    # The rank threads run no torch kernel (inputs are copies, results are read after .cpu()):
    # torch loads its kernels lazily, and the first launch of one can synchronise the context,
    # which never goes idle while a rank's ring kernel spins waiting for the other rank.
    # Both ranks have enqueued their kernel before either makes its stream wait or runs the
    # next torch kernel, so neither's queue can hold the other's kernel back.
    enqueued = threading.Barrier(world, timeout=60)

    def rank_body(rank):
        try:
            torch.cuda.set_device(0)
            backends[rank] = _C.RingBackend(dist.PrefixStore("threads", store), rank, world,
                                            datetime.timedelta(seconds=TIMEOUT_S), "threads")
            outs = []
            # Each rank thread on its own stream: on one shared (default) stream, rank 0's
            # wait() would queue rank 1's next kernel behind kernel 0, which waits for it.
            with torch.cuda.stream(torch.cuda.Stream()):
                for count in counts:
                    x = on("cuda:0", torch.full((count,), float(rank + 1)))
                    work = backends[rank].allreduce([x], dist.AllreduceOptions())
                    enqueued.wait()
                    work.wait()
                    outs.append(bool((x.cpu() == sum(range(1, world + 1))).all()))
                torch.cuda.current_stream().synchronize()
            results[rank] = outs
        except Exception as e:  # noqa: BLE001
            errors.append(f"rank {rank}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=rank_body, args=(r,)) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a rank thread hung"
    assert not errors, errors
    assert all(all(r) for r in results), results
    after = _path_counts()
    assert after[1] == before[1], f"a thread's all_reduce was staged: {before} -> {after}"
    assert after[0] - before[0] == world * 4, (before, after)
    # Together: closing is collective (each backend waits, through the store, for the other to
    # have unmapped its inbox), so shutting them down one after the other makes the first wait
    # out the whole close wait and then keep its inbox.
    started = time.monotonic()
    closers = [threading.Thread(target=b.shutdown) for b in backends]
    for t in closers:
        t.start()
    for t in closers:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in closers), "a backend's shutdown hung"
    assert time.monotonic() - started < 10, "the two backends did not close together"


def run_on_cpu(world=2):
    """The rank functions on the CPU path: a check of this file's reference logic without a GPU
    (tests/python/test_cuda_logic_on_cpu.py runs it in CI)."""
    sweep = run_on_local_ranks(rank_all_reduce_sweep, world, (1 * MiB + 12,), "cpu",
                               timeout_s=900)
    _no_failures(sweep)
    others = run_on_local_ranks(rank_other_collectives, world, "cpu", timeout_s=900)
    _no_failures(others)
    against = run_on_local_ranks(rank_against_nccl, world, "gloo", "cpu", timeout_s=900)
    _no_failures(against)
    wide = run_on_local_ranks(rank_wide_unsigned_float8, world, "cpu", timeout_s=900)
    _no_failures(wide)
    return {"checked": [r["checked"] for r in sweep + others + against + wide],
            "digests": len(sweep[0]["digests"]), "errors": [o["errors"] for o in others]}


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(pytest.main([os.path.abspath(__file__), "-v"]))
