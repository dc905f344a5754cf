"""torch_ring_backend.bench.channels_model (issue 72's model) against its closed forms: the
cores' term at one channel, its halving per doubling of the channels, the memory and link
bounds taking over, and busbw in the nccl-tests convention."""
import math

from torch_ring_backend.bench import channels_model as m

MIB = 1 << 20
FAST = dict(memory=1e15, link=1e15, alpha=0.0, wake=0.0)


def test_one_channel_is_the_cores_closed_form():
    s, r, c = 64 * MIB, 8e9, 16e9
    t, what = m.all_reduce_seconds(s, ranks=4, nodes=1, channels=1, reduce=r, copy=c, **FAST)
    assert what == "cores"
    assert math.isclose(t, 3 / 4 * s * (1 / r + 1 / c), rel_tol=1e-12)
    assert math.isclose(m.busbw(s, 4, t), 2 * 3 / 4 * s / t, rel_tol=1e-12)


def test_each_doubling_of_the_channels_halves_the_cores_term():
    s = 64 * MIB
    times = [m.all_reduce_seconds(s, ranks=2, nodes=1, channels=c, **FAST)[0] for c in (1, 2, 4)]
    assert math.isclose(times[0] / times[1], 2, rel_tol=1e-12)
    assert math.isclose(times[1] / times[2], 2, rel_tol=1e-12)


def test_the_link_bounds_two_nodes_and_one_node_has_none():
    s = 256 * MIB
    kw = dict(ranks=2, channels=32, memory=1e15, link=40e9, alpha=0.0, wake=0.0)
    t, what = m.all_reduce_seconds(s, nodes=2, **kw)
    assert what == "link"
    assert math.isclose(m.busbw(s, 2, t), 40e9, rel_tol=1e-12)
    assert m.all_reduce_seconds(s, nodes=1, **kw)[1] == "cores"


def test_the_memory_bound_counts_a_nodes_ranks():
    s = 64 * MIB
    kw = dict(channels=64, link=1e15, memory=100e9, alpha=0.0, wake=0.0)
    t, what = m.all_reduce_seconds(s, ranks=8, nodes=2, **kw)
    assert what == "memory"
    assert math.isclose(t, 4 * m.TRAFFIC_PER_BYTE * 2 * 7 / 8 * s / 100e9, rel_tol=1e-12)


def test_latency_counts_each_channels_pipeline_and_the_wake():
    s = 4 * MIB
    kw = dict(ranks=2, nodes=1, reduce=1e18, copy=1e18, memory=1e18, link=1e18, slot=256 * 1024)
    t1 = m.all_reduce_seconds(s, channels=1, alpha=1e-6, wake=5e-6, **kw)[0]
    t2 = m.all_reduce_seconds(s, channels=2, alpha=1e-6, wake=5e-6, **kw)[0]
    # 2 MiB per rank's chunk: 8 loops of 256 KiB at one channel, 4 per channel at two.
    assert math.isclose(t1, 2 * 8 * 1e-6, rel_tol=1e-3)
    assert math.isclose(t2, 2 * 4 * 1e-6 + 5e-6, rel_tol=1e-3)


def test_the_table_names_its_bounds():
    text = m.table([MIB, 256 * MIB], [1, 32], ranks=2, nodes=2)
    assert text.splitlines()[0] == "| size | C = 1 | C = 32 |"
    assert "(c)" in text and "(l)" in text
