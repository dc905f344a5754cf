"""Two "hosts" on one machine: network namespaces joined by a veth pair, two ranks in each,
started by torchrun with --nnodes=2 and the c10d rendezvous. Ranks in one namespace share
memory; between the namespaces the ring runs over TCP (each torchrun also gets its own IPC
namespace, so that the ranks see two different hosts). Every collective is compared with gloo
over the same ranks, once on a clean link and once under netem delay and loss, while a stranger
on host B knocks on every address a ring listened on during set-up: the listeners are closed
once the links are up, so every knock must be refused, and the job goes on. (Strangers during
set-up - wrong key, wrong source address, duplicates, floods - are tested in
tests/cpp/test_tcp_strangers.cc.) The ranks log to per-rank files (TORCH_RING_DEBUG_FILE).

Needs root (ip netns; tc netem, or /dev/net/tun for link_emulator.py where the kernel has no
netem); skipped with the reason where namespaces cannot be created.
Addresses 10.99.<n>.1/.2 (veth) and 10.98.<n>.1/.2 (emulated link) stay inside the namespaces
the test creates and removes.
"""
import json
import os
import socket
import subprocess
import sys
import time
import uuid

import pytest

from link_emulator import EmulatedLink

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "multihost_worker.py")
REPO = os.path.dirname(os.path.dirname(HERE))
JOB_TIMEOUT = 150


def _run(*cmd, check=True):
    return subprocess.run(cmd, check=check, capture_output=True, text=True)


class Hosts:
    """Namespaces A and B with one veth end each; removed on close()."""

    def __init__(self):
        tag = uuid.uuid4().hex[:6]
        self.ns = [f"ringA{tag}", f"ringB{tag}"]
        self.dev = [f"vra{tag}", f"vrb{tag}"]  # <= 15 characters
        subnet = 10 + int(tag, 16) % 200
        self.ip = [f"10.99.{subnet}.1", f"10.99.{subnet}.2"]
        self.created = []
        self.emulated = None
        for ns in self.ns:
            _run("ip", "netns", "add", ns)
            self.created.append(ns)
        _run("ip", "link", "add", self.dev[0], "type", "veth", "peer", "name", self.dev[1])
        for ns, dev, ip in zip(self.ns, self.dev, self.ip):
            _run("ip", "link", "set", dev, "netns", ns)
            _run("ip", "netns", "exec", ns, "ip", "addr", "add", f"{ip}/24", "dev", dev)
            _run("ip", "netns", "exec", ns, "ip", "link", "set", dev, "up")
            _run("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")

    def impair(self):
        """5 ms delay each way and 1% loss between the hosts. With netem where the kernel has
        it (on the veth pair); otherwise over a user-space emulated link (link_emulator.py: TUN
        devices and a relay process), so the delay is real either way. Returns the route the
        ranks must use: (addresses, interfaces, description)."""
        try:
            for ns, dev in zip(self.ns, self.dev):
                _run("ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", dev, "root",
                     "netem", "delay", "5ms", "loss", "1%")
            return self.ip, self.dev, "netem delay 5ms loss 1%"
        except subprocess.CalledProcessError as e:
            netem_error = e.stderr.strip()
        if not os.path.exists("/dev/net/tun"):
            pytest.skip(f"cannot impair the link: netem unavailable ({netem_error}) and no "
                        "/dev/net/tun for the user-space emulator")
        self.emulated = EmulatedLink(self.ns[0], self.ns[1], delay_ms=5, loss=0.01)
        return self.emulated.ip, self.emulated.dev, (f"{self.emulated.describe()}; netem: "
                                                     f"{netem_error}")

    def add_ipv6(self):
        """Adds fd00:99:<n>::1 and ::2 to the veth ends (no duplicate-address detection, so they
        work at once); skips the test where IPv6 is disabled. Returns the two addresses."""
        subnet = self.ip[0].split(".")[2]
        ips = [f"fd00:99:{subnet}::1", f"fd00:99:{subnet}::2"]
        for ns, dev, ip in zip(self.ns, self.dev, ips):
            r = subprocess.run(["ip", "netns", "exec", ns, "ip", "-6", "addr", "add", f"{ip}/64",
                                "dev", dev, "nodad"], capture_output=True, text=True)
            if r.returncode != 0 and "exists" not in r.stderr:
                pytest.skip(f"cannot add an IPv6 address here: {r.stderr.strip()}")
        return ips

    def clear(self):
        for ns, dev in zip(self.ns, self.dev):
            _run("ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", dev, "root", check=False)
        if self.emulated is not None:
            self.emulated.close()
            self.emulated = None

    def close(self):
        for ns in self.created:  # deleting a namespace removes its veth end (and so the pair)
            _run("ip", "netns", "del", ns, check=False)


