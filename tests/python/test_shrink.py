"""dist.shrink_group after a rank dies (examples/elastic_shrink.py): 4 ranks train, rank 3 is
SIGKILLed in the middle of the epoch, the others get an error naming it, shrink, and finish;
their parameters are identical, and equal (within rounding) to the same training done here in
one process: steps before the death average 4 ranks' gradients, the rest 3."""
import json
import os
import subprocess
import sys

import pytest
import torch
import torch.nn as nn

from torch_ring_backend.models import make_batch, make_model

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STEPS, KILL_RANK, KILL_STEP, NPROC = 12, 3, 5, 4


def train_here(first_step_without):
    """The reference: one model, each step's gradient the mean of the live ranks' gradients;
    the killed rank's own from `first_step_without` on."""
    model = make_model(seed=0)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(STEPS):
        ranks = range(NPROC) if step < first_step_without else [r for r in range(NPROC) if r != KILL_RANK]
        grads = []
        for rank in ranks:
            model.zero_grad()
            images, tokens, labels = make_batch(rank, step)
            nn.functional.cross_entropy(model(images, tokens), labels).backward()
            grads.append([p.grad.clone() for p in model.parameters()])
        for i, p in enumerate(model.parameters()):
            p.grad = torch.stack([g[i] for g in grads]).mean(0)
        opt.step()
    return torch.cat([p.detach().flatten() for p in model.parameters()])


@pytest.mark.parametrize("transport,abort", [("auto", False), ("tcp", True)])
def test_survivors_shrink_and_finish_with_identical_parameters(transport, abort):
    cmd = [sys.executable, os.path.join(ROOT, "examples", "elastic_shrink.py"), "--json",
           "--transport", transport, "--steps", str(STEPS), "--kill-rank", str(KILL_RANK),
           "--kill-step", str(KILL_STEP), "--nproc", str(NPROC)] + (["--abort"] if abort else [])
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    line = next(l for l in out.stdout.splitlines() if l.startswith("JSON "))
    survivors = json.loads(line[5:])
    assert [r["rank"] for r in survivors] == [0, 1, 2]
    for r in survivors:
        assert r["world"] == 3, r["world"]
        assert len(r["events"]) == 1, r["events"]
        event = r["events"][0]
        # The step each survivor saw the death in: its own (KILL_STEP), or the one before when
        # it was still waiting at the end of that step's last all_reduce as the group broke.
        # They then go on together from the furthest step any of them reached.
        assert event["step"] in (KILL_STEP - 1, KILL_STEP) and event["world_after"] == 3, event
        assert event["resumed_at"] == survivors[0]["events"][0]["resumed_at"], survivors
        assert event["rank_after"] == r["rank"], event
        # Each survivor learnt why: the dead rank is named (directly or as reported by a peer).
        assert f"rank {KILL_RANK}" in event["error"] or "aborted the group" in event["error"], event
    assert len({r["digest"] for r in survivors}) == 1, "survivors' parameters differ"
    got = torch.tensor(survivors[0]["params"])
    # The killed rank finished every step before KILL_STEP, so at least one survivor reached it
    # (all of them, unless all were still in the last all_reduce of the step before).
    resumed_at = survivors[0]["events"][0]["resumed_at"]
    assert resumed_at in (KILL_STEP - 1, KILL_STEP), resumed_at
    want = train_here(first_step_without=resumed_at)
    assert torch.allclose(got, want, rtol=1e-5, atol=1e-6), (got - want).abs().max()
