"""nccl-tests-style benchmark: the "ring" backend and the reference backend side by side, one run.

    python -m torch_ring_backend.bench                            # all_reduce, 2 local ranks, CPU
    python -m torch_ring_backend.bench --nproc 4 --max-bytes 16M --collectives all_reduce,all_gather
    python -m torch_ring_backend.bench --json out.json --csv out.csv --plot out.png
    torchrun --nproc_per_node 2 -m torch_ring_backend.bench       # ranks from torchrun
    python -m torch_ring_backend.bench --device cuda              # nccl as the reference
    python -m torch_ring_backend.bench --latency                  # per-call latency, 10 jobs

Every rank joins two process groups over the same ranks: "ring" (the default group) and the
reference (gloo on CPU, nccl on CUDA; --reference takes a list: gloo, nccl, mpi, deepspeed,
fake; deepspeed is DeepSpeed's shared-memory all_reduce op, not a process group). Each
collective is measured at every size (doubling from --min-bytes to --max-bytes) with the same
inputs on all: ring's whole sweep first, then each reference's (see _sweep in launch.py; the
MPI ranks run after ring's have exited: mpi_reference.py). Every rank first copies memory for
WARM_UP_SECONDS (measure.py says why). `--load N` runs the whole sweep, every backend's, beside
N busy processes (load.py). Columns (docs/conventions.md section 2):

  size     bytes of the full array: the all_gather output, the reduce_scatter input
  time     microseconds per call: `iters` back-to-back calls after a barrier, slowest rank
  algbw    size / time, GB/s (1e9 bytes)
  busbw    algbw x 2(n-1)/n for all_reduce; x (n-1)/n for all_gather, reduce_scatter and
           all_to_all; x 1 for broadcast. Comparable across world sizes and with link speed.
  roof%    busbw as a percentage of this machine's memory-copy bandwidth: bytes per second one
           process copies between two 256 MiB buffers, the faster of torch's copy_ and memcpy.
           The ceiling of a shared-memory transport, whose every step is such a copy.
  #wrong   output elements that differ from the closed-form expected result, over all ranks.
           Inputs are small integers, so every reduction order gives the same exact result.
  ratio    ring busbw / reference busbw (equally: reference time / ring time)

The benchmark is a package, one job per file; each file imports only the ones listed before it:

  cases.py    the collectives: inputs, closed-form expected results, #wrong, busbw factors
  load.py     --load: busy processes competing for the cores during a sweep
  options.py  the command line: Config, parse_config, parse_size, BadInput (exit code 2)
  measure.py  timing one collective at one size, the sizes of a sweep, the copy roofline
  report.py   rows, run metadata, the table on stdout, the --json, --csv and --plot files
  mpi_reference.py  the MPI reference: the same plan through mpi4py, in ranks of its own
  deepspeed_reference.py  DeepSpeed's shared-memory all_reduce op, in ring's ranks, measured as
              a process group is (what it gets silently wrong refused by name)
  latency.py  `--latency`: per-call times of small all_reduces over many separate jobs (ring,
              torch's fake, Open MPI through latency_mpi.py), the spread across jobs
  model.py    `python -m torch_ring_backend.bench.model`: the alpha-beta scale model of all_reduce
              plans over hosts (imports options only)
  launch.py   main(): local ranks or torchrun, run_rank, the ring-then-reference sweep
  __main__.py `python -m torch_ring_backend.bench`
  spread.py   `python -m torch_ring_backend.bench.spread run*.json`: the slowest over the
              fastest of several runs' --json files, per collective and size (imports none)

The names below are re-exported, so `from torch_ring_backend import bench` and the console
script (torch_ring_backend.bench:main) find them here as before; bench.measure, though, is now
the module, and the function it holds is bench.measure.measure.
"""
from .cases import (COLLECTIVES, DTYPES, OPS, Case, Collective, RankContext, _count_wrong,
                    contribution_tile, fill_periodic, is_inplace, movement_tile, reduced_tile)
from .launch import main, run_rank
from .measure import Measurement, iterations_for, measure_copy_bandwidth, sweep_sizes
from .options import PROG, BadInput, Config, GiB, KiB, MiB, parse_config, parse_size
from .report import Table, plot_busbw, write_outputs
