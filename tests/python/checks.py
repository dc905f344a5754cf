"""Assertions over the per-rank results of a case.

Batched cases return a `Report` from every rank: the failed sub-cases (described on the rank
that saw them) and a digest of every result, so the test process can check both that each
rank got the right answer and that all ranks hold bitwise-identical results.
"""
from dataclasses import dataclass, field

from reference import describe_mismatch, digest


@dataclass
class Report:
    failures: list = field(default_factory=list)
    digests: dict = field(default_factory=dict)

    def check(self, label, got, want, equal_nan=False, same_on_all_ranks=True):
        """Records a failure if `got` differs bitwise from `want`, and `got`'s digest under
        `label` for the cross-rank comparison unless only this rank holds the result."""
        if same_on_all_ranks:
            self.digests[label] = digest(got)
        problem = describe_mismatch(got, want, equal_nan=equal_nan)
        if problem:
            self.failures.append(f"{label}: {problem}")

    def check_close(self, label, got, want, tolerance):
        """Records `got` and a failure where |got - want| exceeds the elementwise tolerance."""
        self.digests[label] = digest(got)
        if got.dtype != want.dtype or got.shape != want.shape:
            self.failures.append(f"{label}: got {got.dtype} {tuple(got.shape)}, "
                                 f"want {want.dtype} {tuple(want.shape)}")
            return
        error = (got.double() - want.double()).abs()
        bad = ~(error <= tolerance)  # also catches NaN
        if bool(bad.any()):
            i = int(bad.nonzero()[0][0])
            self.failures.append(
                f"{label}: {int(bad.sum())} of {got.numel()} elements off; first at {i}: "
                f"got {got[i].item()!r}, want {want[i].item()!r} (tolerance {tolerance[i].item():.3g})"
            )


    def check_raises(self, label, call, needles, exception=RuntimeError, group=None):
        """Records a failure unless `call()` raises `exception` whose message contains every
        needle (case-insensitive) before anything reaches the ring: the last sequence number
        in the flight recorder of `group` must not move."""
        before = _last_sequence(group)
        try:
            call()
        except exception as e:
            message = str(e)
        except Exception as e:  # noqa: BLE001  (the wrong kind is a failure to report)
            self.failures.append(f"{label}: raised {type(e).__name__}, not "
                                 f"{exception.__name__}: {e}")
            return
        else:
            self.failures.append(f"{label}: no error was raised")
            return
        missing = [n for n in needles if n.lower() not in message.lower()]
        if missing:
            self.failures.append(f"{label}: the message lacks {missing}: {message!r}")
        after = _last_sequence(group)
        if after != before:
            self.failures.append(f"{label}: the call was queued to the ring before failing "
                                 f"(last sequence {before} -> {after})")


def _last_sequence(group):
    import torch_ring_backend

    record = torch_ring_backend.flight_recorder(group)
    return record[-1]["seq"] if record else None


def assert_reports_pass(reports, what):
    """Fails with every rank's failed sub-cases, then if any result differs across ranks."""
    failures = [f"rank {r}: {f}" for r, rep in enumerate(reports) for f in rep.failures]
    assert not failures, f"{what}: {len(failures)} failed sub-cases:\n" + "\n".join(failures[:40])
    assert_identical_across_ranks([rep.digests for rep in reports], what)


def assert_identical_across_ranks(digests_per_rank, what):
    first = digests_per_rank[0]
    for rank, digests in enumerate(digests_per_rank[1:], start=1):
        assert digests.keys() == first.keys(), f"{what}: rank {rank} ran different sub-cases"
        differing = [label for label in first if digests[label] != first[label]]
        assert not differing, (
            f"{what}: rank {rank}'s result differs bitwise from rank 0's in: {differing[:20]}"
        )
