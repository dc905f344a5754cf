"""send/recv with tags, isend/irecv, batch_isend_irecv ring exchanges of messages bigger than
the transport FIFO, and recv from any source. A group of one rank has no peer: worlds 2-4."""
import pytest
import torch
import torch.distributed as dist

from checks import Report, assert_reports_pass
from reference import dtype_name, payload
from test_collectives import MOVE_DTYPES

P2P_WORLDS = (2, 3, 4)
FOUR_MIB_FLOATS = 2**20  # 4 MiB of float32: more than one FIFO's worth of slots
P2P_SIZES = (0, 1, 1009, FOUR_MIB_FLOATS)


def _message(src, dst, n, dtype, tag):
    return payload(src, n, dtype, seed=(dst, tag))


def send_recv_with_tags(ctx):
    """Rank 0 and every other rank exchange a few tagged messages each way, blocking calls."""
    report = Report()
    me = ctx.rank
    peers = range(1, ctx.world) if me == 0 else [0]
    for dtype in MOVE_DTYPES:
        for peer in peers:
            # Rank 0 sends first then receives; the peer mirrors it, so blocking calls pair up.
            for tag, n in enumerate(P2P_SIZES, start=10):
                if me == 0:
                    dist.send(_message(me, peer, n, dtype, tag), dst=peer, tag=tag)
                got = torch.empty(n, dtype=dtype)
                source = dist.recv(got, src=peer, tag=tag)
                if me != 0:
                    dist.send(_message(me, peer, n, dtype, tag), dst=peer, tag=tag)
                label = f"{dtype_name(dtype)} tag {tag} n={n} from {peer}"
                report.check(label, got, _message(peer, me, n, dtype, tag), same_on_all_ranks=False)
                if source != peer:
                    report.failures.append(f"{label}: recv returned source {source}")
    return report


def isend_irecv_ring(ctx):
    """Every rank sends to its right neighbour and receives from its left, all at once."""
    report = Report()
    w, me = ctx.world, ctx.rank
    right, left = (me + 1) % w, (me - 1) % w
    works, expected = [], []
    for i, n in enumerate(P2P_SIZES):
        got = torch.empty(n)
        works.append(dist.irecv(got, src=left, tag=i))
        works.append(dist.isend(_message(me, right, n, torch.float32, i), dst=right, tag=i))
        expected.append((f"n={n} from {left}", got, _message(left, me, n, torch.float32, i)))
    for work in works:
        work.wait()
    for label, got, want in expected:
        report.check(label, got, want, same_on_all_ranks=False)
    return report


def batch_ring_exchange(ctx):
    """batch_isend_irecv in both ring directions at once with 4 MiB messages: a rank that
    blocked in its first send until the peer received would deadlock here."""
    report = Report()
    w, me = ctx.world, ctx.rank
    right, left = (me + 1) % w, (me - 1) % w
    n = FOUR_MIB_FLOATS
    from_left, from_right = torch.empty(n), torch.empty(n)
    ops = [
        dist.P2POp(dist.isend, _message(me, right, n, torch.float32, "rightward"), right),
        dist.P2POp(dist.isend, _message(me, left, n, torch.float32, "leftward"), left),
        dist.P2POp(dist.irecv, from_left, left),
        dist.P2POp(dist.irecv, from_right, right),
    ]
    for work in dist.batch_isend_irecv(ops):
        work.wait()
    report.check("from left", from_left, _message(left, me, n, torch.float32, "rightward"),
                 same_on_all_ranks=False)
    report.check("from right", from_right, _message(right, me, n, torch.float32, "leftward"),
                 same_on_all_ranks=False)
    return report


def recv_from_any_source(ctx):
    """Rank 0 receives one message from every other rank without naming the source."""
    report = Report()
    n = 1009
    if ctx.rank != 0:
        dist.send(_message(ctx.rank, 0, n, torch.int64, 0), dst=0)
        return report
    sources = []
    for _ in range(ctx.world - 1):
        got = torch.empty(n, dtype=torch.int64)
        source = dist.recv(got)
        sources.append(source)
        report.check(f"message from {source}", got, _message(source, 0, n, torch.int64, 0),
                     same_on_all_ranks=False)
    if sorted(sources) != list(range(1, ctx.world)):
        report.failures.append(f"recv returned sources {sources}")
    return report


@pytest.mark.parametrize("world", P2P_WORLDS)
def test_send_recv_with_tags(pool, world):
    assert_reports_pass(pool.run(send_recv_with_tags), f"send/recv, world {world}")


@pytest.mark.parametrize("world", P2P_WORLDS)
def test_isend_irecv_ring(pool, world):
    assert_reports_pass(pool.run(isend_irecv_ring), f"isend/irecv, world {world}")


@pytest.mark.parametrize("world", P2P_WORLDS)
def test_batch_isend_irecv_bidirectional_ring_4mib(pool, world):
    assert_reports_pass(pool.run(batch_ring_exchange), f"batch_isend_irecv, world {world}")


@pytest.mark.parametrize("world", P2P_WORLDS)
def test_recv_from_any_source(pool, world):
    assert_reports_pass(pool.run(recv_from_any_source), f"recv any source, world {world}")


def mismatched_tags(ctx):
    """Rank 0 sends with tag 3 while rank 1 receives with tag 4; then both try an all_reduce."""
    errors = {}
    try:
        if ctx.rank == 0:
            dist.send(torch.ones(8), dst=1, tag=3)
        else:
            dist.recv(torch.empty(8), src=0, tag=4)
    except RuntimeError as e:
        errors["p2p"] = str(e)
    try:
        dist.all_reduce(torch.ones(4))
    except RuntimeError as e:
        errors["all_reduce"] = str(e)
    return errors


@pytest.mark.parametrize("world", [2])
def test_mismatched_tags_fail_clearly_on_both_ranks(pool, world):
    # Sends and receives between two ranks match in posting order, so a tag mismatch is a
    # protocol error: the receiver names both tags and the group reports itself broken.
    sender, receiver = pool.run(mismatched_tags)
    assert "expected tag 4" in receiver.get("p2p", "") and "sent tag 3" in receiver["p2p"], receiver
    for rank, errors in enumerate((sender, receiver)):
        assert "tag 3" in errors.get("all_reduce", ""), f"rank {rank}: {errors}"
    # Even a broken group must shut down cleanly (destroy_process_group, no leftovers).
    pool.close()
    assert not pool.problems, pool.problems
