"""Running the benchmark: main() reads the command line, then either launches --nproc local
ranks (after measuring the copy roofline while nothing else runs) or, under torchrun, is one
rank itself. run_rank joins the "ring" group and a group per torch reference (gloo, nccl,
fake) and runs the sweep, ring's whole sweep first, then each reference's; rank 0 prints the
table and returns the rows. With --reference mpi, main then runs the MPI ranks
(mpi_reference.py) on the same plan, fills their columns and prints the table itself. main
writes the rows to the requested files; its return value is the exit code."""
import datetime
import os
import sys

import torch
import torch.distributed as dist

from torch_ring_backend._launch import RankFailed, run_on_local_ranks

from .cases import COLLECTIVES, DTYPES, RankContext
from .load import CompetingLoad
from .measure import (Measurement, _measure_sweep, iterations_for, measure_copy_bandwidth,
                      sweep_sizes, warm_up)
from .deepspeed_reference import DeepSpeedShm
from .deepspeed_reference import build as build_deepspeed
from .ring_inference_reference import RingInference
from .mpi_reference import run_mpi_sweep
from .options import PROG, BadInput, _under_torchrun, parse_config
from .report import Table, _meta, _row, add_reference, print_table, write_outputs

GROUP_TIMEOUT = datetime.timedelta(minutes=5)


# ---- the sweep, on every rank ------------------------------------------------------------------

def run_rank(cfg, copy_rates=None):
    """One rank of the benchmark (launched, or under torchrun). Rank 0 prints the table and
    returns (meta, rows); the other ranks return None."""
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    device = _rank_device(cfg.device, rank)
    dist.init_process_group("ring", timeout=GROUP_TIMEOUT)
    references, load = {}, None
    try:
        if "fake" in cfg.references:
            import torch.testing._internal.distributed.fake_pg  # noqa: F401 - registers "fake"
        references = {ref: _reference_group(ref, rank, world)
                      for ref in cfg.references if ref != "mpi"}
        if copy_rates is None:  # under torchrun: rank 0 measures while the others wait
            copy_rates = measure_copy_bandwidth(device) if rank == 0 else {"torch": 0.0}
            dist.barrier()
            if int(os.environ.get("LOCAL_RANK", rank)) == 0:  # one load per host
                load = CompetingLoad(cfg.load).__enter__()
        ctx = RankContext(rank, world, device, DTYPES[cfg.dtype], cfg.op, cfg.inplace)
        warm_up(device)
        meta = _meta(cfg, world, copy_rates)
        # With mpi, the table waits for the MPI ranks (main prints it); the progress line does not.
        table = Table(cfg, meta, enabled=rank == 0, rows_shown="mpi" not in cfg.references)
        rows = _sweep(cfg, ctx, references, table)
        table.finish(rows)
        _close(references, together=True)
        return (meta, rows) if rank == 0 else None
    finally:
        _close(references, together=False)  # after an error: without waiting for the others
        if load is not None:
            load.__exit__(None, None, None)
        dist.destroy_process_group()


def _close(references, together):
    for group in references.values():
        if hasattr(group, "close"):
            group.close(together)


def _reference_group(ref, rank, world):
    """A torch process group of backend `ref` beside ring's, or DeepSpeed's op (which is not a
    process group: deepspeed_reference.py)."""
    if ref == "deepspeed":
        return DeepSpeedShm(rank, world)
    if ref == "ring_inference":
        return RingInference(rank, world)
    return dist.new_group(backend=ref, timeout=GROUP_TIMEOUT)


def _rank_device(kind, rank):
    if kind == "cpu":
        return torch.device("cpu")
    index = int(os.environ.get("LOCAL_RANK", rank)) % torch.cuda.device_count()
    torch.cuda.set_device(index)
    return torch.device("cuda", index)


