"""Check this machine: `python -m torch_ring_backend.check` (or `torch-ring-check`).

Launches N local ranks, runs the all_reduce demo, the calls beyond it that gloo users rely on
(check_calls.py: each against its closed form) and a DDP gradient check on "ring" and on the
reference backend (gloo on CPU, nccl on CUDA) in the same processes, and prints a verdict
table. Exit status 0 only if every check passes.
"""
import argparse
import sys

from ._launch import RankFailed, run_on_local_ranks
from .check_calls import call_rows

# DDP gradients through two different reduction orders differ by float rounding only.
GRADIENT_TOLERANCE = 1e-5


def _device_for(rank, device_kind):
    import torch

    if device_kind == "cuda":
        device = torch.device("cuda", rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
        return device
    return torch.device("cpu")


def _flat_grads(group, device, rank, steps):
    """Parameters after `steps` DDP steps, and the gradients of the last step, flattened; and
    the DDP model."""
    import torch
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    from .models import make_batch, make_model

    model = make_model(seed=0, device=device)
    ddp = DDP(model, process_group=group, bucket_cap_mb=1,
              device_ids=[device.index] if device.type == "cuda" else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    for step in range(steps):
        opt.zero_grad()
        images, tokens, labels = make_batch(rank, step, device=device)
        nn.functional.cross_entropy(ddp(images, tokens), labels).backward()
        grads = torch.cat([p.grad.flatten() for p in model.parameters()])
        opt.step()
    params = torch.cat([p.detach().flatten() for p in model.parameters()])
    # An evaluation forward, as after training: DDP first broadcasts rank 0's buffers (the
    # BatchNorm statistics, which every training forward updates from the rank's own batch),
    # and BatchNorm leaves them as they are.
    ddp.eval()
    ddp(images, tokens)
    return grads.cpu(), params.cpu(), ddp


def _rank_checks(device_kind, reference, steps):
    import torch
    import torch.distributed as dist

    import torch_ring_backend  # noqa: F401

    dist.init_process_group("ring")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = _device_for(rank, device_kind)
    rows = {}

    x = torch.full((1024,), float(rank + 1), device=device)
    dist.all_reduce(x)
    expected = world * (world + 1) / 2
    rows["all_reduce demo (SUM of rank+1)"] = (x.cpu(), float((x - expected).abs().max()))
    calls, left_out = call_rows(device, rank, world)
    rows.update(calls)

    ring_grads, ring_params, ddp = _flat_grads(None, device, rank, steps)
    # Every parameter and buffer, bitwise (buffers are not in the rows above): the report's
    # text is the same on every rank; a mismatch fails the row.
    report = torch_ring_backend.verify_replicas(ddp, raise_on_mismatch=False)
    replicas = (torch.tensor(list(report.describe().encode()), dtype=torch.uint8),
                0.0 if report.ok else float("inf"))
    ref_group = dist.new_group(backend=reference) if reference != "none" else None
    if ref_group is not None:
        ref_grads, ref_params, ref_ddp = _flat_grads(ref_group, device, rank, steps)
        grad_diff = float((ring_grads - ref_grads).abs().max())
        param_diff = float((ring_params - ref_params).abs().max())
    else:
        grad_diff = param_diff = float("nan")
        ref_ddp = None
    rows[f"DDP gradients, step {steps}"] = (ring_grads, grad_diff)
    rows[f"DDP parameters after {steps} steps"] = (ring_params, param_diff)
    rows[f"verify_replicas: {report.checked} parameters and buffers"] = replicas
    # Why the DDP models go first, while dist still holds their groups: a DDP's Reducer keeps
    # its group, and torch's binding destroys a Reducer with the GIL held. Were a Reducer the
    # group's last owner, the group would be destroyed under the GIL, and gloo's destructor
    # joins its worker threads, one of which may be dropping a finished broadcast whose tensor
    # needs the GIL to release its Python object: a deadlock (seen once in 30 runs on torch
    # 2.13, pytorch issue 56297). Dropped from Python instead (dist's maps, `ref_group`), a
    # group is destroyed with the GIL released.
    del ddp, ref_ddp
    dist.destroy_process_group()
    del ref_group
    # Raw bytes, not tensors: a tensor would travel back through shared memory that the rank's
    # exit may tear down before the launcher reads it; bytes also compare bit for bit.
    return {"rows": {name: (_bytes_of(t), diff) for name, (t, diff) in rows.items()},
            "left_out": left_out}


def _bytes_of(t):
    """The tensor's bytes, whatever its dtype (numpy has no float8)."""
    import torch

    return t.detach().contiguous().view(-1).view(torch.uint8).numpy().tobytes()


def _verdicts(per_rank, reference):
    table = []
    ok = True
    for name in per_rank[0]:
        identical = all(rows[name][0] == per_rank[0][name][0] for rows in per_rank)
        diff = max(rows[name][1] for rows in per_rank)
        close = diff <= GRADIENT_TOLERANCE if diff == diff else True  # NaN: no reference run
        passed = identical and close
        ok &= passed
        table.append((name, "yes" if identical else "NO", diff, "PASS" if passed else "FAIL"))
    return table, ok


def _print_table(table, nproc, device, reference):
    print(f"torch_ring_backend check: {nproc} ranks, device {device}, reference {reference}")
    # A row named "vs ..." is compared with that closed form; the others with the reference.
    header = ("check", "identical across ranks", f"largest |ring - {reference}|", "verdict")
    lines = [header] + [(name, identical, "n/a" if diff != diff else f"{diff:.3e}", verdict)
                        for name, identical, diff, verdict in table]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for line in lines:
        print("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip())


def main(argv=None):
    parser = argparse.ArgumentParser(prog="torch-ring-check", description=__doc__.splitlines()[0])
    parser.add_argument("--nproc", type=int, default=2, help="local ranks to launch (default 2)")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--reference", choices=["gloo", "nccl", "none"], default=None,
                        help="reference backend (default: gloo on cpu, nccl on cuda)")
    parser.add_argument("--steps", type=int, default=5, help="DDP training steps (default 5)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds before giving up")
    args = parser.parse_args(argv)
    if args.nproc < 1:
        parser.error("--nproc must be at least 1")
    reference = args.reference or ("nccl" if args.device == "cuda" else "gloo")
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            print("torch-ring-check: --device cuda but no CUDA device is visible", file=sys.stderr)
            return 2
    try:
        per_rank = run_on_local_ranks(_rank_checks, args.nproc, args.device, reference, args.steps,
                                      timeout_s=args.timeout)
    except (RankFailed, TimeoutError) as e:
        print(f"torch-ring-check: FAIL: {e}", file=sys.stderr)
        return 1
    table, ok = _verdicts([r["rows"] for r in per_rank], reference)
    _print_table(table, args.nproc, args.device, reference)
    for line in per_rank[0]["left_out"]:
        print(f"not checked: {line}")
    print("verdict:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
