"""What a group's set-up asks of the store: a number of requests per rank that does not grow
with the group. Set-up reads a key of every rank (host identity, plan settings, shared-memory
inboxes, addresses); read one by one, each is a round trip to the TCPStore server, which
answers its clients one request at a time: n requests per rank and n*n for the server (a
million at 1024 ranks). Read together (csrc/transport/store.h, Store::getAll), each batch is one
check while waiting, then one wait and one multi_get.

Each rank's store here is a counting proxy (torch's Python Store subclassing, whose wait,
check and multi_get torch calls with every key of one request) in front of a real TCPStore."""
import collections
import datetime
import os

import pytest
import torch
import torch.distributed as dist

from torch_ring_backend._launch import run_on_local_ranks


class CountingStore(dist.Store):
    """Passes every request on to `inner` and counts the requests by kind."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        self.counts = collections.Counter()

    def set(self, key, value):
        self.counts["set"] += 1
        self.inner.set(key, value)

    def get(self, key):
        self.counts["get"] += 1
        return self.inner.get(key)

    def multi_get(self, keys):
        self.counts["multi_get"] += 1
        return self.inner.multi_get(keys)

    def wait(self, keys, timeout=None):
        self.counts["wait"] += 1
        if timeout is None:
            self.inner.wait(keys)
        else:
            self.inner.wait(keys, timeout)

    def check(self, keys):
        self.counts["check"] += 1
        return self.inner.check(keys)

    def add(self, key, value):
        self.counts["add"] += 1
        return self.inner.add(key, value)

    def compare_set(self, key, expected, desired):
        self.counts["compare_set"] += 1
        return self.inner.compare_set(key, expected, desired)

    def delete_key(self, key):
        self.counts["delete_key"] += 1
        return self.inner.delete_key(key)

    def num_keys(self):
        return self.inner.num_keys()


def setup_requests(world, transport):
    """This rank's store requests from init_process_group through the first all_reduce (by
    which the group is set up), by kind; and that all_reduce's result."""
    rank = int(os.environ["RANK"])
    os.environ["TORCH_RING_TRANSPORT"] = transport
    inner = dist.TCPStore("127.0.0.1", int(os.environ["MASTER_PORT"]), world, rank == 0,
                          timeout=datetime.timedelta(seconds=60))
    store = CountingStore(inner)
    dist.init_process_group("ring", store=store, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    t = torch.full((8,), float(rank + 1))
    dist.all_reduce(t)
    counts = dict(store.counts)
    dist.barrier()  # rank 0 hosts the TCPStore: no rank leaves while another may still read
    dist.destroy_process_group()
    return {"counts": counts, "sum": t[0].item()}


def requests_by_world(transport, worlds):
    out = {}
    for world in worlds:
        results = run_on_local_ranks(setup_requests, world, world, transport, timeout_s=240)
        for res in results:
            assert res["sum"] == world * (world + 1) / 2, res
        out[world] = [res["counts"] for res in results]
    return out


# shm: every rank on this host (host identity, plans, inboxes); tcp: every rank a host of its
# own (host identity, plans, the addresses of the lower ranks).
@pytest.mark.parametrize("transport", ["shm", "tcp"])
def test_set_up_reads_the_store_the_same_number_of_times_at_every_group_size(transport):
    by_world = requests_by_world(transport, (2, 6))
    # Reads: get, wait and multi_get. (Not check: a rank polls with it while it waits for
    # ranks that start later, a number of polls that varies with the start-up of the others.)
    reads = {w: [c.get("get", 0) + c.get("wait", 0) + c.get("multi_get", 0) for c in counts]
             for w, counts in by_world.items()}
    # Read key by key, 4 more ranks add 8 reads per rank to each loop over the ranks (a wait
    # and a get per key): 24 or more. Read together, none.
    for rank in (0, 1):
        assert reads[6][rank] <= reads[2][rank] + 2, (reads, by_world)
    assert max(reads[6]) <= max(reads[2]) + 2, (reads, by_world)


def main():
    """Prints, per transport and world size, each rank's store reads during set-up and the
    requests the TCPStore server answered in all (reads, checks, sets and adds of every rank):
    python tests/python/test_setup_store.py [worlds...], by default 2 4 8."""
    import sys
    worlds = [int(w) for w in sys.argv[1:]] or [2, 4, 8]
    for transport in ("shm", "tcp"):
        for world, counts in requests_by_world(transport, worlds).items():
            reads = [c.get("get", 0) + c.get("wait", 0) + c.get("multi_get", 0) for c in counts]
            total = sum(sum(c.values()) for c in counts)
            print(f"{transport} world {world}: reads per rank {reads}, "
                  f"requests to the server in all {total}")


if __name__ == "__main__":
    main()
