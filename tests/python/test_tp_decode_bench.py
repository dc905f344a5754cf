"""scripts/tp_decode_bench.py: its sharded decoder computes what the unsharded one does (the
contract of Megatron's column- and row-parallel split), and a small run over ring, gloo, no
all_reduce and (where installed) DeepSpeed's op passes its own cross-rank checks."""
import importlib.util
import json
import os
import subprocess
import sys
import threading

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "tp_decode_bench.py")
SMALL = ["--layers", "2", "--hidden", "64", "--heads", "8", "--kv-heads", "2", "--mlp", "96",
         "--context", "5"]


def _script():
    spec = importlib.util.spec_from_file_location("tp_decode_bench", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _decode(tp, cfg, rank, world, all_reduce, steps=3):
    """The hidden state after `steps` decode steps of one rank's shards (world 1: the whole
    model), from the same seeds on every rank."""
    layers = [tp.Layer(cfg, rank, world, g) for g in [torch.Generator().manual_seed(0)]
              for _ in range(cfg.layers)]
    gen = torch.Generator().manual_seed(1)
    positions = cfg.context + steps
    caches = []
    for layer in layers:  # the whole model's cache, this rank's heads of it
        k = torch.randn(2, cfg.kv_heads, positions, cfg.hidden // cfg.heads, generator=gen)
        v = torch.randn(2, cfg.kv_heads, positions, cfg.hidden // cfg.heads, generator=gen)
        mine = slice(rank * layer.kv_heads, (rank + 1) * layer.kv_heads)
        caches.append((k[:, mine].contiguous(), v[:, mine].contiguous()))
    x = torch.randn(2, cfg.hidden, generator=gen)
    for step in range(steps):
        x = tp.decode_step(layers, caches, x, cfg.context + step, all_reduce)
    return x


def test_the_sharded_decoder_computes_the_unsharded_one():
    """Two ranks (threads, summing through a barrier) against the unsharded decoder, float32:
    a mistake in which dimension a linear is split by, in the heads a rank owns or in where the
    partial sums are reduced shows as a difference far above float32's rounding."""
    tp = _script()
    cfg = tp.parse_args(SMALL + ["--dtype", "float32", "--backends", "none", "--nproc", "2"])
    whole = _decode(tp, cfg, 0, 1, lambda t: None)
    barrier, slots, results = threading.Barrier(2), [None, None], [None, None]

    def rank(r):
        def all_reduce(t):
            slots[r] = t.clone()
            barrier.wait()
            total = slots[0] + slots[1]
            barrier.wait()
            t.copy_(total)
        results[r] = _decode(tp, cfg, r, 2, all_reduce)

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert torch.equal(results[0], results[1])
    torch.testing.assert_close(results[0], whole, rtol=1e-4, atol=1e-5)
    # and a lost all_reduce is far from it (the comparison has teeth)
    lost = _decode(tp, cfg, 0, 2, lambda t: None)
    assert (lost - whole).abs().max() > 1e-2


def _deepspeed_bfloat16_refusal():
    """"" where DeepSpeed's bfloat16 kernel runs on this CPU, else the reason the reference gives
    (its op asked as the benchmark asks it); None without deepspeed."""
    if importlib.util.find_spec("deepspeed") is None:
        return None
    r = subprocess.run([sys.executable, "-c",
                        "import torch\n"
                        "from torch_ring_backend.bench.deepspeed_reference import build, unsupported\n"
                        "print(unsupported(torch.bfloat16, build().vector_kernel_level()) or '')"],
                       capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""


def test_a_small_run_passes_its_checks(tmp_path):
    backends = ["ring", "ring_inference", "gloo", "none"]
    if _deepspeed_bfloat16_refusal() == "":
        backends.insert(3, "deepspeed")
    out = tmp_path / "tp.json"
    r = subprocess.run([sys.executable, SCRIPT, *SMALL, "--steps", "3", "--warmup", "1",
                        "--rounds", "1", "--batches", "1,3", "--backends", ",".join(backends),
                        "--json", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    data = json.loads(out.read_text())
    checks = data["checks"]
    # every backend but none: same bits on every rank, and (world 2) the same bits as ring's
    assert len(checks) == 2 * (2 * len(backends) - 3) and all(checks.values()), checks
    for name in backends:
        for batch in ("1", "3"):
            assert data["result"][name][batch]["tokens_per_s"] > 0, (name, batch)
    assert "checks: " in r.stdout and "FAILED" not in r.stdout, r.stdout


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))


def test_deepspeed_is_refused_by_name_where_its_bfloat16_kernel_cannot_run(tmp_path):
    """Called regardless, DeepSpeed's bfloat16 kernel dies of SIGILL on a CPU without
    AVX-512BW (seen on an AVX2-only EPYC): the benchmark refuses it at start, naming why."""
    reason = _deepspeed_bfloat16_refusal()
    if reason is None:
        pytest.skip("deepspeed is not installed")
    if reason == "":
        pytest.skip("DeepSpeed's bfloat16 kernel runs on this CPU (the small run covers it)")
    r = subprocess.run([sys.executable, SCRIPT, *SMALL, "--steps", "1", "--warmup", "0",
                        "--rounds", "1", "--batches", "1", "--backends", "ring,deepspeed"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "--backends deepspeed: DeepSpeed's torch.bfloat16 kernel needs AVX-512BW" in r.stderr, \
        r.stderr
