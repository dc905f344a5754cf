"""Runs of slow calls after a skew between the ranks (issue 26), per rank of one job:

    OMP_NUM_THREADS=1 torchrun --nproc_per_node=2 scripts/latency_cascades.py

Times 40 blocks of 100 back-to-back 4 KiB all_reduces on "ring", each block after 100 calls
on torch's `fake` group (which couple no ranks, so the ranks enter each ring block apart, as
after uneven work between two collectives). Prints the median call, p99 and mean over the
median, the calls over 3x the median ("slow"), how many of them were a block's first call
(that absorbs the ranks' lead) and how many were among the nine after it: a run of those is a
cascade, one rank's late call making the other's late in turn. Each call's thread (caller,
worker or waiter) comes from the flight recorder."""
import collections
import os
import statistics
import time

BLOCKS, CALLS = 40, 100
# Room in the flight recorder for every timed call (it keeps the last 64 by default); set
# before the backend reads its settings.
os.environ.setdefault("TORCH_FR_BUFFER_SIZE", str(BLOCKS * CALLS + 1000))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import torch_ring_backend  # noqa: E402
import torch.testing._internal.distributed.fake_pg  # noqa: E402,F401 - registers "fake"


def main():
    dist.init_process_group("ring")
    rank = dist.get_rank()
    fake = dist.new_group(backend="fake")
    t = torch.ones(1024)
    for _ in range(1000):
        dist.all_reduce(t)
    clock = time.perf_counter
    times = []
    for _ in range(BLOCKS):
        for _ in range(CALLS):
            dist.all_reduce(t, group=fake)
        for _ in range(CALLS):
            start = clock()
            dist.all_reduce(t)
            times.append((clock() - start) * 1e6)
    entries = [e for e in torch_ring_backend.flight_recorder() if e["collective"] == "all_reduce"]
    threads = [e["thread"] for e in entries[-len(times):]]
    med = statistics.median(times)
    slow = [i for i, x in enumerate(times) if x > 3 * med]
    p99 = sorted(times)[int(0.99 * len(times))]
    first = sum(1 for i in slow if i % CALLS == 0)
    next9 = sum(1 for i in slow if 1 <= i % CALLS <= 9)
    where = collections.Counter(threads[i] for i in slow) if len(threads) == len(times) else {}
    print(f"rank {rank}: median {med:.1f} us, p99/median {p99 / med:.1f}, "
          f"mean/median {statistics.mean(times) / med:.2f}, slow {len(slow)} "
          f"(a block's first {first}, the nine after it {next9}; ran on {dict(where)})",
          flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
