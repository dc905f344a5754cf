"""One MPI rank of a `torch-ring-bench --latency` job (latency.py starts them with mpirun): the
same cold and steady phases as ring's ranks, through mpi4py's Allreduce on float32 arrays; rank
0 writes each call's microseconds to the result file."""
import json
import sys


def main(plan_path, result_path):
    import numpy as np
    from mpi4py import MPI

    from .latency import COLD_BYTES, COLD_CALLS, COLD_WARMUP, _per_call_us, cpu_probe_ms

    comm = MPI.COMM_WORLD
    with open(plan_path) as f:
        plan = json.load(f)
    t = np.ones(COLD_BYTES // 4, dtype=np.float32)
    # Before the warm-up calls, as latency.py does for ring (so the ranks start the cold phase
    # together).
    before = cpu_probe_ms()
    for _ in range(COLD_WARMUP):
        comm.Allreduce(MPI.IN_PLACE, t)
    result = {"cold": _per_call_us(lambda: comm.Allreduce(MPI.IN_PLACE, t), COLD_CALLS),
              "steady": {}, "probe_ms": {}}
    comm.Barrier()  # before the probe after a phase, as latency.py does (why: there)
    # The slowest rank's core speed around each phase, as latency.py measures ring's.
    result["probe_ms"]["cold"] = comm.allreduce((before + cpu_probe_ms()) / 2, op=MPI.MAX)
    for nbytes in plan["sizes"]:
        x = np.ones(max(1, nbytes // 4), dtype=np.float32)
        for _ in range(plan["settle"]):
            comm.Allreduce(MPI.IN_PLACE, x)
        before = cpu_probe_ms()
        comm.Barrier()  # after the probe, which the ranks finish apart
        result["steady"][str(nbytes)] = _per_call_us(lambda: comm.Allreduce(MPI.IN_PLACE, x),
                                                     plan["calls"])
        comm.Barrier()
        result["probe_ms"][str(nbytes)] = comm.allreduce((before + cpu_probe_ms()) / 2, op=MPI.MAX)
    if comm.rank == 0:
        with open(result_path, "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
