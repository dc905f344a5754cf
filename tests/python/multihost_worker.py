"""Roles of the multi-host test (test_multihost.py), run inside the network namespaces.

    worker   one rank under torchrun: all_reduces (checked against their closed form) while
             the test's stranger knocks on the closed listeners; then every collective on the
             "ring" group, compared with the same collective on a gloo group over the same
             ranks, twice. Prints "RESULT OK rank r".
    stranger connects to every address a rank's ring listened on during set-up: once every
             link is up the listener is closed, so each connect must be refused by the kernel.
             Prints "STRANGER REFUSED n/n".

Environment of the worker: RING_MH_DIR (a directory shared with the test), GLOO_SOCKET_IFNAME,
TORCH_RING_DEBUG=INFO and TORCH_RING_DEBUG_FILE=$RING_MH_DIR/ring.%r.%p.log (the worker reads
its listening address from its own log file).
"""
import os
import socket
import sys
import time


def _ring_listen_addresses(shared):
    """The addresses this rank's ring listened on during set-up, from its own log file (the
    INFO line "TCP transport listening on ip:port (...)"), which also shows that the file
    pattern's %r and %p were expanded."""
    import re
    path = os.path.join(shared, f"ring.{os.environ['RANK']}.{os.getpid()}.log")
    with open(path) as f:
        return re.findall(r"TCP transport listening on (\S+) \(", f.read())


def _check(name, got, want):
    import torch
    if not torch.equal(got, want):
        diff = (got != want).nonzero()
        raise AssertionError(f"{name}: ring differs from the reference at {diff[:5].tolist()} "
                             f"(ring {got.flatten()[:5].tolist()}, ref {want.flatten()[:5].tolist()})")


def _collectives(gloo, rank, world, rounds_tag):
    import torch
    import torch.distributed as dist

    gen = torch.Generator().manual_seed(1234 + rank)
    # Small integers in float32: every reduction order gives the exact same result.
    for numel in (1, 1000, 65537, 1 << 20):
        for op in (dist.ReduceOp.SUM, dist.ReduceOp.MAX, dist.ReduceOp.MIN):
            x = torch.randint(-8, 8, (numel,), generator=gen).float()
            a, b = x.clone(), x.clone()
            dist.all_reduce(a, op=op)
            dist.all_reduce(b, op=op, group=gloo)
            _check(f"all_reduce {op} {numel}", a, b)
    x = torch.randint(-3, 4, (4097,), generator=gen).double()
    a, b = x.clone(), x.clone()
    dist.all_reduce(a, op=dist.ReduceOp.PRODUCT)
    dist.all_reduce(b, op=dist.ReduceOp.PRODUCT, group=gloo)
    _check("all_reduce product", a, b)
    for root in range(world):
        x = torch.randint(0, 100, (30001,), generator=gen).int()
        a, b = x.clone(), x.clone()
        dist.broadcast(a, src=root)
        dist.broadcast(b, src=root, group=gloo)
        _check(f"broadcast root {root}", a, b)
        a, b = x.clone(), x.clone()
        dist.reduce(a, dst=root)
        dist.reduce(b, dst=root, group=gloo)
        if rank == root:
            _check(f"reduce root {root}", a, b)
    # Small parts go between hosts in one direct round, large ones around a ring (auto).
    for numel in (100, 123457):
        x = torch.randint(-50, 50, (numel,), generator=gen).float()
        a = torch.empty(world * x.numel())
        b = torch.empty_like(a)
        dist.all_gather_into_tensor(a, x)
        dist.all_gather_into_tensor(b, x, group=gloo)
        _check(f"all_gather {numel}", a, b)
    lists_a = [torch.empty_like(x) for _ in range(world)]
    lists_b = [torch.empty_like(x) for _ in range(world)]
    dist.all_gather(lists_a, x)
    dist.all_gather(lists_b, x, group=gloo)
    _check("all_gather list", torch.cat(lists_a), torch.cat(lists_b))
    x = torch.randint(-50, 50, (world * 7001,), generator=gen).float()
    a = torch.empty(7001)
    dist.reduce_scatter_tensor(a, x)
    # Reference by all_reduce on gloo (gloo's reduce_scatter support varies across versions).
    full = x.clone()
    dist.all_reduce(full, group=gloo)
    _check("reduce_scatter", a, full[rank * 7001:(rank + 1) * 7001])
    x = torch.randint(0, 1000, (world * 5003,), generator=gen).long()
    a, b = torch.empty_like(x), torch.empty_like(x)
    dist.all_to_all_single(a, x)
    dist.all_to_all_single(b, x, group=gloo)
    _check("all_to_all_single", a, b)
    for root in (0, world - 1):
        x = torch.full((9999,), float(rank))
        ga = [torch.empty_like(x) for _ in range(world)] if rank == root else None
        gb = [torch.empty_like(x) for _ in range(world)] if rank == root else None
        dist.gather(x, ga, dst=root)
        dist.gather(x, gb, dst=root, group=gloo)
        if rank == root:
            _check(f"gather root {root}", torch.cat(ga), torch.cat(gb))
        parts = [torch.full((8888,), float(r * 10 + root)) for r in range(world)]
        sa, sb = torch.empty(8888), torch.empty(8888)
        dist.scatter(sa, parts if rank == root else None, src=root)
        dist.scatter(sb, parts if rank == root else None, src=root, group=gloo)
        _check(f"scatter root {root}", sa, sb)
    # Point to point across the hosts: rank 0 <-> the last rank (on the other host).
    last = world - 1
    payload = torch.arange(300000, dtype=torch.float32) + rounds_tag
    if rank == 0:
        dist.send(payload, dst=last)
        back = torch.empty_like(payload)
        dist.recv(back, src=last)
        _check("send/recv echo", back, payload * 2)
    elif rank == last:
        got = torch.empty_like(payload)
        dist.recv(got, src=0)
        dist.send(got * 2, dst=0)
    dist.barrier()