@pytest.fixture(scope="module")
def hosts():
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root (ip netns add)")
    if subprocess.run(["which", "ip"], capture_output=True).returncode != 0:
        pytest.skip("the ip tool is missing (apt-get install -y iproute2)")
    probe = f"ringprobe{os.getpid()}"
    r = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"ip netns add is not permitted here: {r.stderr.strip()}")
    _run("ip", "netns", "del", probe)
    h = Hosts()
    try:
        yield h
    finally:
        h.close()


def _free_port_in(ns):
    # A port free inside namespace A (its own port space): ask the kernel there.
    code = "import socket; s=socket.socket(); s.bind(('',0)); print(s.getsockname()[1])"
    return int(_run("ip", "netns", "exec", ns, sys.executable, "-c", code).stdout)


def _host(ip):
    return f"[{ip}]" if ":" in ip else ip


def _host_env(route, i, shared, extra_env):
    ips, devs = route
    env = dict(os.environ)
    env.update(extra_env)
    env.update({
        "RING_MH_DIR": shared,
        "RING_MH_IP": ips[i],
        "GLOO_SOCKET_IFNAME": devs[i],
        "TORCH_RING_DEBUG": "INFO",
        "TORCH_RING_DEBUG_FILE": os.path.join(shared, "ring.%r.%p.log"),
        "PYTHONPATH": REPO + os.pathsep + env.get("PYTHONPATH", ""),
        "OMP_NUM_THREADS": "1",
    })
    return env


def _launch(hosts, route, shared, port, extra_env, nprocs=(2, 2), placement=None):
    """One torchrun agent per host (ranks numbered host by host), or, with `placement` (the
    ranks of each host), the ranks started directly with those numbers (env://), each host's
    from one shell inside one IPC namespace."""
    ips = route[0]
    procs = []
    for i in range(2):
        env = _host_env(route, i, shared, extra_env)
        if placement is not None:
            world = sum(len(p) for p in placement)
            env.update(WORLD_SIZE=str(world), MASTER_ADDR=ips[0], MASTER_PORT=str(port))
            starts = " ".join(f"RANK={r} {sys.executable} {WORKER} & p{r}=$!;"
                              for r in placement[i])
            waits = " ".join(f"wait $p{r} || rc=1;" for r in placement[i])
            cmd = ["ip", "netns", "exec", hosts.ns[i], "unshare", "--ipc", "sh", "-c",
                   f"rc=0; {starts} {waits} exit $rc"]
        else:
            cmd = ["ip", "netns", "exec", hosts.ns[i], "unshare", "--ipc",
                   sys.executable, "-m", "torch.distributed.run",
                   "--nnodes=2", f"--nproc_per_node={nprocs[i]}", "--rdzv-backend=c10d",
                   f"--rdzv-endpoint={_host(ips[0])}:{port}", f"--rdzv-id=ringmh{port}",
                   # The store's host cannot be told from its address inside a namespace.
                   f"--rdzv-conf=is_host={1 if i == 0 else 0}",
                   f"--local-addr={ips[i]}", "--max-restarts=0", WORKER]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    return procs


def _wait_for_addresses(shared, world, procs):
    deadline = time.time() + 90
    while time.time() < deadline:
        files = [os.path.join(shared, f"addr.{r}") for r in range(world)]
        if all(os.path.exists(f) for f in files):
            return [line for f in files for line in open(f).read().splitlines()]
        if any(p.poll() is not None for p in procs):
            break
        time.sleep(0.2)
    for p in procs:
        p.kill()
    out = "".join(p.communicate()[0] for p in procs)
    pytest.fail(f"the ranks did not publish their ring listeners:\n{out[-6000:]}")


