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


def tags_as_torch_defines_them(ctx):
    """A receive takes the oldest message from its source with its tag, on "ring" as on gloo
    (which the same calls run against in this case): out of order, interleaved with other
    tags, some messages several FIFOs long."""
    report = Report()
    if ctx.rank > 1:
        return report
    # (tag, elements) in the order rank 0 sends; rank 1 posts its receives in another order.
    sends = [(5, 3), (6, 300000), (5, 70000), (7, 1), (6, 9), (5, 2)]
    posts = [7, 6, 6, 5, 5, 5]
    results = {}
    for name, group in (("ring", None), ("gloo", ctx.gloo)):
        if ctx.rank == 0:
            works = [dist.isend(torch.full((n,), float(10 * i + tag)), dst=1, tag=tag, group=group)
                     for i, (tag, n) in enumerate(sends)]
            for w in works:
                w.wait()
            continue
        # The k-th receive of a tag gets the k-th message of that tag, whatever the order.
        by_tag = {}
        for i, (tag, n) in enumerate(sends):
            by_tag.setdefault(tag, []).append((i, n))
        bufs, works, want = [], [], []
        for tag in posts:
            i, n = by_tag[tag].pop(0)
            buf = torch.empty(n)
            bufs.append(buf)
            want.append(torch.full((n,), float(10 * i + tag)))
            works.append(dist.irecv(buf, src=0, tag=tag, group=group))
        for w in works:
            w.wait()
        results[name] = bufs
        for k, (buf, expected) in enumerate(zip(bufs, want)):
            report.check(f"{name}: receive {k} (tag {posts[k]})", buf, expected,
                         same_on_all_ranks=False)
    if ctx.rank == 1:
        for k, (a, b) in enumerate(zip(results["ring"], results["gloo"])):
            report.check(f"receive {k} as gloo", a, b, same_on_all_ranks=False)
    # The case from torch's own tests: tags 1 and 2 sent, received 2 then 1.
    if ctx.rank == 0:
        dist.send(torch.tensor([1.0]), dst=1, tag=1)
        dist.send(torch.tensor([2.0]), dst=1, tag=2)
    else:
        a, b = torch.zeros(1), torch.zeros(1)
        w2 = dist.irecv(b, src=0, tag=2)
        w1 = dist.irecv(a, src=0, tag=1)
        w2.wait()
        w1.wait()
        report.check("tag 2 first, then tag 1", torch.cat([a, b]), torch.tensor([1.0, 2.0]),
                     same_on_all_ranks=False)
    return report


@pytest.mark.parametrize("world", P2P_WORLDS)
def test_receives_match_their_tags_as_on_gloo(pool, world):
    assert_reports_pass(pool.run(tags_as_torch_defines_them), f"tags, world {world}")


def any_source_with_tags(ctx):
    """Every other rank sends to rank 0 twice, tags 1 then 0; rank 0 first receives every tag-0
    message from any source, then every tag-1 one: each receive gets a tag-0 (then tag-1)
    message, and together they come from every other rank (as on gloo)."""
    report = Report()
    me, w = ctx.rank, ctx.world
    for name, group in (("ring", None), ("gloo", ctx.gloo)):
        if me != 0:
            # isend: gloo's blocking send would wait for its receive, which comes later here.
            works = [dist.isend(torch.tensor([float(me), 1.0]), dst=0, tag=1, group=group),
                     dist.isend(torch.tensor([float(me), 0.0]), dst=0, tag=0, group=group)]
            for work in works:
                work.wait()
            continue
        for tag in (0, 1):
            seen = []
            for _ in range(w - 1):
                buf = torch.zeros(2)
                src = dist.recv(buf, tag=tag, group=group)
                seen.append((src, int(buf[0]), int(buf[1])))
            report.check(f"{name}: tag {tag} from every rank",
                         torch.tensor(sorted(s[0] for s in seen)), torch.arange(1, w),
                         same_on_all_ranks=False)
            report.check(f"{name}: tag {tag} messages only, from the rank named",
                         torch.tensor([s[0] == s[1] and s[2] == tag for s in seen]),
                         torch.ones(w - 1, dtype=torch.bool), same_on_all_ranks=False)
    return report


@pytest.mark.parametrize("world", P2P_WORLDS)
def test_recv_from_any_source_with_tags(pool, world):
    assert_reports_pass(pool.run(any_source_with_tags), f"any source with tags, world {world}")


def wrong_size_for_a_tag(ctx):
    """Rank 0 sends 8 elements with tag 3; rank 1 receives 6 with tag 3: the receive fails
    naming both sizes, and the group reports itself broken on both ranks."""
    errors = {}
    try:
        if ctx.rank == 0:
            dist.send(torch.ones(8), dst=1, tag=3)
        else:
            dist.recv(torch.empty(6), src=0, tag=3)
    except RuntimeError as e:
        errors["p2p"] = str(e)
    try:
        dist.all_reduce(torch.ones(4))
    except RuntimeError as e:
        errors["all_reduce"] = str(e)
    return errors


@pytest.mark.parametrize("world", [2])
def test_a_receive_of_the_wrong_size_fails_clearly_on_both_ranks(pool, world):
    sender, receiver = pool.run(wrong_size_for_a_tag)
    assert "of 24 bytes (tag 3)" in receiver.get("p2p", "") and "sent 32 bytes" in receiver["p2p"], receiver
    for rank, errors in enumerate((sender, receiver)):
        assert "sent 32 bytes" in errors.get("all_reduce", ""), f"rank {rank}: {errors}"
    # Even a broken group must shut down cleanly (destroy_process_group, no leftovers).
    pool.close()
    assert not pool.problems, pool.problems
