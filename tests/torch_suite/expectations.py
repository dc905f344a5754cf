"""What PyTorch's distributed suite is expected to do on "ring", and why: every entry has its
reason. run_suite.py fails on any other outcome (a new failure, or an expected failure that
now passes: then the entry goes)."""

# Tests gated on the backend's NAME (gloo/nccl) that exercise only what "ring" supports: their
# gate is lifted (ring_suite.py) and they run. name -> the gate, and why ring qualifies.
LIFTED = {}

# Tests that run and fail on "ring", by design or by a limit of torch, not of this backend.
# name -> reason.
EXPECTED_FAILURES = {}

# Tests skipped without spawning ranks, decided from torch's own decorators (run_suite.py):
# name fragments of the decorators' skip codes -> the reason reported.
RUNTIME_SKIPS = {
    "small_worldsize": "needs WORLD_SIZE >= 8 (skip_if_small_worldsize): see run_suite.py --world 8",
    "odd_worldsize": "needs an even WORLD_SIZE (skip_if_odd_worldsize)",
    "no_cuda": "needs a CUDA GPU",
    "multi-gpu": "needs one CUDA GPU per rank",
}
