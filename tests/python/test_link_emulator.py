"""The emulated switch (link_emulator.py) against what it stands for: a switch whose every host
port has a one-way delay and, when asked, a line rate in each direction.

What a real link guarantees, and what these check with closed forms:
- a TCP connect takes one round trip, so at least twice the one-way delay;
- N bytes through a port of R bytes per second take at least N / R (nothing arrives early),
  and, with the port the only limit, not much more;
- two hosts sending to one host share its port: 2N bytes in at least 2N / R; one host sending
  to two shares its own port the same way.
The lower bounds cannot fail on a slow machine; the upper bounds are loose (3x plus a second)
and only catch a rate applied twice or packets held far too long.

Needs root and /dev/net/tun, as tests/python/test_multihost.py.
"""
import os
import subprocess
import sys
import uuid

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from link_emulator import EmulatedSwitch  # noqa: E402

PORT = 29450
DELAY_MS = 2.0  # short, so that TCP's slow start does not hide the rate
RATE_MB_S = 20.0  # 20e6 bytes per second per port, each way
NBYTES = 4_000_000  # 0.2 s at the rate; about 0.04 s without it

# A receiver: accepts `peers` connections on ADDR:PORT, reads NBYTES from each, prints the
# monotonic time (the same clock in every namespace) when the last byte arrived.
RECEIVER = """
import socket, sys, time, threading
addr, port, peers, nbytes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((addr, port)); s.listen(peers); print("LISTENING", flush=True)
def drain(c):
    left = nbytes
    while left:
        left -= len(c.recv(min(left, 1 << 20)))
conns = [s.accept()[0] for _ in range(peers)]
threads = [threading.Thread(target=drain, args=(c,)) for c in conns]
[t.start() for t in threads]; [t.join() for t in threads]
print(time.monotonic(), flush=True)
"""

# A sender: connects to each ADDR:PORT (timing the connect), waits for GO on stdin, then sends
# NBYTES to each at once; prints the connect seconds and the monotonic time it started sending.
SENDER = """
import socket, sys, time, threading
port, nbytes, addrs = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
conns, connect_s = [], []
for a in addrs:
    t = time.monotonic(); conns.append(socket.create_connection((a, port)))
    connect_s.append(time.monotonic() - t)
print("CONNECTED", flush=True); sys.stdin.readline()
start = time.monotonic()
threads = [threading.Thread(target=c.sendall, args=(b"x" * nbytes,)) for c in conns]
[t.start() for t in threads]; [t.join() for t in threads]
print(min(connect_s), start, flush=True)
sys.stdin.readline()
"""


@pytest.fixture(scope="module")
def switch():
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root (ip netns add)")
    if not os.path.exists("/dev/net/tun"):
        pytest.skip("no /dev/net/tun")
    tag = uuid.uuid4().hex[:6]
    namespaces = [f"ringle{i}{tag}" for i in range(3)]
    created, sw = [], None
    try:
        for ns in namespaces:
            r = subprocess.run(["ip", "netns", "add", ns], capture_output=True, text=True)
            if r.returncode != 0:
                pytest.skip(f"ip netns add is not permitted here: {r.stderr.strip()}")
            created.append(ns)
            subprocess.run(["ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"],
                           check=True)
        sw = EmulatedSwitch(namespaces, DELAY_MS, rate_mb_s=RATE_MB_S)
        yield sw
    finally:
        if sw is not None:
            sw.close()
        for ns in created:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def _transfer(sw, senders, receivers):
    """Every host in `senders` sends NBYTES to every host in `receivers` at once. Returns the
    shortest connect time and the seconds from the first sender's start to the last byte."""
    recv = [subprocess.Popen(["ip", "netns", "exec", sw.ns[r], sys.executable, "-c", RECEIVER,
                              sw.ip[r], str(PORT), str(len(senders)), str(NBYTES)],
                             stdout=subprocess.PIPE, text=True) for r in receivers]
    send = []
    try:
        for p in recv:
            assert p.stdout.readline().strip() == "LISTENING"
        send = [subprocess.Popen(["ip", "netns", "exec", sw.ns[s], sys.executable, "-c", SENDER,
                                  str(PORT), str(NBYTES), *[sw.ip[r] for r in receivers]],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                for s in senders]
        for p in send:
            assert p.stdout.readline().strip() == "CONNECTED"
        for p in send:
            p.stdin.write("GO\n")
            p.stdin.flush()
        starts = [p.stdout.readline().split() for p in send]
        ends = [float(p.communicate(timeout=60)[0]) for p in recv]
        connect_s = min(float(s[0]) for s in starts)
        return connect_s, max(ends) - min(float(s[1]) for s in starts)
    finally:
        for p in send + recv:
            if p.poll() is None:
                p.kill()
            p.wait()


def test_a_connect_takes_a_round_trip(switch):
    connect_s, _ = _transfer(switch, [0], [1])
    assert 2 * DELAY_MS / 1e3 <= connect_s < 2 * DELAY_MS / 1e3 + 1.0, connect_s


def test_one_flow_goes_at_the_line_rate(switch):
    _, seconds = _transfer(switch, [0], [1])
    floor = NBYTES / (RATE_MB_S * 1e6)
    assert floor <= seconds < 3 * floor + 1.0, (seconds, floor)


def test_two_senders_share_the_receivers_port(switch):
    _, seconds = _transfer(switch, [0, 1], [2])
    floor = 2 * NBYTES / (RATE_MB_S * 1e6)
    assert floor <= seconds < 3 * floor + 1.0, (seconds, floor)


def test_one_sender_to_two_shares_its_own_port(switch):
    _, seconds = _transfer(switch, [0], [1, 2])
    floor = 2 * NBYTES / (RATE_MB_S * 1e6)
    assert floor <= seconds < 3 * floor + 1.0, (seconds, floor)
