"""The mutants of the host's inner loops: the vector builds of the reductions (AVX2, AVX-512),
the dtypes added after the first ten, the copy into a slot another core reads and its start
read from the machine. Part of mutants.py's list."""
from mutant_type import Mutant

# What cpuHasAvx512() (csrc/reduce/reduce_avx512.cc) asks of the CPU before it serves that build.
AVX512 = ("avx512f", "avx512bw", "avx512dq", "avx512vl")

HOST_LOOP_MUTANTS = [
    # The AVX2 build of the host reductions (reduce/reduce_table.cc).
    Mutant("f16c_rounds_toward_zero", "csrc/reduce/reduce_table.cc",
           "_mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT));",
           "_mm256_cvtps_ph(f, _MM_FROUND_TO_ZERO));", "cpp", "ReduceOps.*",
           why="the AVX2 build's float16 combine truncates where toHalf rounds to nearest even: "
               "ranks on CPUs with and without AVX2 would differ"),
    Mutant("avx2_build_never_served", "csrc/reduce/reduce_table.cc",
           "  return f16c && __builtin_cpu_supports(\"avx2\");", "  return false;", "cpp",
           "ReduceOps.TheWidestBuild*",
           why="the vector build is never served on a CPU that has AVX2 and F16C"),
    # The dtypes added after the first ten (reduce/float8_bits.h, common/types.h).
    Mutant("float8_e4m3_overflow_is_nan", "csrc/reduce/float8_bits.h",
           "using E4M3Format = Float8Format<3, 7, 0x7eu, 0x7eu>;",
           "using E4M3Format = Float8Format<3, 7, 0x7eu, 0x7fu>;", "cpp",
           "Float8Bits.*:ReduceOps.Float8*", quick=True,
           why="an e4m3fn sum past 448 becomes NaN where torch (2.13 and later) saturates"),
    Mutant("float8_e4m3_overflow_is_nan_py", "csrc/reduce/float8_bits.h",
           "using E4M3Format = Float8Format<3, 7, 0x7eu, 0x7eu>;",
           "using E4M3Format = Float8Format<3, 7, 0x7eu, 0x7fu>;", "py",
           "tests/python/test_wide_unsigned_float8.py -x -q -k every_pair",
           why="the same, caught by the Python suite against torch's own cast"),
    Mutant("float8_ties_away_from_even", "csrc/reduce/float8_bits.h",
           "(dropped > half || (dropped == half && (kept & 1u)))", "(dropped >= half)", "cpp",
           "Float8Bits.*:ReduceOps.Float8*", quick=True,
           why="a float8 result halfway between two patterns rounds up instead of to the even one"),
    Mutant("uint32_reduced_as_int32", "csrc/reduce/reduce_ops.h",
           "struct StorageOf<DType::UInt32> { using type = uint32_t; };",
           "struct StorageOf<DType::UInt32> { using type = int32_t; };", "py",
           "tests/python/test_wide_unsigned_float8.py -x -q -k unsigned",
           why="uint32 MIN/MAX order values with the top bit set as negatives, and AVG divides "
               "them as negatives"),
    Mutant("uint32_reduced_as_int32_check", "csrc/reduce/reduce_ops.h",
           "struct StorageOf<DType::UInt32> { using type = uint32_t; };",
           "struct StorageOf<DType::UInt32> { using type = int32_t; };", "py",
           "tests/python/test_init.py -x -q -k check_command",
           why="the same, caught by torch-ring-check's uint32 row (its MAX)"),
    Mutant("unsigned_premul_sum_accepted", "csrc/common/types.h",
           "return t != DType::Bool && (t == DType::UInt8 || !isUnsigned(t));",
           "return t != DType::Bool;", "cpp", "ReduceOps.WideUnsigned*", quick=True,
           why="a negative PREMUL_SUM factor converts to uint64 (undefined in C++) instead of "
               "being refused"),
    # The AVX-512 build (reduce/reduce_avx512.cc).
    Mutant("avx512_build_never_served", "csrc/reduce/reduce_table.cc",
           "    case HostIsa::Avx512: return cpuHasAvx2() && cpuHasAvx512();",
           "    case HostIsa::Avx512: return false;", "cpp", "ReduceOps.TheWidestBuild*",
           quick=True, needs=AVX512, why="a CPU with AVX-512 is served the AVX2 build"),
    Mutant("bf16_avx512_subnormals_through_the_instruction", "csrc/reduce/reduce_avx512.cc",
           "  if (subnormal != 0) {", "  if (false) {", "cpp", "SixteenBitBuilds.*", quick=True,
           needs=AVX512,
           why="VCVTNEPS2BF16 reads subnormal sums as zero: bfloat16 results below 2^-126 "
               "differ from the other builds'"),
    Mutant("bf16_avx512_rounds_ties_up", "csrc/reduce/reduce_avx512.cc",
           "_mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb);",
           "_mm512_add_epi32(_mm512_set1_epi32(0x8000), _mm512_setzero_si512());", "cpp",
           "SixteenBitBuilds.*", quick=True, needs=AVX512,
           why="the AVX-512 build's integer bfloat16 rounding rounds ties up, not to even"),
    Mutant("bf16_avx512_scale_halves_swapped", "csrc/reduce/reduce_avx512.cc",
           "_mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1)",
           "_mm512_insertf32x8(_mm512_castps256_ps512(hi), lo, 1)", "cpp",
           "ReduceOps.VectorBuildsScale*", quick=True, needs=AVX512,
           why="the AVX-512 build's PREMUL_SUM writes each sixteen bfloat16 products' halves "
               "in each other's places"),
    Mutant("cpu_isa_knob_ignored", "csrc/reduce/reduce_table.cc",
           "  if (asked == \"baseline\") return HostIsa::Baseline;\n", "", "py",
           "tests/python/test_knobs.py -x -q -k reduction_build",
           why="TORCH_RING_CPU_ISA=baseline still serves the AVX2 build"),
    Mutant("f16c_divides_by_the_wrong_divisor", "csrc/reduce/reduce_table.cc",
           "_mm256_set1_ps(static_cast<float>(divisor));",
           "_mm256_set1_ps(static_cast<float>(divisor + 1));", "cpp", "ReduceOps.*",
           why="the AVX2 build's float16 AVG divides by n + 1"),
    Mutant("bf16_avx2_rounds_ties_up", "csrc/reduce/reduce_table.cc",
           "_mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb);",
           "_mm256_add_epi32(_mm256_set1_epi32(0x8000), _mm256_setzero_si256());", "cpp",
           "ReduceOps.*",
           why="the AVX2 build's bfloat16 rounds ties up, where toBFloat16 rounds them to even"),
    Mutant("avx2_scale_rounds_the_factor_to_float", "csrc/reduce/reduce_table.cc",
           "const __m256d by = _mm256_set1_pd(factor);",
           "const __m256d by = _mm256_set1_pd(static_cast<float>(factor));", "cpp",
           "ReduceOps.*",
           why="PREMUL_SUM's AVX2 scaling rounds the factor to float first: other bits than "
               "the baseline's for some float16 products (factor 3.353773474374694)"),
    Mutant("avx2_scale_never_served", "csrc/reduce/reduce_table.cc",
           "  return tb.scale[static_cast<int>(tb.best)][static_cast<int>(t)];",
           "  return tb.scale[0][static_cast<int>(t)];", "cpp", "ReduceOps.*",
           why="PREMUL_SUM keeps the baseline scaling where the AVX2 one is served (13-19x "
               "slower for float16)"),
    Mutant("cpu_bind_ignored", "csrc/executor/communicator.cc",
           '  if (env().cpuBind == "core") bindToCore(', "  if (false) bindToCore(", "py",
           "tests/python/test_cpu_bind.py -x -q",
           why="TORCH_RING_CPU_BIND=core is read and checked but binds nothing"),
    Mutant("cpu_bind_every_rank_to_the_first_cpu", "csrc/common/cpu_binding.cc",
           "  const int cpu = cpus[static_cast<size_t>(localIndex)];",
           "  const int cpu = cpus[0];", "cpp", "CpuBinding.*",
           why="every rank of a machine bound to one CPU: the very sharing the binding prevents"),
    Mutant("spin_counts_the_bound_cpu", "csrc/common/cpu_binding.cc",
           "  return bound_ ? before_ : threadCpus();", "  return threadCpus();", "cpp",
           "CpuBinding.*",
           why="a group made after the binding counts one CPU for the machine's ranks and "
               "spins 50 us with a yield per look where each rank has a core"),
    # The copy into a slot or mailbox another core reads (transport/streaming_copy.h).
    Mutant("streaming_copy_drops_its_tail", "csrc/transport/streaming_copy.h",
           "    std::memcpy(d + i, s + i, bytes - i);", "", "cpp",
           "StreamingCopy.*:*CommunicatorInWorld.*", quick=True,
           why="a streamed copy whose length is no multiple of 16 leaves its last bytes out: "
               "slots and mailbox messages of such sizes arrive with stale bytes"),
    Mutant("streaming_copy_ignores_the_alignment", "csrc/transport/streaming_copy.h",
           "    const size_t head = (16 - (reinterpret_cast<uintptr_t>(d) & 15)) & 15;",
           "    const size_t head = 0;", "cpp", "StreamingCopy.*",
           why="movntdq to a destination off a 16-byte boundary (a fault) where the slot's "
               "payload is not aligned"),
    Mutant("mailbox_streamed_from_the_wrong_place", "csrc/transport/shm/shm_mailbox.cc",
           "    copyForPeer(payload(h, bytes), data, static_cast<size_t>(bytes));",
           "    copyForPeer(payload(h, bytes), static_cast<const char*>(data) + 64, "
           "static_cast<size_t>(bytes));", "py",
           "tests/python/test_all_reduce.py -x -q -k float32",
           why="the mailbox round's message of 4 KiB and more comes from 64 bytes past the "
               "tensor: every rank sums wrong values"),
    Mutant("copy_choice_keeps_the_slower", "csrc/executor/copy_choice.cc",
           "    c.streams = c.best[1] <= c.best[0];", "    c.streams = c.best[1] >= c.best[0];",
           "cpp", "CopyChoice.*", quick=True,
           why="the group's copies follow the method its trials found slower"),
    Mutant("copy_choice_trials_never_timed", "csrc/executor/communicator_issue.cc",
           "  if (p.copy.trial) {\n    const double micros", "  if (false) {\n    const double micros",
           "cpp", "CopyChoice.*:CommunicatorCopyChoice.*", quick=True,
           why="the trials run but their times never reach the choice: a machine where cached "
               "copies are faster streams for good"),
    # The copy's start, read from the machine (common/cache_topology.h, chooseCopyStart).
    Mutant("copy_start_ignores_the_machine", "csrc/executor/group_setup.cc",
           "  return !shared;", "  return true;", "cpp", "CopyStart.*:CopyChoice.*", quick=True,
           why="every group starts streamed, as before the tree was read: where the host's "
               "ranks share an L3 a short job's copies all go through memory (1-16 MiB "
               "all_reduce 1.5-2.4x slower on a Zen 5 EPYC whose cores share one)"),
    Mutant("copy_start_a_rank_free_on_two_caches_counts_as_one", "csrc/common/cache_topology.cc",
           "line == \"?\" || line.empty() || line.find(' ') != std::string::npos",
           "line == \"?\" || line.empty()", "cpp", "CacheTopology.*:CopyStart.*",
           why="ranks each free to run under two L3s (unbound on a two-CCX EPYC) start cached "
               "as if they shared one"),
    Mutant("copy_start_reads_the_instruction_cache", "csrc/common/cache_topology.cc",
           "    if (!type || *type == \"Instruction\") continue;", "    if (!type) continue;",
           "cpp", "CacheTopology.*",
           why="an instruction cache above the data caches is taken for the last level"),
]
