"""A point-to-point link between two network namespaces with delay and loss, for kernels
without netem (sch_netem): the test's "netem in user space".

Each namespace gets a TUN device; one relay process holds both devices and copies every IP
packet from one to the other after `delay_ms`, dropping a `loss` fraction of them at random.
The ranks see an ordinary routed link (10.98.x.1 <-> 10.98.x.2) whose round trip is twice the
delay and which loses packets, so TCP really retransmits and waits, as it would under netem.

    link = EmulatedLink(ns_a, ns_b, delay_ms=5, loss=0.01)
    ... ranks use link.ip[0] / link.ip[1] and interfaces link.dev[0] / link.dev[1] ...
    link.close()

Run as `python link_emulator.py relay NS_A DEV_A NS_B DEV_B DELAY_MS LOSS SEED` (the class
does that): it prints READY once both devices are attached.
"""
import ctypes
import fcntl
import heapq
import os
import random
import select
import struct
import subprocess
import sys
import time
import uuid

TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000
CLONE_NEWNET = 0x40000000
# Large packets keep the relay's per-packet cost (a Python loop) off the critical path: TCP then
# sends up to ~64 KB per segment over the link.
MTU = 65000


def _run(*cmd):
    subprocess.run(cmd, check=True, capture_output=True, text=True)


class EmulatedLink:
    def __init__(self, ns_a, ns_b, delay_ms, loss, seed=1):
        tag = uuid.uuid4().hex[:6]
        self.ns = [ns_a, ns_b]
        self.dev = [f"tra{tag}", f"trb{tag}"]
        subnet = 10 + int(tag, 16) % 200
        self.ip = [f"10.98.{subnet}.1", f"10.98.{subnet}.2"]
        self.delay_ms, self.loss = delay_ms, loss
        for ns, dev in zip(self.ns, self.dev):
            _run("ip", "netns", "exec", ns, "ip", "tuntap", "add", "dev", dev, "mode", "tun")
        self.relay = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "relay", self.ns[0], self.dev[0],
             self.ns[1], self.dev[1], str(delay_ms), str(loss), str(seed)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        line = self.relay.stdout.readline()
        if line.strip() != "READY":
            self.close()
            raise RuntimeError(f"the link relay did not start: {line}{self.relay.stdout.read()}")
        for i in range(2):
            ns, dev = self.ns[i], self.dev[i]
            _run("ip", "netns", "exec", ns, "ip", "addr", "add", self.ip[i], "peer",
                 self.ip[1 - i], "dev", dev)
            _run("ip", "netns", "exec", ns, "ip", "link", "set", dev, "mtu", str(MTU), "up")

    def describe(self):
        return (f"user-space link emulator (no netem in this kernel): delay {self.delay_ms} ms "
                f"each way, loss {self.loss:.0%}")

    def close(self):
        if self.relay.poll() is None:
            self.relay.kill()
        self.relay.wait()
        for ns, dev in zip(self.ns, self.dev):
            subprocess.run(["ip", "netns", "exec", ns, "ip", "link", "del", dev],
                           capture_output=True)


