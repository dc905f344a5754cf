"""Ring all_reduce on one GPU with threads as ranks (one process, so the ranks' kernels run
side by side instead of time-sliced as separate processes' kernels are without MPS): time per
call and busbw at a few sizes, against a device-to-device copy of the same bytes.

    python scripts/cuda_threads_bench.py [--worlds 2,4] [--sizes 64K,1M,64M,256M] [--iters 20]

busbw = bytes / time x 2(n-1)/n (nccl-tests); copy = bytes / time of one dst.copy_(src) of the
same bytes (each byte read once and written once). AVG keeps the all-ones buffer at one, so the
result is checked after every size.
"""
import argparse
import datetime
import threading

import torch
import torch.distributed as dist

import torch_ring_backend  # noqa: F401  (loads the extension)
from torch_ring_backend import _C
from torch_ring_backend.bench import parse_size


def copy_gbps(nbytes, iters):
    src = torch.ones(max(nbytes // 4, 1), device="cuda")
    dst = torch.empty_like(src)
    dst.copy_(src)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        dst.copy_(src)
    end.record()
    end.synchronize()
    return nbytes / (start.elapsed_time(end) / iters / 1e3) / 1e9


def warm_torch_kernels():
    """The torch kernels the rank threads use (fill, compare, all, copy) loaded on this thread
    first: torch loads a kernel lazily, and loading it can synchronise the context, which never
    goes idle while a rank's ring kernel spins waiting for the other rank."""
    x = torch.ones(4, device="cuda")
    bool((x == 1).all())
    torch.empty_like(x).copy_(x)
    torch.cuda.synchronize()


def run_world(world, sizes, iters):
    store = dist.HashStore()
    barrier = threading.Barrier(world)
    times = {n: [0.0] * world for n in sizes}
    wrong = {n: [True] * world for n in sizes}
    errors = []

    def body(rank):
        try:
            torch.cuda.set_device(0)
            backend = _C.RingBackend(dist.PrefixStore(f"bench{world}", store), rank, world,
                                     datetime.timedelta(seconds=120), f"threads{world}")
            opts = dist.AllreduceOptions()
            opts.reduceOp = dist.ReduceOp.AVG
            stream = torch.cuda.Stream()
            with torch.cuda.stream(stream):
                for nbytes in sizes:
                    x = torch.ones(nbytes // 4, device="cuda")
                    stream.synchronize()
                    # Enqueue, meet, then wait: a rank whose stream waits on its call before
                    # the other rank has enqueued its kernel can put that wait in front of the
                    # other's kernel in a hardware queue they share (torch's pool has far more
                    # streams than CUDA_DEVICE_MAX_CONNECTIONS queues), and neither ever runs.
                    for _ in range(3):
                        work = backend.allreduce([x], opts)
                        barrier.wait()
                        work.wait()
                    stream.synchronize()
                    barrier.wait()
                    start = torch.cuda.Event(enable_timing=True)
                    end = torch.cuda.Event(enable_timing=True)
                    start.record(stream)
                    works = [backend.allreduce([x], opts) for _ in range(iters)]
                    barrier.wait()
                    works[-1].wait()  # the ring runs a group's calls in order: the last ends all
                    end.record(stream)
                    end.synchronize()
                    times[nbytes][rank] = start.elapsed_time(end) / iters * 1e3  # us
                    wrong[nbytes][rank] = not bool((x == 1).all())
                    barrier.wait()
            backend.shutdown()
        except Exception as e:  # noqa: BLE001
            errors.append(f"rank {rank}: {type(e).__name__}: {e}")
            barrier.abort()

    threads = [threading.Thread(target=body, args=(r,)) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError("; ".join(errors))
    return times, wrong


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--worlds", default="2,4")
    p.add_argument("--sizes", default="64K,1M,16M,64M,256M")
    p.add_argument("--iters", type=int, default=20)
    a = p.parse_args()
    sizes = [parse_size(s) for s in a.sizes.split(",")]
    warm_torch_kernels()
    print(f"# ring all_reduce, threads as ranks on {torch.cuda.get_device_name(0)}, float32 AVG, "
          f"{a.iters} iterations per size")
    for world in (int(w) for w in a.worlds.split(",")):
        times, wrong = run_world(world, sizes, a.iters)
        factor = 2 * (world - 1) / world
        print(f"\n# world {world}")
        print(f"{'bytes':>12} {'time(us)':>10} {'busbw(GB/s)':>12} {'copy(GB/s)':>11} "
              f"{'busbw/copy':>10} {'wrong':>6}")
        for nbytes in sizes:
            us = max(times[nbytes])
            busbw = nbytes / (us / 1e6) / 1e9 * factor
            copy = copy_gbps(nbytes, a.iters)
            print(f"{nbytes:>12} {us:>10.1f} {busbw:>12.1f} {copy:>11.1f} {busbw / copy:>10.2f} "
                  f"{str(any(wrong[nbytes])):>6}")


if __name__ == "__main__":
    main()