def _run_job(hosts, route, tmp_path, extra_env, nprocs=(2, 2), placement=None):
    shared = str(tmp_path)
    port = _free_port_in(hosts.ns[0])
    procs = _launch(hosts, route, shared, port, extra_env, nprocs, placement)
    listeners = _wait_for_addresses(shared, 4, procs)
    # The stranger lives on host B and knocks on the listeners of both hosts.
    stranger = subprocess.run(
        ["ip", "netns", "exec", hosts.ns[1], sys.executable, WORKER, "stranger"],
        input="\n".join(listeners), capture_output=True, text=True, timeout=120)
    open(os.path.join(shared, "stranger_done"), "w").close()
    outputs = []
    for p in procs:
        try:
            outputs.append(p.communicate(timeout=JOB_TIMEOUT)[0])
        except subprocess.TimeoutExpired:
            p.kill()
            outputs.append(p.communicate()[0] + "\n[killed after the job timeout]")
    # The ranks' own log lines are in their files: one per rank (the pattern's %r and %p).
    logs = sorted(f for f in os.listdir(shared) if f.startswith("ring.") and f.endswith(".log"))
    outputs += [f"--- {name} ---\n" + open(os.path.join(shared, name)).read() for name in logs]
    text = "\n".join(outputs)
    with open(os.path.join(shared, "job.log"), "w") as f:
        f.write(text + "\n--- stranger ---\n" + stranger.stdout + stranger.stderr)
    return procs, stranger, listeners, text


def _assert_job_ok(route, procs, stranger, listeners, text):
    assert all(p.returncode == 0 for p in procs), text[-8000:]
    for r in range(4):
        assert f"RESULT OK rank {r}" in text, text[-8000:]
    # One log file per rank, and in each one TCP listener (every rank has a peer on the other
    # host), on the address of its host's link, never 0.0.0.0 or loopback.
    assert len([l for l in text.splitlines() if l.startswith("--- ring.")]) == 4, text[-8000:]
    assert sorted(int(line.split()[0]) for line in listeners) == [0, 1, 2, 3], listeners
    for line in listeners:
        assert line.split()[1].rsplit(":", 1)[0].strip("[]") in route[0], (listeners, route)
    # Once the links were up nothing listened there: every knock refused; the job went on.
    assert stranger.returncode == 0, stranger.stdout + stranger.stderr
    assert f"STRANGER REFUSED {len(listeners)}/{len(listeners)}" in stranger.stdout


def test_mixed_ring_across_two_hosts(hosts, tmp_path):
    route = (hosts.ip, hosts.dev)
    result = _run_job(hosts, route, tmp_path, {})
    _assert_job_ok(route, *result)
    text = result[3]
    # Shared memory inside a host, TCP between them, in one ring.
    assert "1 peer(s) over shared memory, 2 over TCP (transport auto)" in text, text[-8000:]
    assert ": tcp 10.99." in text and "shared memory (" in text


@pytest.mark.parametrize("algo", ["ring", "hier_direct"])
def test_every_collective_under_a_forced_all_reduce_plan(hosts, tmp_path, algo):
    # The default (auto) runs two levels with recursive doubling and a ring between the hosts
    # (test_mixed_ring_across_two_hosts: up to 256 KiB and above); here the flat ring and the
    # direct round between hosts, every size, against gloo as before.
    route = (hosts.ip, hosts.dev)
    result = _run_job(hosts, route, tmp_path, {"TORCH_RING_ALGO": algo})
    _assert_job_ok(route, *result)
    assert f"plans algo={algo} rd_bytes=262144" in result[3], result[3][-8000:]


@pytest.mark.parametrize("algo", ["auto", "hier_ring", "hier_rd"])
def test_every_collective_on_uneven_hosts(hosts, tmp_path, algo):
    # Three ranks on host A and one on host B (torchrun's agents may start different numbers of
    # workers). all_reduce under hier_ring: inside A the buffer is cut in three, between the
    # hosts into the three segments of A's chunks, each with its owner on A and host B's one
    # rank; under hier_rd (and auto's direct round for small tensors) through one rank per
    # host (executor/hier_all_reduce.h): a chain up host A, the leaders' exchange, a chain
    # down. all_gather and reduce_scatter go through one rank per host
    # (executor/hier_gather_scatter.h): under auto with the direct round between them for
    # small parts, else around a ring.
    route = (hosts.ip, hosts.dev)
    result = _run_job(hosts, route, tmp_path, {"TORCH_RING_ALGO": algo}, nprocs=(3, 1))
    _assert_job_ok(route, *result)
    assert "4 ranks, ring order 0 -> 1 -> ... -> 3 -> 0; 2 host(s)" in result[3], result[3][-8000:]
    assert "2 peer(s) over shared memory, 1 over TCP (transport auto)" in result[3]


def test_every_collective_with_the_hosts_ranks_interleaved(hosts, tmp_path):
    # Ranks 0 and 2 on host A, 1 and 3 on host B (as a scheduler may place them): the flat
    # ring would cross between the hosts at every hop; the two-level plans group the ranks by
    # host whatever their numbers (all_reduce's segments, all_gather's and reduce_scatter's
    # staging order, broadcast's chain in host order), each collective against gloo.
    route = (hosts.ip, hosts.dev)
    result = _run_job(hosts, route, tmp_path, {}, placement=([0, 2], [1, 3]))
    _assert_job_ok(route, *result)
    assert "4 ranks, ring order 0 -> 1 -> ... -> 3 -> 0; 2 host(s)" in result[3], result[3][-8000:]
    # Every rank: its host's other rank over shared memory, the other host's two over TCP.
    assert result[3].count("1 peer(s) over shared memory, 2 over TCP (transport auto)") == 4