def worker():
    import datetime
    import torch
    import torch.distributed as dist
    import torch_ring_backend  # noqa: F401

    shared = os.environ["RING_MH_DIR"]
    dist.init_process_group("ring", timeout=datetime.timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    dist.barrier()  # the ring links exist now
    addresses = _ring_listen_addresses(shared)
    with open(os.path.join(shared, f"addr.{rank}.tmp"), "w") as f:
        f.write("".join(f"{rank} {a}\n" for a in addresses))
    os.rename(os.path.join(shared, f"addr.{rank}.tmp"), os.path.join(shared, f"addr.{rank}"))
    # The job keeps running while the stranger knocks: all_reduces until the test says done.
    # Nothing may open a listener before the knock: gloo's group listens on a port the kernel
    # picks (bind to port 0), and it may pick the one the ring's closed listener freed; the
    # stranger's knock would then be answered by gloo (a CI run saw this once, stop 46).
    flag = torch.zeros(1)
    deadline = time.time() + 60
    iterations = 0
    while True:
        flag.fill_(1.0 if os.path.exists(os.path.join(shared, "stranger_done")) else 0.0)
        if time.time() > deadline:
            flag.fill_(1.0)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        x = torch.full((50000,), float(rank))
        dist.all_reduce(x)
        _check("all_reduce during the attack", x, torch.full((50000,), float(sum(range(world)))))
        iterations += 1
        if flag.item() > 0:
            break
    gloo = dist.new_group(backend="gloo")
    _collectives(gloo, rank, world, 0)
    _collectives(gloo, rank, world, 1)
    print(f"RESULT OK rank {rank} ({iterations} all_reduces during the attack)", flush=True)
    dist.destroy_process_group()


def stranger(lines):
    """Connects to every address a ring listened on; counts the connects the kernel refused
    (nothing listens there any more). Each line: "<rank> <ip:port>" as the workers wrote them."""
    refused = total = 0
    for line in lines:
        rank, address = line.split()
        host, port = address.rsplit(":", 1)
        host = host.strip("[]")  # IPv6: [fd00::2]:41234
        total += 1
        try:
            socket.create_connection((host, int(port)), timeout=15).close()
            print(f"rank {rank}'s listener at {address} still accepts connections", flush=True)
        except ConnectionRefusedError:
            refused += 1
    print(f"STRANGER REFUSED {refused}/{total}", flush=True)
    return 0 if refused == total else 1


def partitioned(shared, timeout_s):
    """Runs all_reduces until the link between the hosts is cut (by the test), then reports the
    error each rank got and how long after the cut: it must be a timeout naming the peer,
    about one group timeout after the cut, never a hang."""
    import datetime
    import json
    import torch
    import torch.distributed as dist
    import torch_ring_backend  # noqa: F401

    dist.init_process_group("ring", timeout=datetime.timedelta(seconds=timeout_s))
    rank = dist.get_rank()
    x = torch.ones(1 << 16)
    dist.all_reduce(x)
    open(os.path.join(shared, f"running.{rank}"), "w").close()
    cut = os.path.join(shared, "cut")
    error, message = None, ""
    try:
        while True:
            dist.all_reduce(x)
            x.fill_(1.0)
            time.sleep(0.01)
    except Exception as e:  # noqa: BLE001 - the type is what we report
        error, message = type(e).__name__, str(e)
    since_cut = time.time() - os.path.getmtime(cut) if os.path.exists(cut) else None
    print("RESULT " + json.dumps({"rank": rank, "error": error, "message": message,
                                  "since_cut": since_cut}), flush=True)
    os._exit(0)  # no orderly shutdown: the peer is unreachable


def liveness(shared, timeout_s, late_s):
    """All_reduces of 64 KiB, each checked against its closed form, under a group timeout of
    `timeout_s`. late_s == 0: until an error (the test cuts the link or freezes a host), then
    the error and how long after the fault (the mtime of the file "fault") it came. late_s > 0:
    100 calls, the ranks of the second host sleeping late_s before the 50th (legitimately late:
    their processes, and so their links' heartbeats, live on); then an orderly end."""
    import datetime
    import json
    import torch
    import torch.distributed as dist
    import torch_ring_backend

    dist.init_process_group("ring", timeout=datetime.timedelta(seconds=timeout_s))
    rank, world = dist.get_rank(), dist.get_world_size()
    want = float(world * (world + 1) // 2)
    x = torch.empty(1 << 14)

    def one_call():
        x.fill_(float(rank + 1))
        dist.all_reduce(x)
        _check("all_reduce", x, torch.full_like(x, want))

    one_call()
    open(os.path.join(shared, f"running.{rank}"), "w").close()
    start = time.time()
    error, message = None, ""
    try:
        if late_s > 0:
            for i in range(100):
                if i == 50 and rank >= world // 2:
                    time.sleep(late_s)
                one_call()
        else:
            while True:
                one_call()
                time.sleep(0.01)
    except Exception as e:  # noqa: BLE001 - the type is what we report
        error, message = type(e).__name__, str(e)
    fault = os.path.join(shared, "fault")
    since_fault = time.time() - os.path.getmtime(fault) if os.path.exists(fault) else None
    stragglers = torch_ring_backend.straggler_report()["text"]
    result = json.dumps({"rank": rank, "error": error, "message": message,
                         "since_fault": since_fault, "took": time.time() - start,
                         "stragglers": stragglers})
    # A file of its own: the ranks of a host share one output pipe with their log lines.
    with open(os.path.join(shared, f"result.{rank}.tmp"), "w") as f:
        f.write(result)
    os.rename(os.path.join(shared, f"result.{rank}.tmp"), os.path.join(shared, f"result.{rank}"))
    print("RESULT " + result, flush=True)
    if error is None:
        dist.destroy_process_group()
        sys.exit(0)
    os._exit(0)  # no orderly shutdown: a peer is unreachable


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "liveness":
        liveness(os.environ["RING_MH_DIR"], float(sys.argv[2]), float(sys.argv[3]))
        sys.exit(0)
    if len(sys.argv) >= 2 and sys.argv[1] == "stranger":
        sys.exit(stranger([line for line in sys.stdin.read().splitlines() if line.strip()]))
    if len(sys.argv) >= 2 and sys.argv[1] == "partitioned":
        partitioned(os.environ["RING_MH_DIR"], float(sys.argv[2]))
    worker()
