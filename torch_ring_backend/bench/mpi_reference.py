"""The MPI reference (--reference mpi): the same collectives, sizes, inputs and timing rule as
ring's sweep, through mpi4py on the same torch buffers (as numpy arrays), in ranks of its own.

run_mpi_sweep() (the benchmark's main process, after ring's ranks have exited, so that nothing
else competes for the cores) writes the plan to a file and starts `mpirun -n WORLD python -m
torch_ring_backend.bench.mpi_reference PLAN RESULT`; each MPI rank builds the same Case as
ring's ranks (cases.py), checks one call against the closed-form result, warms up, and times
back-to-back calls after a barrier; rank 0 writes the slowest rank's time per size. MPI has no
AVG, no bfloat16, and an in-place reduce_scatter with another layout: those sizes are reported
as refused, with the reason, and their columns stay empty."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

from .measure import Measurement

MPI_TIMEOUT_S = 1800


# ---- the benchmark's side -----------------------------------------------------------------------

def run_mpi_sweep(cfg, plans, world):
    """{collective: [Measurement per size of plans[collective]]}; raises RuntimeError with
    mpirun's output if the MPI ranks fail."""
    with tempfile.TemporaryDirectory(prefix="ring-bench-mpi-") as folder:
        plan_path = os.path.join(folder, "plan.json")
        result_path = os.path.join(folder, "result.json")
        with open(plan_path, "w") as f:
            json.dump({"dtype": cfg.dtype, "op": cfg.op, "inplace": cfg.inplace,
                       "plans": plans}, f)
        env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
        if os.geteuid() == 0:  # Open MPI refuses root unless told twice
            env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        # Shared memory between the ranks of this host (btl self,sm), as ring's ranks use;
        # --oversubscribe lets world exceed the cores, as ring's ranks may.
        cmd = [shutil.which("mpirun"), "-n", str(world), "--oversubscribe",
               "--mca", "btl", "self,sm", sys.executable, "-m",
               "torch_ring_backend.bench.mpi_reference", plan_path, result_path]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True,
                              timeout=MPI_TIMEOUT_S)
        if done.returncode != 0 or not os.path.exists(result_path):
            raise RuntimeError(f"the MPI reference failed ({' '.join(cmd)}, exit code "
                               f"{done.returncode}):\n{(done.stdout + done.stderr)[-3000:]}")
        with open(result_path) as f:
            result = json.load(f)
    return {name: [Measurement(**m) for m in measured] for name, measured in result.items()}


# ---- one MPI rank ---------------------------------------------------------------------------------

def _mpi_call(name, case, comm, MPI, op):
    """One collective through MPI on the case's buffers, or a ValueError saying why not."""
    out = case.output.numpy()
    inp = case.input.numpy() if case.input is not None else None
    if name == "all_reduce":
        comm.Allreduce(MPI.IN_PLACE, out, op=op)
    elif name == "all_gather":
        # In place (the input is this rank's block of the output): MPI's IN_PLACE form.
        comm.Allgather(MPI.IN_PLACE if _is_view_of(case.input, case.output) else inp, out)
    elif name == "reduce_scatter":
        if _is_view_of(case.output, case.input):
            raise ValueError("MPI's in-place reduce_scatter leaves the result at the start of "
                             "the buffer, not at this rank's block")
        comm.Reduce_scatter_block(inp, out, op=op)
    elif name == "broadcast":
        comm.Bcast(out, root=0)
    elif name == "all_to_all":
        comm.Alltoall(inp, out)
    else:
        raise ValueError(f"no MPI counterpart for {name}")


def _is_view_of(part, whole):
    start, end = whole.data_ptr(), whole.data_ptr() + whole.numel() * whole.element_size()
    return start <= part.data_ptr() < end


def _mpi_op(MPI, op_name):
    ops = {"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN, "product": MPI.PROD}
    if op_name not in ops:
        raise ValueError(f"MPI has no {op_name.upper()} reduction")
    return ops[op_name]


def _measure_one(name, case, comm, MPI, op_name, timed, warmup, reduces):
    from .cases import _count_wrong
    from .measure import time_calls

    error = None
    try:
        op = _mpi_op(MPI, op_name) if reduces else None
        case.prepare()
        _mpi_call(name, case, comm, MPI, op)
    except Exception as e:  # noqa: BLE001 - every rank refuses alike (same cases, same MPI)
        error = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    if error is not None:
        return {"error": error}
    wrong = _count_wrong(case.output, case.expected, op_name)
    seconds = time_calls(lambda: _mpi_call(name, case, comm, MPI, op), timed, warmup,
                         barrier=comm.Barrier)
    return {"seconds": comm.allreduce(seconds, op=MPI.MAX),
            "wrong": comm.allreduce(wrong, op=MPI.SUM)}


def _rank_main(plan_path, result_path):
    import torch
    from mpi4py import MPI

    from .cases import COLLECTIVES, DTYPES, RankContext
    from .measure import SETTLE_CALLS, SETTLE_ELEMENTS, warm_up

    comm = MPI.COMM_WORLD
    warm_up(torch.device("cpu"))  # as ring's ranks do (measure.WARM_UP_SECONDS)
    with open(plan_path) as f:
        plan = json.load(f)
    ctx = RankContext(comm.rank, comm.size, torch.device("cpu"), DTYPES[plan["dtype"]],
                      plan["op"], plan["inplace"])
    result = {}
    for name, sizes in plan["plans"].items():
        spec = COLLECTIVES[name]
        measured = []
        # As measure._settle does for the torch backends before each collective's sweep.
        token = torch.zeros(SETTLE_ELEMENTS, dtype=torch.float32).numpy()
        for _ in range(SETTLE_CALLS):
            comm.Allreduce(MPI.IN_PLACE, token)
        for nbytes, count, timed, warmup in sizes:
            case = spec.build(ctx, count)
            m = _measure_one(name, case, comm, MPI, plan["op"], timed, warmup, spec.reduces)
            del case
            measured.append(m)
            if "error" in m:  # the rest of this collective's sizes are refused alike
                measured += [m] * (len(sizes) - len(measured))
                break
        result[name] = measured
    if comm.rank == 0:
        with open(result_path, "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    _rank_main(sys.argv[1], sys.argv[2])
