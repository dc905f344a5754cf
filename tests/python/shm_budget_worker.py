"""Every collective on N local ranks against its closed form, with what /dev/shm had free
before the group and while it lived; run by test_shm_budget.py, inside a mount namespace whose
/dev/shm is a small tmpfs when the test can make one.

    python shm_budget_worker.py NPROC      (prints one JSON line)
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def _free_bytes():
    st = os.statvfs("/dev/shm")
    return st.f_bavail * st.f_frsize


def _after_everyone_failed(error):
    """Waits (30 s at most) until every rank has failed its set-up: rank 0's process holds
    the store the others still read."""
    import time

    folder = os.environ["SHM_BUDGET_FAILED_DIR"]
    with open(os.path.join(folder, os.environ["RANK"]), "w") as f:
        f.write(str(error))
    deadline = time.monotonic() + 30
    while len(os.listdir(folder)) < int(os.environ["WORLD_SIZE"]):
        if time.monotonic() > deadline:
            return {"waited": "not every rank failed within 30 s"}
        time.sleep(0.05)
    return {}


def every_collective():
    import torch
    import torch.distributed as dist

    import torch_ring_backend  # noqa: F401

    try:
        dist.init_process_group("ring")
    except dist.DistBackendError as e:
        return {"setup_error": str(e), **_after_everyone_failed(e)}
    r, w = dist.get_rank(), dist.get_world_size()
    failures = []

    def check(name, got, want):
        if not torch.equal(got, want):
            failures.append(f"rank {r}: {name}: got {got.flatten()[:4].tolist()}..., "
                            f"want {want.flatten()[:4].tolist()}...")

    # Sizes from one slot's worth to many slots at any geometry the fit may choose.
    for n in (3, 1000, 1 << 20):
        x = torch.full((n,), float(r + 1))
        dist.all_reduce(x)
        check(f"all_reduce SUM of {n}", x, torch.full((n,), w * (w + 1) / 2))
    x = torch.arange(70000, dtype=torch.int64) * (r + 1)
    dist.all_reduce(x, op=dist.ReduceOp.MAX)
    check("all_reduce MAX int64", x, torch.arange(70000, dtype=torch.int64) * w)
    x = torch.full((300000,), float(r)) if r == 2 else torch.zeros(300000)
    dist.broadcast(x, src=2)
    check("broadcast from 2", x, torch.full((300000,), 2.0))
    out = torch.empty(w * 50000)
    dist.all_gather_into_tensor(out, torch.full((50000,), float(r)))
    check("all_gather_into_tensor", out,
          torch.arange(w, dtype=torch.float32).repeat_interleave(50000))
    parts = [torch.empty(20000) for _ in range(w)]
    dist.all_gather(parts, torch.full((20000,), float(r)))
    check("all_gather", torch.stack(parts), torch.arange(w, dtype=torch.float32)[:, None]
          .expand(w, 20000))
    out = torch.empty(40000)
    dist.reduce_scatter_tensor(out, torch.arange(w * 40000, dtype=torch.float32))
    check("reduce_scatter_tensor", out,
          torch.arange(r * 40000, (r + 1) * 40000, dtype=torch.float32) * w)
    x = torch.full((100000,), float(r + 1))
    dist.reduce(x, dst=1)
    if r == 1:
        check("reduce to 1", x, torch.full((100000,), w * (w + 1) / 2))
    gathered = [torch.empty(30000) for _ in range(w)] if r == 0 else None
    dist.gather(torch.full((30000,), float(r)), gathered, dst=0)
    if r == 0:
        check("gather to 0", torch.stack(gathered),
              torch.arange(w, dtype=torch.float32)[:, None].expand(w, 30000))
    x = torch.empty(30000)
    dist.scatter(x, [torch.full((30000,), float(i)) for i in range(w)] if r == 3 else None,
                 src=3)
    check("scatter from 3", x, torch.full((30000,), float(r)))
    send = torch.arange(w * 25000, dtype=torch.float32) + 1000 * r
    recv = torch.empty(w * 25000)
    dist.all_to_all_single(recv, send)
    want = torch.cat([torch.arange(r * 25000, (r + 1) * 25000, dtype=torch.float32) + 1000 * i
                      for i in range(w)])
    check("all_to_all_single", recv, want)
    x = torch.empty(200000)
    ops = [dist.P2POp(dist.isend, torch.full((200000,), float(r)), (r + 1) % w),
           dist.P2POp(dist.irecv, x, (r - 1) % w)]
    for work in dist.batch_isend_irecv(ops):
        work.wait()
    check("send/recv around the ring", x, torch.full((200000,), float((r - 1) % w)))
    dist.barrier()
    free_during = _free_bytes()
    dist.barrier()
    dist.destroy_process_group()
    return {"failures": failures, "free_during": free_during}


def main():
    from torch_ring_backend._launch import run_on_local_ranks

    import tempfile

    nproc = int(sys.argv[1])
    free_before = _free_bytes()
    with tempfile.TemporaryDirectory() as failed:
        results = run_on_local_ranks(every_collective, nproc, timeout_s=240,
                                     env={"SHM_BUDGET_FAILED_DIR": failed})
    print(json.dumps({"shm_size": os.statvfs("/dev/shm").f_blocks * os.statvfs("/dev/shm")
                      .f_frsize, "free_before": free_before, "ranks": results}), flush=True)


if __name__ == "__main__":
    main()
