"""How much one TCP connection between two processes carries on this machine, against several
in parallel (issue 27: "several TCP connections per peer pair where one does not fill the
link"). Both directions at once, as a ring's step sends and receives at the same time.

    python scripts/tcp_streams_bench.py --streams 1,2,4 --mib 512 --repeats 3

Two processes on loopback; each opens k connections to the other's listener and, over all k,
sends --mib MiB to it while receiving as much from it (one thread per connection and
direction, sendall/recv_into of 4 MiB, TCP_NODELAY, as the transport sets). Prints the rate
in each direction, GB/s, per repeat and their median. Compare with the ring's own TCP
transport at world 2 (torch-ring-bench with TORCH_RING_TRANSPORT=tcp): if one connection here
is already as fast as several, a second connection per peer has nothing to add on this link.
"""
import argparse
import multiprocessing as mp
import socket
import statistics
import threading
import time

CHUNK = 4 << 20


def _send(conn, nbytes, start):
    buf = memoryview(bytearray(CHUNK))
    start.wait()
    left = nbytes
    while left > 0:
        n = min(left, CHUNK)
        conn.sendall(buf[:n])
        left -= n


def _recv(conn, nbytes):
    buf = memoryview(bytearray(CHUNK))
    left = nbytes
    while left > 0:
        got = conn.recv_into(buf, min(left, CHUNK))
        if got == 0:
            raise RuntimeError(f"peer closed with {left} bytes still to come")
        left -= got


def _side(listener_port, peer_port, streams, nbytes, ready, result):
    """One process: accept `streams` connections from the peer, open as many to it, then
    send and receive nbytes in all over them, and report the seconds it took."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", listener_port))
    srv.listen(streams)
    ready.wait()
    out = []
    for _ in range(streams):
        c = socket.create_connection(("127.0.0.1", peer_port))
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        out.append(c)
    inc = [srv.accept()[0] for _ in range(streams)]
    share = nbytes // streams
    start = threading.Barrier(2 * streams + 1)
    threads = [threading.Thread(target=_send, args=(c, share, start)) for c in out]
    threads += [threading.Thread(target=lambda c=c: (start.wait(), _recv(c, share)))
                for c in inc]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    result.put(time.perf_counter() - t0)
    for c in out + inc:
        c.close()
    srv.close()


def run_once(streams, nbytes, base_port):
    ctx = mp.get_context("spawn")
    ready, result = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_side, args=(base_port, base_port + 1, streams, nbytes, ready,
                                             result)),
             ctx.Process(target=_side, args=(base_port + 1, base_port, streams, nbytes, ready,
                                             result))]
    for p in procs:
        p.start()
    seconds = max(result.get(timeout=300), result.get(timeout=300))
    for p in procs:
        p.join(timeout=60)
    return nbytes / seconds / 1e9


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", default="1,2,4")
    ap.add_argument("--mib", type=int, default=512, help="bytes each way per run, in MiB")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--port", type=int, default=29870)
    args = ap.parse_args(argv)
    nbytes = args.mib << 20
    print("connections  GB/s each way (per repeat)  median")
    port = args.port
    counts = [int(s) for s in args.streams.split(",")]
    rates = {k: [] for k in counts}
    # Repeats alternate between the counts, so that a change of the machine's pace in the
    # middle of the run falls on every count alike.
    for _ in range(args.repeats):
        for k in counts:
            rates[k].append(run_once(k, nbytes, port))
            port += 2
    for k in counts:
        figures = ", ".join(f"{r:.2f}" for r in rates[k])
        print(f"{k:11d}  {figures:28s}  {statistics.median(rates[k]):.2f}")


if __name__ == "__main__":
    main()
