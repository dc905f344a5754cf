#!/usr/bin/env python3
"""all_reduce of the ring backend against gloo between two "hosts" whose link has delay and
loss: two network namespaces joined by the user-space link emulator of the tests
(tests/python/link_emulator.py: TUN devices and a relay process; for kernels without netem),
NPROC ranks in each, started by torchrun --nnodes=2. Needs root. Removes what it creates.

    python scripts/multihost_delay_bench.py --delay-ms 5 --loss 0.01 [-- bench arguments]

Mind what it measures: the relay is one Python process, so above a few MiB both backends run
at the relay's rate (about 0.15 GB/s busbw for two ranks here); the small sizes show latency.
"""
import argparse
import os
import subprocess
import sys
import uuid

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "python"))
from link_emulator import EmulatedLink  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay-ms", type=float, default=5.0, help="one-way delay (default 5)")
    parser.add_argument("--loss", type=float, default=0.0, help="packet loss fraction (0.01 = 1%%)")
    parser.add_argument("--nproc", type=int, default=1, help="ranks per namespace (default 1)")
    parser.add_argument("--transport", default="tcp", help="TORCH_RING_TRANSPORT (default tcp)")
    parser.add_argument("bench", nargs="*", help="arguments for torch_ring_backend.bench "
                        "(default: -b 4K -e 16M --iters 20 --collectives all_reduce)")
    args = parser.parse_args()
    bench = args.bench or ["-b", "4K", "-e", "16M", "--iters", "20", "--collectives", "all_reduce"]
    tag = uuid.uuid4().hex[:6]
    namespaces = [f"ringdelA{tag}", f"ringdelB{tag}"]
    created, link = [], None
    try:
        for ns in namespaces:
            subprocess.run(["ip", "netns", "add", ns], check=True)
            created.append(ns)
            subprocess.run(["ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"], check=True)
        link = EmulatedLink(namespaces[0], namespaces[1], args.delay_ms, args.loss)
        print(f"# {link.describe()}", flush=True)
        procs = []
        for i in range(2):
            env = dict(os.environ, TORCH_RING_TRANSPORT=args.transport,
                       GLOO_SOCKET_IFNAME=link.dev[i], OMP_NUM_THREADS="1",
                       PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
            # unshare --ipc: the two namespaces count as two hosts for the transport choice.
            cmd = ["ip", "netns", "exec", namespaces[i], "unshare", "--ipc", sys.executable, "-m",
                   "torch.distributed.run", "--nnodes=2", f"--nproc_per_node={args.nproc}",
                   "--rdzv-backend=c10d", f"--rdzv-endpoint={link.ip[0]}:29577",
                   f"--rdzv-id=ringdel{tag}", f"--rdzv-conf=is_host={1 - i}",
                   f"--local-addr={link.ip[i]}", "--max-restarts=0",
                   "-m", "torch_ring_backend.bench", *bench]
            # Host A's bench prints the table; host B's output is dropped.
            procs.append(subprocess.Popen(cmd, env=env, stdout=None if i == 0 else subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL))
        return max(p.wait() for p in procs)
    finally:
        if link is not None:
            link.close()
        for ns in created:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


if __name__ == "__main__":
    sys.exit(main())
