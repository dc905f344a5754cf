"""Tensor-parallel decoding on CPU: tokens per second of a Llama-style decoder whose linears are
split across the ranks (Megatron's column- then row-parallel), one all_reduce after the attention
output and one after the MLP of every layer, on each all_reduce in turn, in the same processes:

    python scripts/tp_decode_bench.py                       # world 2, bfloat16, batch 1,2,4,8
    python scripts/tp_decode_bench.py --batches 1,8 --layers 8 --load cores --json out.json

The all_reduces (`--backends`): ring (the default group), ring_inference (the same group through
torch_ring_backend.inference_all_reduce: no torch.distributed wrapper, no Work), gloo (a group
beside it), deepspeed
(DeepSpeed's shared-memory op, `deepspeed.comm.inference_all_reduce`'s path, as
torch-ring-bench --reference deepspeed loads it), and none: the same steps with no all_reduce
at all (wrong results, the compute alone: what each backend adds is its time minus this one's).
A decode step is one token for each of `batch` sequences: every layer reads its weights once, so
the all_reduces carry batch x hidden values (4 KiB per call at batch 1 in bfloat16 with hidden
2048): the small messages of CPU inference. Each backend runs `--rounds` times, the order
rotated every round; tokens/s is the median round's.

Checked on every run: after the timed steps every rank holds the same hidden state, bit for bit,
and at world 2 every backend the same as ring's (a sum of two values rounds alike in any order).
The defaults are a TinyLlama-1.1B layer (hidden 2048, 32 heads, 4 key/value heads, MLP 5632)
with random weights, a context of 256 tokens in the key/value cache."""
import argparse
import json
import math
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

from torch_ring_backend._launch import run_on_local_ranks


# ---- the model: one rank's shards of a Llama decoder -----------------------------------------

def _shard_rows(weight, rank, world):
    """Rows (output features) of a column-parallel linear that `rank` holds."""
    return weight.chunk(world, dim=0)[rank].contiguous()


def _shard_columns(weight, rank, world):
    """Columns (input features) of a row-parallel linear that `rank` holds."""
    return weight.chunk(world, dim=1)[rank].contiguous()


class Layer:
    """One decoder layer's weights on one rank: q, k, v, gate and up split by output features
    (each rank computes its heads and its part of the MLP), o and down split by input features
    (each rank's partial output is summed by an all_reduce)."""

    def __init__(self, cfg, rank, world, generator):
        h, kvh, d, m = cfg.hidden, cfg.kv_heads, cfg.hidden // cfg.heads, cfg.mlp

        def full(rows, cols):  # the unsharded weight, the same on every rank (one seed)
            return (torch.randn(rows, cols, generator=generator) / math.sqrt(cols)).to(cfg.dtype)

        self.wq = _shard_rows(full(h, h), rank, world)
        self.wk = _shard_rows(full(kvh * d, h), rank, world)
        self.wv = _shard_rows(full(kvh * d, h), rank, world)
        self.wo = _shard_columns(full(h, h), rank, world)
        self.wgate = _shard_rows(full(m, h), rank, world)
        self.wup = _shard_rows(full(m, h), rank, world)
        self.wdown = _shard_columns(full(h, m), rank, world)
        self.norm1 = torch.ones(h, dtype=cfg.dtype)
        self.norm2 = torch.ones(h, dtype=cfg.dtype)
        self.heads, self.kv_heads, self.head_dim = cfg.heads // world, kvh // world, d


def rms_norm(x, weight, eps=1e-5):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * weight