def _open_tun_in(ns, dev):
    libc = ctypes.CDLL(None, use_errno=True)
    with open(f"/var/run/netns/{ns}") as f:
        if libc.setns(f.fileno(), CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into {ns}")
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", dev.encode(), IFF_TUN | IFF_NO_PI))
    return fd


def relay(ns_a, dev_a, ns_b, dev_b, delay_ms, loss, seed):
    # The devices are created (persistent) by the parent; attaching by name needs this process
    # to be in each device's namespace in turn. The descriptors stay valid afterwards.
    fds = [_open_tun_in(ns_a, dev_a), _open_tun_in(ns_b, dev_b)]
    _relay_loop(fds, lambda fd, packet: fds[1] if fd == fds[0] else fds[0], delay_ms, loss, seed)


def _relay_loop(fds, route, delay_ms, loss, seed, rate=0.0):
    """Reads every packet of the devices `fds`, drops a `loss` fraction of them at random and
    writes each other one to route(fd, packet) (None: dropped) `delay_ms` after it arrived.

    With `rate` (bytes per second; 0: unlimited) every device is a port of that line rate in
    each direction, as a host's NIC on a store-and-forward switch: a packet first crosses its
    source's port (queued behind the packets that host sent before it), then its destination's
    port (queued behind the packets already bound there, from any host), each taking
    len / rate, and is delivered `delay_ms` after that. The queues have no bound, so nothing is
    dropped for lack of room: a sender goes at the line rate, and TCP's window decides how long
    the queue grows."""
    rng = random.Random(seed)
    delay = delay_ms / 1000.0
    due = []  # (time to deliver, order, destination fd, packet): a heap, so FIFO per port
    order = 0
    # When each port is next free, from its host to the switch and from the switch to its host.
    outbound_free = {fd: 0.0 for fd in fds}
    inbound_free = {fd: 0.0 for fd in fds}
    print("READY", flush=True)
    while True:
        timeout = max(0.0, due[0][0] - time.monotonic()) if due else 1.0
        readable, _, _ = select.select(fds, [], [], timeout)
        now = time.monotonic()
        for fd in readable:
            while True:
                try:
                    packet = os.read(fd, MTU + 100)
                except BlockingIOError:
                    break
                out = route(fd, packet)
                if out is None or rng.random() < loss:
                    continue
                at = now
                if rate > 0:
                    wire = len(packet) / rate
                    outbound_free[fd] = max(at, outbound_free[fd]) + wire
                    inbound_free[out] = max(outbound_free[fd], inbound_free[out]) + wire
                    at = inbound_free[out]
                heapq.heappush(due, (at + delay, order, out, packet))
                order += 1
        now = time.monotonic()
        while due and due[0][0] <= now:
            _, _, out, packet = heapq.heappop(due)
            try:
                os.write(out, packet)
            except (BlockingIOError, OSError):
                pass  # a full device queue drops the packet, as a real link would


class EmulatedSwitch:
    """N namespaces on one emulated switch: each gets a TUN device with address
    10.97.<subnet>.<i+1>/24, and one relay process delivers every IPv4 packet to the device of
    its destination address after `delay_ms` (so a round trip between any two hosts is twice
    the delay), dropping a `loss` fraction; with `rate_mb_s` (MB/s, 1e6 bytes; 0: unlimited)
    each host's port carries that many bytes per second each way (_relay_loop). For more than
    two hosts where the kernel has no netem (EmulatedLink joins exactly two)."""

    def __init__(self, namespaces, delay_ms, loss=0.0, seed=1, rate_mb_s=0.0):
        tag = uuid.uuid4().hex[:6]
        self.ns = list(namespaces)
        self.dev = [f"tsw{tag}{i}" for i in range(len(self.ns))]
        subnet = 10 + int(tag, 16) % 200
        self.ip = [f"10.97.{subnet}.{i + 1}" for i in range(len(self.ns))]
        self.delay_ms, self.loss, self.rate_mb_s = delay_ms, loss, rate_mb_s
        for ns, dev in zip(self.ns, self.dev):
            _run("ip", "netns", "exec", ns, "ip", "tuntap", "add", "dev", dev, "mode", "tun")
        ports = [x for trio in zip(self.ns, self.dev, self.ip) for x in trio]
        self.relay = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "switch", str(delay_ms), str(loss),
             str(seed), str(rate_mb_s), *ports],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        line = self.relay.stdout.readline()
        if line.strip() != "READY":
            self.close()
            raise RuntimeError(f"the switch relay did not start: {line}{self.relay.stdout.read()}")
        for ns, dev, ip in zip(self.ns, self.dev, self.ip):
            _run("ip", "netns", "exec", ns, "ip", "addr", "add", f"{ip}/24", "dev", dev)
            _run("ip", "netns", "exec", ns, "ip", "link", "set", dev, "mtu", str(MTU), "up")

    def describe(self):
        rate = f"{self.rate_mb_s:g} MB/s per port each way" if self.rate_mb_s else "no rate limit"
        return (f"user-space switch emulator, {len(self.ns)} hosts: delay {self.delay_ms} ms "
                f"each way, loss {self.loss:.0%}, {rate}")

    def close(self):
        EmulatedLink.close(self)


def switch(delay_ms, loss, seed, rate_mb_s, ports):
    """The switch's relay: ports is [ns, dev, ip] * N."""
    fds, by_address = [], {}
    for i in range(0, len(ports), 3):
        fd = _open_tun_in(ports[i], ports[i + 1])
        fds.append(fd)
        by_address[bytes(int(x) for x in ports[i + 2].split("."))] = fd

    def route(fd, packet):
        # IPv4 only (version nibble 4); the destination address is bytes 16-19.
        if not packet or packet[0] >> 4 != 4:
            return None
        return by_address.get(packet[16:20])

    _relay_loop(fds, route, delay_ms, loss, seed, rate_mb_s * 1e6)


if __name__ == "__main__" and sys.argv[1] == "switch":
    switch(float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]),
           sys.argv[6:])

if __name__ == "__main__" and sys.argv[1] == "relay":
    relay(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], float(sys.argv[6]),
          float(sys.argv[7]), int(sys.argv[8]))