# Ring's whole sweep runs first, then each reference's, rather than alternating size by size:
# another backend's threads running between two calls change where the scheduler puts the
# next backend's threads, and small-message times depend on that placement (on a 2-core
# machine ring's 4 KiB all_reduce takes either about 15 us or 70-200 us; right after gloo
# calls, mostly the latter). One phase per backend measures each as a program that uses only
# that backend would see it.

def sweep_plans(cfg, world):
    """{collective: [(bytes, count, timed calls, warmup calls) per size]}: the same plan for
    ring and every reference, the MPI ranks included."""
    return {name: [(nbytes, count, *iterations_for(nbytes, cfg.iters, cfg.warmup))
                   for nbytes, count in sweep_sizes(cfg, name, world)]
            for name in cfg.collectives}


def _sweep(cfg, ctx, references, table):
    plans = sweep_plans(cfg, ctx.world)
    ring = {name: list(_measure_sweep(name, plans[name], None, "ring", ctx, table))
            for name in cfg.collectives}
    measured = {ref: {name: list(_measure_sweep(name, plans[name], group, ref, ctx, table))
                      for name in cfg.collectives}
                for ref, group in references.items()}
    rows = []
    for name in cfg.collectives:
        table.begin(name, COLLECTIVES[name])
        for i, ((nbytes, count, timed, warmup), ring_m) in enumerate(zip(plans[name], ring[name])):
            refs = {ref: ms[name][i] if i < len(ms[name]) else Measurement()
                    for ref, ms in measured.items()}
            row = _row(name, cfg, ctx.world, nbytes, count, timed, warmup, ring_m, refs,
                       table.meta["copy_gbps"])
            table.add(row)
            rows.append(row)
    return rows


# ---- entry point -------------------------------------------------------------------------------

def main(argv=None):
    args = sys.argv[1:] if argv is None else list(argv)
    if "--latency" in args:
        from .latency import main as latency_main
        try:
            return latency_main(args)
        except (RankFailed, RuntimeError) as e:
            print(f"{PROG}: {e}", file=sys.stderr)
            return 1
    try:
        cfg = parse_config(argv)
    except BadInput as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    try:
        result = run_rank(cfg) if _under_torchrun() else _run_local_ranks(cfg)
    except (RankFailed, RuntimeError) as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    if result is None:  # a torchrun rank other than 0
        return 0
    meta, rows = result
    try:
        write_outputs(cfg, meta, rows)
    except OSError as e:
        print(f"{PROG}: error: cannot write the results: {e}", file=sys.stderr)
        return 1
    wrong = sum(r["wrong"] for r in rows)
    if wrong:
        print(f"{PROG}: ring produced {wrong} wrong elements", file=sys.stderr)
        return 1
    return 0


def _run_local_ranks(cfg):
    # Measured here, before the ranks exist, so that nothing else competes for memory bandwidth.
    device = torch.device("cuda", 0) if cfg.device == "cuda" else torch.device("cpu")
    copy_rates = measure_copy_bandwidth(device)
    if "deepspeed" in cfg.references:  # compiled once here, not by every rank at once
        print(f"[{PROG}] loading DeepSpeed's shared-memory op (compiled on first use)",
              file=sys.stderr, flush=True)
        build_deepspeed()
    if cfg.device == "cuda":
        torch.cuda.empty_cache()
    with CompetingLoad(cfg.load) as load:  # from the ranks' start to the MPI ranks' end
        meta, rows = run_on_local_ranks(run_rank, cfg.nproc, cfg, copy_rates)[0]
        if "mpi" in cfg.references:
            print(f"[{PROG}] the MPI reference: mpirun -n {cfg.nproc}", file=sys.stderr,
                  flush=True)
            plans = sweep_plans(cfg, cfg.nproc)
            add_reference(rows, "mpi", run_mpi_sweep(cfg, plans, cfg.nproc), cfg)
            print_table(cfg, meta, rows)
        # Whether the load lasted the whole run (a load process killed from outside shows here).
        meta["load_processes_at_end"] = load.alive()
    return meta, rows