def rotate(x, pos, base=10000.0):
    """Rotary position embedding of x (batch, heads, 1, head_dim) at position `pos`."""
    d = x.shape[-1]
    freqs = pos / base ** (torch.arange(0, d, 2, dtype=torch.float32) / d)
    cos, sin = freqs.cos().repeat(2), freqs.sin().repeat(2)
    xf = x.float()
    half = torch.cat((-xf[..., d // 2:], xf[..., : d // 2]), dim=-1)
    return (xf * cos + half * sin).to(x.dtype)


def decode_step(layers, caches, x, pos, all_reduce):
    """One token per sequence through every layer; x: (batch, hidden). caches[i] = (k, v), each
    (batch, kv_heads, positions, head_dim), written at `pos`."""
    b = x.shape[0]
    for layer, (k_cache, v_cache) in zip(layers, caches):
        hd, nh, nkv = layer.head_dim, layer.heads, layer.kv_heads
        y = rms_norm(x, layer.norm1)
        q = rotate((y @ layer.wq.t()).view(b, nh, 1, hd), pos)
        k_cache[:, :, pos] = rotate((y @ layer.wk.t()).view(b, nkv, 1, hd), pos)[:, :, 0]
        v_cache[:, :, pos] = (y @ layer.wv.t()).view(b, nkv, hd)
        keys = k_cache[:, :, : pos + 1].repeat_interleave(nh // nkv, dim=1)
        values = v_cache[:, :, : pos + 1].repeat_interleave(nh // nkv, dim=1)
        attn = F.scaled_dot_product_attention(q, keys, values).reshape(b, nh * hd)
        out = attn @ layer.wo.t()
        all_reduce(out)
        x = x + out
        y = rms_norm(x, layer.norm2)
        out = (F.silu(y @ layer.wgate.t()) * (y @ layer.wup.t())) @ layer.wdown.t()
        all_reduce(out)
        x = x + out
    return x


# ---- one rank ------------------------------------------------------------------------------------

def _all_reduces(backends, rank, world):
    calls = {}
    for name in backends:
        if name == "ring":
            calls[name] = lambda t: dist.all_reduce(t)
        elif name == "ring_inference":
            import torch_ring_backend

            calls[name] = torch_ring_backend.inference_all_reduce
        elif name == "gloo":
            group = dist.new_group(backend="gloo")
            calls[name] = lambda t, g=group: dist.all_reduce(t, group=g)
        elif name == "deepspeed":
            from torch_ring_backend.bench.deepspeed_reference import DeepSpeedShm

            shm = DeepSpeedShm(rank, world)
            calls[name] = shm.all_reduce_
            calls["_deepspeed_shm"] = shm
        elif name == "none":
            calls[name] = lambda t: None
        else:
            raise ValueError(f"unknown backend {name!r}")
    return calls


def _run(cfg, layers, batch, all_reduce, generator):
    """Tokens per second of `steps` decode steps after `warmup`, and the final hidden state."""
    kvh, d = layers[0].kv_heads, layers[0].head_dim
    positions = cfg.context + cfg.warmup + cfg.steps
    caches = []
    for _ in layers:  # the prompt's keys and values (random: their values do not matter)
        k = torch.randn(batch, kvh, positions, d, generator=generator).to(cfg.dtype)
        caches.append((k, torch.randn(batch, kvh, positions, d, generator=generator).to(cfg.dtype)))
    x = torch.randn(batch, cfg.hidden, generator=generator).to(cfg.dtype)
    final_norm = torch.ones(cfg.hidden, dtype=cfg.dtype)
    pos = cfg.context
    for _ in range(cfg.warmup):
        x = rms_norm(decode_step(layers, caches, x, pos, all_reduce), final_norm)
        pos += 1
    dist.barrier()
    start = time.perf_counter()
    for _ in range(cfg.steps):  # the next token's input: this one's normalised output
        x = rms_norm(decode_step(layers, caches, x, pos, all_reduce), final_norm)
        pos += 1
    seconds = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
    dist.all_reduce(seconds, op=dist.ReduceOp.MAX)
    return batch * cfg.steps / seconds.item(), x


def _same_on_every_rank(x):
    """True when every rank's tensor equals rank 0's bit for bit."""
    mine = x.view(torch.int16) if x.element_size() == 2 else x.view(torch.int32)
    first = mine.clone()
    dist.broadcast(first, src=0)
    differs = torch.tensor([int(not torch.equal(first, mine))])
    dist.all_reduce(differs)
    return differs.item() == 0


def rank_main(cfg):
    import torch_ring_backend  # noqa: F401 - registers "ring"

    torch.set_num_threads(cfg.threads)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("ring")
    calls = {}
    try:
        calls = _all_reduces(cfg.backends, rank, world)
        generator = torch.Generator().manual_seed(0)
        layers = [Layer(cfg, rank, world, generator) for _ in range(cfg.layers)]
        result = {b: {} for b in cfg.backends}
        finals = {}
        for batch in cfg.batches:
            rates = {b: [] for b in cfg.backends}
            for round_ in range(cfg.rounds):
                turn = round_ % len(cfg.backends)  # the order rotates every round
                order = cfg.backends[turn:] + cfg.backends[:turn]
                for name in order:
                    tokens_per_s, x = _run(cfg, layers, batch, calls[name],
                                           torch.Generator().manual_seed(batch))
                    rates[name].append(tokens_per_s)
                    finals[(name, batch)] = x
            for name in cfg.backends:
                result[name][batch] = {"tokens_per_s": statistics.median(rates[name]),
                                       "rounds": rates[name]}
        checks = _check(cfg, finals, world)
        return {"result": result, "checks": checks} if rank == 0 else None
    finally:
        if "_deepspeed_shm" in calls:
            calls["_deepspeed_shm"].close(together=True)
        dist.destroy_process_group()


def _check(cfg, finals, world):
    """Every rank holds the same final state; at world 2 every backend ring's."""
    checks = {}
    for (name, batch), x in sorted(finals.items()):
        if name == "none":
            continue
        same = _same_on_every_rank(x)
        checks[f"{name} batch {batch}: every rank the same bits"] = same
        if world == 2 and name != "ring" and ("ring", batch) in finals:
            checks[f"{name} batch {batch}: the same bits as ring"] = torch.equal(
                x, finals[("ring", batch)])
    return checks


# ---- command line ----------------------------------------------------------------------------------

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--backends", default="ring,ring_inference,gloo,deepspeed,none")
    p.add_argument("--batches", default="1,2,4,8")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=4)
    p.add_argument("--mlp", type=int, default=5632)
    p.add_argument("--context", type=int, default=256)
    p.add_argument("--steps", type=int, default=32)
    p.add_argument("--warmup", type=int, default=4)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--dtype", choices=("bfloat16", "float32"), default="bfloat16")
    p.add_argument("--threads", type=int, default=1, help="torch threads per rank (default 1)")
    p.add_argument("--load", default="0", help="busy processes beside the ranks, or 'cores'")
    p.add_argument("--json", help="write the table's numbers as JSON")
    a = p.parse_args(argv)
    a.backends = [b.strip() for b in a.backends.split(",") if b.strip()]
    a.batches = [int(b) for b in a.batches.split(",")]
    a.dtype = getattr(torch, a.dtype)
    if a.heads % a.nproc or a.kv_heads % a.nproc or a.mlp % a.nproc or a.hidden % a.heads:
        p.error(f"heads ({a.heads}), kv heads ({a.kv_heads}) and MLP width ({a.mlp}) must split "
                f"evenly over {a.nproc} ranks, and hidden ({a.hidden}) over the heads")
    if "deepspeed" in a.backends:
        try:
            from torch_ring_backend.bench.deepspeed_reference import build, unsupported
            level = build().vector_kernel_level()  # compiled once here, before the ranks load it
        except RuntimeError as e:
            p.error(str(e))
        reason = unsupported(a.dtype, level)
        if reason:
            p.error(f"--backends deepspeed: {reason}")
    return a


def main(argv=None):
    from torch_ring_backend.bench.load import CompetingLoad, parse_load

    cfg = parse_args(argv)
    with CompetingLoad(parse_load(cfg.load)):
        out = run_on_local_ranks(rank_main, cfg.nproc, cfg,
                                 env={"OMP_NUM_THREADS": str(cfg.threads)})[0]
    result, checks = out["result"], out["checks"]
    print(f"# tensor-parallel decode, world {cfg.nproc}, {str(cfg.dtype).split('.')[-1]}, "
          f"{cfg.layers} layers of hidden {cfg.hidden} (heads {cfg.heads}, kv heads "
          f"{cfg.kv_heads}, MLP {cfg.mlp}), context {cfg.context}, {cfg.steps} steps, median of "
          f"{cfg.rounds} rounds, load {cfg.load}; tokens/s")
    # Ring's columns over DeepSpeed's, where both ran: tokens/s, so above 1 is faster.
    ratios = [r for r in ("ring", "ring_inference") if "deepspeed" in cfg.backends
              and r in cfg.backends]
    print(f"{'batch':>5} " + " ".join(f"{b:>10}" for b in cfg.backends)
          + "".join(f"  {r}/deepspeed" for r in ratios))
    for batch in cfg.batches:
        rate = {b: result[b][batch]["tokens_per_s"] for b in cfg.backends}
        line = f"{batch:>5} " + " ".join(f"{rate[b]:>10.1f}" for b in cfg.backends)
        for r in ratios:
            line += f"  {rate[r] / rate['deepspeed']:>{len(r) + 9}.2f}x"
        print(line)
    failed = [name for name, ok in checks.items() if not ok]
    print(f"# checks: {len(checks) - len(failed)} of {len(checks)} pass"
          + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    if cfg.json:
        with open(cfg.json, "w") as f:
            json.dump({"config": {k: str(v) if k == "dtype" else v for k, v in vars(cfg).items()},
                       "result": result, "checks": checks}, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
