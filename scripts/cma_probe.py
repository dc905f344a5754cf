"""Whether a single-copy path (CMA: process_vm_readv, as Open MPI's smsc/cma) would pay on this
machine (issue 67, item 2), measured before building one: one process reads a peer's buffer
straight from the peer's memory, against the copy through shared memory ring does now (the
sender copies into a slot, the receiver copies out of it: two copies of every byte).

    python scripts/cma_probe.py [--sizes 1M,4M,16M,64M] [--repeats 20]

Prints, per size, the GB/s of: one memcpy within a process (the roofline of one copy), the
shared-memory hand-over (a child writes into a shared segment, the parent reads it out: two
copies, no waiting between them, so an upper bound of the slot path's rate), and
process_vm_readv from the child's memory into the parent's (one copy across processes). Also
whether the kernel allows it at all (ptrace permission, seccomp), which decides the fallback.
Best of --repeats for each. Prints the machine kind first (bench/machine.py).
"""
import argparse
import ctypes
import mmap
import multiprocessing as mp
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from torch_ring_backend.bench.machine import describe  # noqa: E402

libc = ctypes.CDLL(None, use_errno=True)


class IoVec(ctypes.Structure):
    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]


libc.process_vm_readv.argtypes = [ctypes.c_int, ctypes.POINTER(IoVec), ctypes.c_ulong,
                                  ctypes.POINTER(IoVec), ctypes.c_ulong, ctypes.c_ulong]
libc.process_vm_readv.restype = ctypes.c_ssize_t


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def address_of(buf):
    return ctypes.addressof(ctypes.c_char.from_buffer(buf))


def child(nbytes, conn, shared):
    """Holds a filled buffer; answers each request by filling the shared segment from it."""
    own = mmap.mmap(-1, nbytes)
    own.write(bytes(range(256)) * (nbytes // 256))
    conn.send(address_of(own))
    while conn.recv():
        start = time.perf_counter()
        ctypes.memmove(address_of(shared), address_of(own), nbytes)
        conn.send(time.perf_counter() - start)
    own.close()


def best(fn, repeats):
    return min(fn() for _ in range(repeats))


def measure(nbytes, repeats):
    shared = mmap.mmap(-1, nbytes)  # anonymous and shared: inherited by the forked child
    shared.write(b"\0" * nbytes)
    parent, there = mp.Pipe()
    proc = mp.get_context("fork").Process(target=child, args=(nbytes, there, shared))
    proc.start()
    remote = parent.recv()
    mine = mmap.mmap(-1, nbytes)
    mine.write(b"\0" * nbytes)
    src = mmap.mmap(-1, nbytes)
    src.write(b"\1" * nbytes)

    def memcpy():
        start = time.perf_counter()
        ctypes.memmove(address_of(mine), address_of(src), nbytes)
        return time.perf_counter() - start

    def handover():
        parent.send(True)
        into = parent.recv()
        start = time.perf_counter()
        ctypes.memmove(address_of(mine), address_of(shared), nbytes)
        return into + time.perf_counter() - start

    local = IoVec(address_of(mine), nbytes)
    far = IoVec(remote, nbytes)
    refused = []

    def cma():
        start = time.perf_counter()
        got = libc.process_vm_readv(proc.pid, ctypes.byref(local), 1, ctypes.byref(far), 1, 0)
        took = time.perf_counter() - start
        if got != nbytes:
            refused.append(os.strerror(ctypes.get_errno()) if got < 0 else f"read {got} bytes")
            return float("inf")
        return took

    rates = [nbytes / best(f, repeats) / 1e9 for f in (memcpy, handover, cma)]
    mine[:nbytes] = b"\0" * nbytes
    cma()  # the bytes of the last read, checked below
    ok = not refused and mine[:256] == bytes(range(256))
    parent.send(False)
    proc.join()
    return rates, (None if ok else (refused[0] if refused else "the bytes read differ"))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="1M,4M,16M,64M")
    p.add_argument("--repeats", type=int, default=20)
    args = p.parse_args()
    print(f"machine: {describe()}")
    print(f"{'bytes':>10} {'memcpy GB/s':>12} {'shm 2 copies GB/s':>18} {'CMA 1 copy GB/s':>16} "
          f"{'CMA/shm':>8}")
    for text in args.sizes.split(","):
        nbytes = parse_size(text)
        (one, two, cma), why = measure(nbytes, args.repeats)
        if why:
            print(f"{nbytes:>10} {one:>12.2f} {two:>18.2f} {'refused':>16}  ({why})")
            continue
        print(f"{nbytes:>10} {one:>12.2f} {two:>18.2f} {cma:>16.2f} {cma / two:>8.2f}")


if __name__ == "__main__":
    main()
