"""One process of test_reconfigure.py: a member of the first 3-rank group ("member", rank 0-2)
or the process that later takes the dead rank's place ("newcomer"). The processes meet on the
test's TCPStore, exchange handles there, and leave their checks there as JSON."""
import datetime
import json
import os
import sys

import torch
import torch.distributed as dist

import torch_ring_backend  # noqa: F401  (registers "ring")

TIMEOUT = datetime.timedelta(seconds=60)


def main():
    role, rank, port = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    store = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=TIMEOUT)
    checks = []

    def check(name, ok, detail=""):
        checks.append([name, bool(ok), str(detail)])

    def sum_of_ranks_plus_one(label):
        world = dist.get_world_size()
        t = torch.full((3000,), float(dist.get_rank() + 1))
        dist.all_reduce(t)
        check(f"{label}: all_reduce over {world}", bool(torch.all(t == world * (world + 1) / 2)),
              t[0].item())

    def handles_of(phase, ranks):
        store.wait([f"{phase}/{r}" for r in ranks])
        return [store.get(f"{phase}/{r}").decode() for r in ranks]

    def finish():
        store.set(f"result/{role}{rank}", json.dumps(checks))

    if role == "member":
        dist.init_process_group("ring", store=store, rank=rank, world_size=3, timeout=TIMEOUT)
        check("supports_reconfigure", dist.distributed_c10d._supports_reconfigure())
        sum_of_ranks_plus_one("first group")
        store.set(f"h0/{rank}", dist.distributed_c10d._get_reconfigure_handle())
        if rank == 2:  # the rank that is lost: gone without a goodbye
            finish()
            os._exit(0)
        # The survivors: a list of handles, ranks by position.
        dist.distributed_c10d._reconfigure(uuid=1, handles=handles_of("h0", [0, 1])).wait()
        check("survivors: rank and size", (dist.get_rank(), dist.get_world_size()) == (rank, 2),
              (dist.get_rank(), dist.get_world_size()))
        sum_of_ranks_plus_one("survivors")
        if rank == 0:  # a reused uuid is refused before anything changes
            try:
                dist.distributed_c10d._reconfigure(
                    uuid=1, handles=[dist.distributed_c10d._get_reconfigure_handle()])
                check("reused uuid refused", False, "no error")
            except RuntimeError as e:
                check("reused uuid refused", "was used before" in str(e), e)
        sum_of_ranks_plus_one("survivors after the refused reuse")
        store.set(f"h1/{rank}", dist.distributed_c10d._get_reconfigure_handle())
    else:
        dist.init_process_group("ring", store=store, rank=2, world_size=3, timeout=TIMEOUT,
                                enable_reconfigure=True)
        try:
            dist.all_reduce(torch.ones(3))
            check("a call before any reconfigure refused", False, "no error")
        except RuntimeError as e:
            check("a call before any reconfigure refused", "enable_reconfigure" in str(e), e)
        # A reconfigure whose other member never comes fails at its timeout; the calls after
        # it say so, and a later reconfigure still works.
        mine = dist.distributed_c10d._get_reconfigure_handle()
        absent = "ring:000099:no-such-host:1:-1"
        try:
            dist.distributed_c10d._reconfigure(uuid=50, handles=[mine, absent],
                                               timeout=datetime.timedelta(seconds=2)).wait()
            check("a reconfigure with an absent member fails", False, "no error")
        except RuntimeError as e:
            check("a reconfigure with an absent member fails", True, e)
        try:
            dist.all_reduce(torch.ones(3))
            check("a call after a failed reconfigure refused", False, "no error")
        except RuntimeError as e:
            check("a call after a failed reconfigure refused",
                  "reconfigure to rank 0 of 2 (uuid 50) failed" in str(e), e)
        store.set("h1/2", dist.distributed_c10d._get_reconfigure_handle())
    # Everyone: a set of handles, ranks in the order of the sorted handles (the stable ranks).
    dist.distributed_c10d._reconfigure(uuid=2, handles=set(handles_of("h1", [0, 1, 2]))).wait()
    want_rank = rank if role == "member" else 2
    check("taken back: rank and size", (dist.get_rank(), dist.get_world_size()) == (want_rank, 3),
          (dist.get_rank(), dist.get_world_size()))
    sum_of_ranks_plus_one("taken back")
    b = torch.full((100,), float(dist.get_rank()))
    dist.broadcast(b, src=2)
    check("taken back: broadcast from the newcomer", bool(torch.all(b == 2)), b[0].item())
    dist.destroy_process_group()
    finish()


if __name__ == "__main__":
    main()
