"""Roles of the multi-host test (test_multihost.py), run inside the network namespaces.

    worker   one rank under torchrun: every collective on the "ring" group, compared with the
             same collective on a gloo group over the same ranks; a stretch of all_reduces while
             the test's stranger attacks; then the collectives again. Prints "RESULT OK rank r".
    stranger connects to every rank's ring listener: a handshake with a wrong token, garbage,
             and a truncated hello. Prints "STRANGER REFUSED n/n".

Environment of the worker: RING_MH_DIR (a directory shared with the test), GLOO_SOCKET_IFNAME.
"""
import os
import socket
import struct
import sys
import time

HANDSHAKE_BYTES = 136
HANDSHAKE_MAGIC = 0x50435452
WIRE_VERSION = 1


def _listening_inodes():
    """Inodes of the TCP sockets in LISTEN state in this network namespace: port by inode."""
    ports = {}
    for path in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        with open(path) as f:
            next(f)
            for line in f:
                cols = line.split()
                local, state, inode = cols[1], cols[3], cols[9]
                if state == "0A":
                    ports[inode] = int(local.split(":")[1], 16)
    return ports


def _my_listening_ports():
    listening = _listening_inodes()
    mine = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inode = target[len("socket:["):-1]
            if inode in listening:
                mine.add(listening[inode])
    return mine


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
    x = torch.randint(-50, 50, (123457,), generator=gen).float()
    a = torch.empty(world * x.numel())
    b = torch.empty_like(a)
    dist.all_gather_into_tensor(a, x)
    dist.all_gather_into_tensor(b, x, group=gloo)
    _check("all_gather", a, b)
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
    ports = _my_listening_ports()
    ip = os.environ["RING_MH_IP"]
    group_name = getattr(dist.group.WORLD, "group_name", "0")
    with open(os.path.join(shared, f"addr.{rank}.tmp"), "w") as f:
        host = f"[{ip}]" if ":" in ip else ip
        f.write("".join(f"{rank} {group_name} {host}:{p}\n" for p in sorted(ports)))
    os.rename(os.path.join(shared, f"addr.{rank}.tmp"), os.path.join(shared, f"addr.{rank}"))
    gloo = dist.new_group(backend="gloo")
    _collectives(gloo, rank, world, 0)
    # The job keeps running while the stranger knocks: all_reduces until the test says done.
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
    _collectives(gloo, rank, world, 1)
    print(f"RESULT OK rank {rank} ({iterations} all_reduces during the attack)", flush=True)
    dist.destroy_process_group()


def _read_exactly(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _closed_by_peer(sock):
    sock.settimeout(15)
    try:
        while sock.recv(4096):
            pass
        return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


def stranger(lines):
    """Knocks on every listener three ways; counts the knocks the listener refused (closed).
    Each line: "<rank> <group name> <ip:port>" as the workers wrote them."""
    import hashlib
    refused = total = 0
    for line in lines:
        rank, group_name, address = line.split()
        host, port = address.rsplit(":", 1)
        host = host.strip("[]")  # IPv6: [fd00::2]:41234
        # 1. A well-formed hello (right group, rank and slot size: all public) claiming rank 0,
        #    then a confirm whose proof comes from a guessed token.
        group_hash = int.from_bytes(hashlib.sha256(group_name.encode()).digest()[:8], "big")
        total += 1
        with socket.create_connection((host, int(port)), timeout=15) as s:
            hello = struct.pack("<IIIiQiiq", HANDSHAKE_MAGIC, WIRE_VERSION, 1, 0, group_hash, 0,
                                int(rank), 256 * 1024)
            hello += os.urandom(32) + bytes(64)
            s.sendall(hello)
            reply = _read_exactly(s, HANDSHAKE_BYTES)
            if reply is not None:
                confirm = bytearray(reply)
                struct.pack_into("<I", confirm, 8, 3)
                confirm[104:136] = os.urandom(32)
                try:
                    s.sendall(bytes(confirm))
                except OSError:
                    pass
            refused += _closed_by_peer(s)
        # 2. Garbage; 3. a truncated hello, then end of stream.
        for junk in (b"GET / HTTP/1.1\r\nHost: ring\r\n\r\n" + os.urandom(300), hello[:50]):
            total += 1
            with socket.create_connection((host, int(port)), timeout=15) as s:
                try:
                    s.sendall(junk)
                    s.shutdown(socket.SHUT_WR)
                except OSError:
                    pass  # the listener had already closed it: refused all the same
                refused += _closed_by_peer(s)
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


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "stranger":
        sys.exit(stranger([line for line in sys.stdin.read().splitlines() if line.strip()]))
    if len(sys.argv) >= 2 and sys.argv[1] == "partitioned":
        partitioned(os.environ["RING_MH_DIR"], float(sys.argv[2]))
    worker()
