"""The CUDA ring kernels' memory ordering under stress: ranks as threads of one process on one
device (their kernels run at the same time, unlike ranks as processes, which time-slice the GPU
and drain its memory traffic at every switch), the smallest FIFO (TORCH_RING_CUDA_SLOTS=2 and
256-byte slots, so every slot is reused many times within a call and across calls), and calls
whose every element depends on the call's index, the element's position and the rank. A
missing fence shows as a stale payload: the slot's previous message, or another call's, whose
values differ here (with constant inputs a stale slot holds the right bits). Each call is
checked bitwise against the closed form, computed on the CPU (small integers: exact in any
order).

    python tests/python/cuda_ordering_stress.py --world 2 --calls 300

Run by tests/python/test_cuda_ordering_stress.py (over the emulated CUDA runtime in CI: host
kernels on host threads) and by scripts/gpu_check.sh's stress phase on a GPU. Prints one line
per world and exits non-zero naming the first call, rank and element that differ.
"""
import argparse
import datetime
import os
import sys
import threading
import time

# Set before torch_ring_backend reads its knobs (once per process): the smallest FIFO.
os.environ.setdefault("TORCH_RING_CUDA_SLOTS", "2")
os.environ.setdefault("TORCH_RING_CUDA_SLOT_BYTES", "256")
# Every stream in use on its own hardware queue (see tests/python/test_cuda.py).
os.environ.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", "32")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

# Element counts of the calls, in turn: one element, less than a slot, a slot's worth and one
# more across the channels, many FIFO rounds per channel, and an odd count that leaves every
# channel a different tail.
COUNTS = (1, 63, 16 * 64 + 1, 16 * 2 * 64 * 5 + 7, 20011)


def inputs(call, rank, count):
    i = torch.arange(count, dtype=torch.int64)
    # Small integers (-254..254): sums of up to 4 ranks exact in float32, and no two
    # consecutive calls, neighbouring elements or ranks alike.
    return (((call * 37 + i * 11 + rank * 101) % 509) - 254).to(torch.float32)


def expected(call, world, count):
    return sum(inputs(call, r, count) for r in range(world))


def stress(world, calls, timeout_s):
    import torch_ring_backend  # noqa: F401
    from torch_ring_backend import _C

    store = dist.HashStore()
    backends = [None] * world
    failures = []
    enqueued = threading.Barrier(world, timeout=timeout_s)
    kernels_before = _C.kernel_call_count()

    def rank_body(rank):
        try:
            torch.cuda.set_device(0)
            backends[rank] = _C.RingBackend(dist.PrefixStore(f"stress{world}", store), rank, world,
                                            datetime.timedelta(seconds=timeout_s), f"stress{world}")
            with torch.cuda.stream(torch.cuda.Stream()):
                for call in range(calls):
                    count = COUNTS[call % len(COUNTS)]
                    x = inputs(call, rank, count).to("cuda:0")
                    work = backends[rank].allreduce([x], dist.AllreduceOptions())
                    # Every rank has enqueued its kernel before any makes its stream wait or
                    # copies back: no rank's queue holds another's kernel behind its own.
                    enqueued.wait()
                    work.wait()
                    got = x.cpu().view(torch.int32)
                    want = expected(call, world, count).view(torch.int32)
                    if not torch.equal(got, want):
                        bad = int((got != want).nonzero()[0])
                        failures.append(
                            f"world {world}, call {call} ({count} elements), rank {rank}: element "
                            f"{bad} is {got.view(torch.float32)[bad].item()}, expected "
                            f"{want.view(torch.float32)[bad].item()}")
                        enqueued.abort()
                        return
                torch.cuda.current_stream().synchronize()
        except threading.BrokenBarrierError:
            pass
        except Exception as e:  # noqa: BLE001
            failures.append(f"world {world}, rank {rank}: {type(e).__name__}: {e}")
            enqueued.abort()

    started = time.monotonic()
    threads = [threading.Thread(target=rank_body, args=(r,)) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=timeout_s * 4)
    hung = [r for r, t in enumerate(threads) if t.is_alive()]
    if hung:
        failures.append(f"world {world}: rank thread(s) {hung} still running after "
                        f"{timeout_s * 4} s")
    kernels = _C.kernel_call_count() - kernels_before
    closers = [threading.Thread(target=b.shutdown) for b in backends if b is not None]
    for t in closers:
        t.start()
    for t in closers:
        t.join(timeout=60)
    elapsed = time.monotonic() - started
    if not failures and kernels != world * calls:
        failures.append(f"world {world}: {kernels} ring kernel calls, {world * calls} expected "
                        "(calls were staged through host memory: TORCH_RING_DEBUG=INFO says why)")
    verdict = "FAILED" if failures else "ok"
    print(f"ordering stress, world {world}: {calls} calls per rank, {kernels} ring kernels, "
          f"slots {os.environ['TORCH_RING_CUDA_SLOTS']} x {os.environ['TORCH_RING_CUDA_SLOT_BYTES']}"
          f" B, {elapsed:.1f} s: {verdict}", flush=True)
    return failures


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--world", default="2,4", help="world sizes, comma-separated (default 2,4)")
    p.add_argument("--calls", type=int, default=300)
    p.add_argument("--timeout", type=int, default=int(os.environ.get("TORCH_RING_TEST_TIMEOUT_S",
                                                                      "20")))
    args = p.parse_args()
    if not torch.cuda.is_available():
        print("ordering stress: no CUDA device (neither a GPU nor the emulated runtime)")
        return 2
    print(f"ordering stress on {torch.cuda.get_device_name(0)}", flush=True)
    failures = []
    for world in (int(w) for w in args.world.split(",")):
        failures += stress(world, args.calls, args.timeout)
    for f in failures:
        print(f"  {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
