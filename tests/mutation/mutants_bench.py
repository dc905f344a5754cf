"""Mutants of the benchmarks' references and loads (torch_ring_backend/bench, scripts): the
DeepSpeed reference, the competing load, the tensor-parallel decode; and of what the loaded
benchmark found: the waits' spin beside busy processes. Part of mutants.py's list."""
from mutant_type import Mutant

BENCH_MUTANTS = [
    Mutant("deepspeed_local_size_unset", "torch_ring_backend/bench/deepspeed_reference.py",
           '        os.environ["LOCAL_SIZE"] = str(world)  # see the module\'s docstring',
           "        pass", "py", "tests/python/test_bench_deepspeed.py -x -q -k columns",
           why="DeepSpeed's op runs its reduction on an unmapped workspace (its ranks die of "
               "SIGSEGV, as under torchrun without LOCAL_SIZE)"),
    Mutant("deepspeed_max_timed_as_its_sum", "torch_ring_backend/bench/deepspeed_reference.py",
           '        if ctx.op_name != "sum":', "        if False:", "py",
           "tests/python/test_bench_deepspeed.py -x -q -k refused",
           why="--op max times DeepSpeed's op, which returns the sum: a wrong answer timed"),
    Mutant("deepspeed_workspaces_left", "torch_ring_backend/bench/deepspeed_reference.py",
           "            os.unlink(os.path.join(\"/dev/shm\", workspace_name(self.rank)))",
           "            pass", "py", "tests/python/test_bench_deepspeed.py -x -q -k columns",
           why="66 MiB of /dev/shm per rank left behind by every run, as DeepSpeed leaves them"),
    Mutant("refusal_for_the_first_size_only", "torch_ring_backend/bench/measure.py",
           "            yield from [m] * (len(plan) - i + 1)", "            yield m", "py",
           "tests/python/test_bench_deepspeed.py -x -q -k refused",
           why="a reference's refusal shows at its first size only; the other rows read as "
               "measured without a number"),
    Mutant("load_starts_nothing", "torch_ring_backend/bench/load.py",
           "        for _ in range(self.processes):", "        for _ in range(0):", "py",
           "tests/python/test_bench.py -x -q -k loaded",
           why="--load reports N busy processes and runs the sweep on quiet cores"),
    Mutant("tp_decode_mlp_output_not_reduced", "scripts/tp_decode_bench.py",
           "        all_reduce(out)\n        x = x + out\n    return x",
           "        x = x + out\n    return x", "py",
           "tests/python/test_tp_decode_bench.py -x -q",
           why="the row-parallel MLP's partial sums are added unreduced: every rank computes "
               "its own wrong model"),
    Mutant("tp_decode_runs_a_deepspeed_kernel_the_cpu_lacks", "scripts/tp_decode_bench.py",
           "        if reason:\n            p.error(f\"--backends deepspeed: {reason}\")",
           "        pass", "py", "tests/python/test_tp_decode_bench.py -x -q -k refused",
           why="DeepSpeed's bfloat16 op is called on a CPU without AVX-512BW: its ranks die of "
               "SIGILL (killed only on such a CPU; elsewhere its test skips)"),
    # The channels model (torch_ring_backend/bench/channels_model.py, issue 72).
    Mutant("channels_model_ignores_the_channels", "torch_ring_backend/bench/channels_model.py",
           "(1 / reduce + 1 / copy) / channels,", "(1 / reduce + 1 / copy),", "py",
           "tests/python/test_channels_model.py -x -q",
           why="the model's cores do not share a call: busbw never grows with C"),
]

# The waits' spin where each rank has a core (transport/wait.h, yieldWhileSpinning).
SPIN_MUTANTS = [
    Mutant("wait_spin_yields_beside_its_own_core", "csrc/transport/wait.cc",
           "        if (ctx.yieldWhileSpinning) std::this_thread::yield();",
           "        std::this_thread::yield();", "cpp", "WaitSpin.*", quick=True,
           why="a waiter with a core of its own yields it every 64 pauses: beside busy "
               "processes one of them keeps the core for a slice (1 MiB all_reduce 10-12 ms)"),
    Mutant("group_waits_yield_beside_their_own_cores", "csrc/executor/communicator_calls.h",
           "  ctx.yieldWhileSpinning = !ownCore_;", "  ctx.yieldWhileSpinning = true;", "cpp",
           "WaitSpin.*",
           why="the group's waits yield where every rank has a core"),
    Mutant("callers_patience_yields_beside_its_own_core", "csrc/executor/communicator_issue.cc",
           "    if (!ownCore_) std::this_thread::yield();", "    std::this_thread::yield();",
           "cpp", "WaitSpin.*",
           why="the caller's patience for its peers yields its core every 64 looks"),
]
