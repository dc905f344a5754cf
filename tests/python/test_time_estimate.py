"""torch.distributed._time_estimator on ring (Backend.supports_time_estimate): inside it calls
are priced by the group's plan model (executor/call_estimate.h) and nothing moves; the sum comes
back in microseconds, as ProcessGroupNCCL's does. The estimates are held to a stated factor of
the times measured here, in the same job: within FACTOR either way (an order of magnitude: the
model's link figures are TORCH_RING_SHM_LINK's defaults, not this machine's, and the suite runs
beside other work; measured on a quiet 2-core VM the ratios were 1.3x at 4 KiB to 4.4x at
16 MiB, the model being the faster)."""
import statistics
import time

import pytest
import torch
import torch.distributed as dist

from checks import Report, assert_reports_pass

FACTOR = 10.0
SIZES = {"4 KiB": 1024, "64 KiB": 16 * 1024, "1 MiB": 256 * 1024, "16 MiB": 4 * 1024 * 1024}


def _estimate(call):
    with dist.distributed_c10d._time_estimator(device=torch.device("cpu")) as cm:
        call()
    return cm.estimated_time


def estimates_and_times(ctx):
    import torch_ring_backend

    report = Report()
    # (The estimator itself raises NotImplementedError where the backend says it cannot.)
    # Nothing moves inside the estimator, and nothing reaches the flight recorder: a barrier
    # included (ProcessGroupNCCL's barrier is an all_reduce, priced like the others).
    t = torch.full((1000,), float(ctx.rank))
    before = len(torch_ring_backend.flight_recorder())
    both = _estimate(lambda: (dist.all_reduce(t), dist.broadcast(t, src=0), dist.barrier()))
    report.check("untouched inside the estimator", t, torch.full((1000,), float(ctx.rank)),
                 same_on_all_ranks=False)
    if len(torch_ring_backend.flight_recorder()) != before:
        report.failures.append("a call inside the estimator reached the flight recorder")
    alone = _estimate(lambda: dist.all_reduce(t))
    # Windows do not nest (an inner one would restart the outer's sum): the inner is refused
    # by name, and the outer goes on to price its calls, before and after, in one sum.
    with dist.distributed_c10d._time_estimator(device=torch.device("cpu")) as outer:
        dist.all_reduce(t)
        try:
            with dist.distributed_c10d._time_estimator(device=torch.device("cpu")):
                pass
            report.failures.append("a time estimator inside another was taken")
        except Exception as e:  # noqa: BLE001 -- the type is torch's, the words ours
            if "do not nest" not in str(e) or "_time_estimator" not in str(e):
                report.failures.append(f"the nested estimator refused without saying why: {e}")
        dist.all_reduce(t)
    if abs(outer.estimated_time - 2 * alone) > 1e-3 * alone:
        report.failures.append(f"two calls around a refused inner window: {outer.estimated_time} "
                               f"us, one alone {alone} us: not twice")
    if not (both > alone > 0):
        report.failures.append(f"two calls {both} us, one {alone} us: not a positive sum")
    estimates, measured = {}, {}
    for name, n in SIZES.items():
        x = torch.ones(n)
        estimates[name] = _estimate(lambda: dist.all_reduce(x))
        for _ in range(3):
            dist.all_reduce(x)
        times = []
        for _ in range(11):
            dist.barrier()
            start = time.perf_counter()
            dist.all_reduce(x)
            times.append((time.perf_counter() - start) * 1e6)
        measured[name] = statistics.median(times)
    # After the estimator, calls run again.
    y = torch.full((10,), float(ctx.rank))
    dist.all_reduce(y)
    report.check("a call after the estimator", y,
                 torch.full((10,), float(sum(range(ctx.world)))))
    return report, estimates, measured


@pytest.mark.skipif(not hasattr(dist.distributed_c10d, "_time_estimator"),
                    reason="this torch has no _time_estimator")
@pytest.mark.parametrize("world", [2])
def test_estimates_grow_with_size_and_stay_within_a_factor_of_the_measured_times(pool, world):
    results = pool.run(estimates_and_times)
    assert_reports_pass([r for r, _, _ in results], "time estimator")
    estimates = results[0][1]
    assert all(r[1] == estimates for r in results), "ranks estimate the same calls alike"
    sizes = list(SIZES)
    assert all(estimates[a] < estimates[b] for a, b in zip(sizes, sizes[1:])), estimates
    slowest = {name: max(r[2][name] for r in results) for name in sizes}
    ratios = {name: slowest[name] / estimates[name] for name in sizes}
    print("measured / estimated:", {k: round(v, 2) for k, v in ratios.items()})
    bad = {k: v for k, v in ratios.items() if not 1 / FACTOR <= v <= FACTOR}
    assert not bad, f"measured / estimated outside {FACTOR}x: {bad} ({slowest} vs {estimates})"
