"""The plan each call took, in the flight recorder ("plan"), against what README's knob table
promises a user of one host: an all_reduce or all_gather whose message fits one slot and is at
most TORCH_RING_DIRECT_BYTES in all (message x (n-1)) runs in one direct round, else around the
ring (DIRECT_BYTES=0: always the ring); a direct round's message of at most TORCH_RING_LL_BYTES,
and every barrier, goes through the mailboxes (LL_BYTES=0: the FIFOs). Every call's result is
checked against its closed form in the same run, whatever plan it took."""
import pytest
import torch
import torch.distributed as dist

import torch_ring_backend

KIB = 1024
DIRECT_BYTES = 64 * KIB  # the defaults of TORCH_RING_DIRECT_BYTES and TORCH_RING_LL_BYTES
LL_BYTES = 64 * KIB


def plans_of_calls(ctx):
    """A few collectives of the sizes the table's rows meet at; each call's plan and whether its
    result is the closed form (sum over ranks r of r + 1, or the gathered ranks)."""
    n = ctx.world
    total = n * (n + 1) / 2
    out = []

    def last_plan():
        return torch_ring_backend.flight_recorder()[-1]["plan"]

    for nbytes in (4 * KIB, 40 * KIB, 16 * KIB * KIB):
        t = torch.full((nbytes // 4,), float(ctx.rank + 1))
        dist.all_reduce(t)
        out.append(("all_reduce", nbytes, last_plan(), bool(torch.all(t == total))))
    part = torch.full((256,), float(ctx.rank))
    gathered = torch.empty(256 * n)
    dist.all_gather_into_tensor(gathered, part)
    want = torch.arange(n, dtype=torch.float32).repeat_interleave(256)
    out.append(("all_gather", 1 * KIB, last_plan(), bool(torch.equal(gathered, want))))
    dist.barrier()
    out.append(("barrier", 0, last_plan(), True))
    b = torch.full((1000,), float(ctx.rank))
    dist.broadcast(b, src=0)
    out.append(("broadcast", 4000, last_plan(), bool(torch.all(b == 0))))
    return out


def direct_fits(nbytes, n, direct_bytes=DIRECT_BYTES):
    return nbytes <= 256 * KIB and nbytes * (n - 1) <= direct_bytes  # one slot: 256 KiB


@pytest.mark.parametrize("world", [2, 3])
def test_the_plan_of_each_call_is_the_one_the_knob_table_promises(pools, world):
    for rank, calls in enumerate(pools.get(world).run(plans_of_calls)):
        for name, nbytes, plan, correct in calls:
            assert correct, f"rank {rank}: {name} of {nbytes} bytes ({plan}) got a wrong result"
            if name in ("all_reduce", "all_gather"):
                want = ("direct/mailbox" if nbytes <= LL_BYTES else "direct") \
                    if direct_fits(nbytes, world) else "ring"
            elif name == "barrier":
                want = "mailbox"
            else:
                want = "ring"
            assert plan == want, f"rank {rank}, world {world}: {name} of {nbytes} bytes"


def test_without_mailboxes_the_direct_round_and_the_barrier_take_the_fifos(pools):
    calls_by_rank = pools.get(2, env={"TORCH_RING_LL_BYTES": "0"}).run(plans_of_calls)
    for rank, calls in enumerate(calls_by_rank):
        plans = {(name, nbytes): plan for name, nbytes, plan, correct in calls if correct}
        assert len(plans) == len(calls), f"rank {rank}: a wrong result: {calls}"
        assert plans[("all_reduce", 4 * KIB)] == "direct", calls
        assert plans[("all_gather", 1 * KIB)] == "direct", calls
        assert plans[("barrier", 0)] == "ring", calls


def test_without_direct_rounds_every_all_reduce_goes_around_the_ring(pools):
    calls_by_rank = pools.get(2, env={"TORCH_RING_DIRECT_BYTES": "0"}).run(plans_of_calls)
    for rank, calls in enumerate(calls_by_rank):
        plans = {(name, nbytes): plan for name, nbytes, plan, correct in calls if correct}
        assert len(plans) == len(calls), f"rank {rank}: a wrong result: {calls}"
        for nbytes in (4 * KIB, 40 * KIB, 16 * KIB * KIB):
            assert plans[("all_reduce", nbytes)] == "ring", calls
        assert plans[("all_gather", 1 * KIB)] == "ring", calls
        assert plans[("barrier", 0)] == "mailbox", calls  # the mailboxes are still there