def test_tcp_only_under_delay_and_loss(hosts, tmp_path):
    ips, devs, applied = hosts.impair()
    try:
        start = time.monotonic()
        result = _run_job(hosts, (ips, devs), tmp_path, {"TORCH_RING_TRANSPORT": "tcp"})
        took = time.monotonic() - start
    finally:
        hosts.clear()
    print(f"link impaired with: {applied}; the job took {took:.1f} s")
    _assert_job_ok((ips, devs), *result)


def test_mixed_ring_across_two_hosts_over_ipv6(hosts, tmp_path):
    ips = hosts.add_ipv6()
    route = (ips, hosts.dev)
    # The interfaces (GLOO_SOCKET_IFNAME) have both families; IPv4 would come first.
    result = _run_job(hosts, route, tmp_path, {"TORCH_RING_SOCKET_FAMILY": "AF_INET6"})
    _assert_job_ok(route, *result)
    text = result[3]
    assert "1 peer(s) over shared memory, 2 over TCP (transport auto)" in text, text[-8000:]
    assert f": tcp [{ips[0]}]:" in text or f": tcp [{ips[1]}]:" in text, text[-8000:]


def test_a_cut_link_fails_every_rank_at_its_timeout_naming_the_peer(hosts, tmp_path):
    # One rank per host, started directly (torchrun's agents would themselves wait on the cut
    # rendezvous store). The link is cut silently (packets dropped, no reset), as when a
    # switch or cable fails. With the links' liveness off (TORCH_RING_LINK_SILENCE_MS=0, what
    # gloo does) nothing but the group timeout notices it; with it on, test_link_liveness.py.
    timeout_s = 5
    shared = str(tmp_path)
    port = _free_port_in(hosts.ns[0])
    procs = []
    for i in range(2):
        env = dict(os.environ, RANK=str(i), WORLD_SIZE="2", MASTER_ADDR=hosts.ip[0],
                   MASTER_PORT=str(port), RING_MH_DIR=shared, TORCH_RING_TRANSPORT="tcp",
                   TORCH_RING_LINK_SILENCE_MS="0",
                   PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""),
                   OMP_NUM_THREADS="1")
        procs.append(subprocess.Popen(
            ["ip", "netns", "exec", hosts.ns[i], "unshare", "--ipc", sys.executable, WORKER,
             "partitioned", str(timeout_s)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    rules = []
    try:
        deadline = time.time() + 60
        while not all(os.path.exists(os.path.join(shared, f"running.{r}")) for r in range(2)):
            assert time.time() < deadline and all(p.poll() is None for p in procs), \
                "".join(p.communicate()[0] for p in procs)
            time.sleep(0.1)
        time.sleep(0.3)
        open(os.path.join(shared, "cut"), "w").close()
        for ns, peer in zip(hosts.ns, reversed(hosts.ip)):
            for chain, flag in (("INPUT", "-s"), ("OUTPUT", "-d")):
                rule = [chain, flag, peer, "-j", "DROP"]
                _run("ip", "netns", "exec", ns, "iptables", "-I", *rule)
                rules.append((ns, rule))
        outputs = []
        for p in procs:
            try:
                outputs.append(p.communicate(timeout=timeout_s + 60)[0])
            except subprocess.TimeoutExpired:
                p.kill()
                outputs.append(p.communicate()[0] + "\n[hung: killed]")
    finally:
        for ns, rule in rules:
            _run("ip", "netns", "exec", ns, "iptables", "-D", *rule, check=False)
        for p in procs:
            if p.poll() is None:
                p.kill()
    text = "\n".join(outputs)
    results = {}
    for line in text.splitlines():
        if line.startswith("RESULT "):
            r = json.loads(line[len("RESULT "):])
            results[r["rank"]] = r
    assert sorted(results) == [0, 1], text[-6000:]
    for rank, r in results.items():
        assert r["error"] == "DistBackendError", r
        assert "timed out" in r["message"] and f"rank {1 - rank}" in r["message"], r
        assert "network between the two hosts is down" in r["message"], r
        assert timeout_s - 1 <= r["since_cut"] <= timeout_s + 10, r
