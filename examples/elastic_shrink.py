"""Training goes on after a rank dies: 4 ranks train with gradients averaged by hand over
"ring"; in the middle of the epoch one rank is SIGKILLed. The others get an error naming it
(within a fraction of a second), call dist.shrink_group([dead rank]), and finish the epoch as
a group of 3, each averaging over the ranks that are left. Their parameters end identical.

    python examples/elastic_shrink.py [--nproc 4] [--kill-rank 3] [--kill-step 5]
                                      [--steps 12] [--transport auto|shm|tcp] [--abort]

This script starts its own ranks (torchrun would tear the whole job down when one worker
dies). The store lives on rank 0, so the rank killed must not be rank 0 (as with NCCL's
shrink, the store has to survive). --abort shrinks with SHRINK_ABORT, which first aborts
what is still pending on the old group.
"""
import argparse
import datetime
import hashlib
import json
import os
import signal
import sys

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d
import torch.multiprocessing as mp
import torch.nn as nn


def digest(model):
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    return hashlib.sha256(flat.numpy().tobytes()).hexdigest()[:16]


def resume_together(model, step):
    """The step the survivors go on from, and its parameters on every one of them.

    Why: the survivors need not fail in the same step. The death breaks the group, and a rank
    still waiting at the end of the previous step's last all_reduce (for data from a live peer)
    fails there too, while the others completed it and moved on. So they agree on the furthest
    step any of them reached, and the lowest rank that reached it sends its parameters (SGD
    keeps no other state) to the rest."""
    furthest = torch.tensor([step], dtype=torch.int64)
    dist.all_reduce(furthest, op=dist.ReduceOp.MAX)
    holder = torch.tensor([dist.get_rank() if step == int(furthest) else dist.get_world_size()],
                          dtype=torch.int64)
    dist.all_reduce(holder, op=dist.ReduceOp.MIN)
    for p in model.parameters():
        dist.broadcast(p.data, src=int(holder))
    return int(furthest)


def rank_main(rank, args, port, results):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(args.nproc), TORCH_RING_TRANSPORT=args.transport)
    import torch_ring_backend  # noqa: F401
    from torch_ring_backend.models import make_batch, make_model

    dist.init_process_group("ring", timeout=datetime.timedelta(seconds=20))
    model = make_model(seed=0)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    events = []
    step = 0
    while step < args.steps:
        if rank == args.kill_rank and step == args.kill_step:
            os.kill(os.getpid(), signal.SIGKILL)  # mid-epoch, without a word to anyone
        images, tokens, labels = make_batch(rank, step)
        opt.zero_grad()
        nn.functional.cross_entropy(model(images, tokens), labels).backward()
        try:
            for p in model.parameters():
                dist.all_reduce(p.grad, op=dist.ReduceOp.AVG)
        except dist.DistBackendError as e:
            # A peer is gone: the step's gradients are incomplete. Shrink and redo the step.
            flags = c10d.SHRINK_ABORT if args.abort else c10d.SHRINK_DEFAULT
            events.append({"step": step, "error": str(e).splitlines()[0][:300]})
            dist.shrink_group([args.kill_rank], shrink_flags=flags)
            events[-1]["world_after"] = dist.get_world_size()
            events[-1]["rank_after"] = dist.get_rank()
            step = resume_together(model, step)
            events[-1]["resumed_at"] = step
            continue
        opt.step()
        step += 1
    results.put({"rank": rank, "digest": digest(model), "events": events,
                 "world": dist.get_world_size(),
                 "params": torch.cat([p.detach().flatten() for p in model.parameters()]).tolist()})
    dist.destroy_process_group()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nproc", type=int, default=4)
    p.add_argument("--kill-rank", type=int, default=3)
    p.add_argument("--kill-step", type=int, default=5)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--transport", default="auto", choices=("auto", "shm", "tcp"))
    p.add_argument("--abort", action="store_true", help="shrink with SHRINK_ABORT")
    p.add_argument("--json", action="store_true", help="print the survivors' results as JSON")
    args = p.parse_args(argv)
    if not 0 < args.kill_rank < args.nproc:
        p.error("--kill-rank must be a rank other than 0 (rank 0 holds the store)")
    from torch_ring_backend._launch import free_port

    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=rank_main, args=(r, args, port, results))
             for r in range(args.nproc)]
    for proc in procs:
        proc.start()
    survivors = [results.get(timeout=180) for _ in range(args.nproc - 1)]
    for proc in procs:
        proc.join(timeout=60)
    survivors.sort(key=lambda r: r["rank"])
    if args.json:
        print("JSON " + json.dumps(survivors))
    for r in survivors:
        for e in r["events"]:
            print(f"[rank {r['rank']}] step {e['step']}: {e['error']}")
            print(f"[rank {r['rank']}] shrank to rank {e['rank_after']} of {e['world_after']}, "
                  f"going on from step {e['resumed_at']}")
        print(f"[rank {r['rank']}] finished {args.steps} steps in a group of {r['world']}; "
              f"parameters {r['digest']}")
    same = len({r["digest"] for r in survivors}) == 1
    killed = procs[args.kill_rank].exitcode == -signal.SIGKILL
    print(f"rank {args.kill_rank} killed: {killed}; survivors' parameters identical: {same}")
    return 0 if same and killed and all(r["world"] == args.nproc - 1 for r in survivors) else 1


if __name__ == "__main__":
    sys.exit(main())
