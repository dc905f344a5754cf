"""Where a small or large all_reduce's time goes, from ring's flight recorder: which thread ran
each call (caller, waiter, worker), the delay from issue to start and the run time, beside the
caller's own clock, optionally beside busy processes (torch-ring-bench's --load):

    python scripts/call_runners_probe.py --load cores --sizes 4096,65536,1048576 --calls 200

Two local ranks; per size 50 untimed calls, a barrier, then `calls` timed ones; the last `calls`
flight-recorder entries of that size (TORCH_FR_BUFFER_SIZE=1000) give the thread counts and the
medians. A run time close to the caller's time means the time is inside the collective's waits; a
long queue delay, in the hand-off between threads."""
import argparse
import statistics
import time

import torch
import torch.distributed as dist

from torch_ring_backend._launch import run_on_local_ranks
from torch_ring_backend.bench.load import CompetingLoad, parse_load


def rank_main(sizes, calls):
    import torch_ring_backend  # noqa: F401 - registers "ring"
    from torch_ring_backend.fr_dump import flight_recorder_dump

    torch.set_num_threads(1)
    dist.init_process_group("ring")
    out = {}
    try:
        for nbytes in sizes:
            t = torch.ones(nbytes // 4)
            for _ in range(50):
                dist.all_reduce(t)
            dist.barrier()
            times = []
            for _ in range(calls):
                start = time.perf_counter()
                dist.all_reduce(t)
                times.append((time.perf_counter() - start) * 1e6)
            entries = [e for e in flight_recorder_dump()["entries"]
                       if e["input_sizes"] and e["input_sizes"][0] == [nbytes // 4]][-calls:]
            threads = {}
            for e in entries:
                threads[e["thread_name"]] = threads.get(e["thread_name"], 0) + 1
            queued = [(e["time_discovered_started_ns"] - e["time_created_ns"]) / 1e3
                      for e in entries if e["time_discovered_started_ns"]]
            ran = [e["duration_ms"] * 1e3 for e in entries if e["duration_ms"] is not None]
            out[nbytes] = {"call_median_us": statistics.median(times),
                           "call_mean_us": sum(times) / len(times),
                           "run_median_us": statistics.median(ran),
                           "run_mean_us": sum(ran) / len(ran),
                           "queue_median_us": statistics.median(queued), "threads": threads}
    finally:
        dist.destroy_process_group()
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="4096,65536,1048576", help="bytes, comma-separated")
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--load", default="0", help="busy processes beside the ranks, or 'cores'")
    a = p.parse_args()
    sizes = [int(s) for s in a.sizes.split(",")]
    with CompetingLoad(parse_load(a.load)):
        results = run_on_local_ranks(rank_main, 2, sizes, a.calls,
                                     env={"TORCH_FR_BUFFER_SIZE": "1000", "OMP_NUM_THREADS": "1"})
    for rank, per_size in enumerate(results):
        for nbytes, r in per_size.items():
            print(f"rank {rank} {nbytes:>9} B: call median {r['call_median_us']:8.1f} us, mean "
                  f"{r['call_mean_us']:8.1f} | run median {r['run_median_us']:8.1f}, mean "
                  f"{r['run_mean_us']:8.1f} | queue median {r['queue_median_us']:6.1f} | "
                  f"{r['threads']}")


if __name__ == "__main__":
    main()
