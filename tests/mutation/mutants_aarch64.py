"""The mutants of the aarch64 build: the NEON reduction loops (csrc/reduce/reduce_neon.cc) and
their selection, killed by the tests cross-built for aarch64 and run under qemu-user ("a64",
scripts/test_aarch64.sh's build). Part of mutants.py's list."""
from mutant_type import Mutant

A64_MUTANTS = [
    Mutant("neon_bf16_rounds_ties_up", "csrc/reduce/reduce_neon.cc",
           "vaddq_u32(vdupq_n_u32(0x7fff), vandq_u32(top, vdupq_n_u32(1)))",
           "vdupq_n_u32(0x8000)", "a64", "SixteenBitBuilds.*:ReduceOps.VectorBuilds*",
           why="the NEON bfloat16 narrowing rounds a tie away from zero, not to even: ranks on "
               "Arm and x86 hold different bits"),
    Mutant("neon_max_drops_the_nan", "csrc/reduce/reduce_neon.cc",
           "    return vbslq_f32(takeA, a, b);", "    return vbslq_f32(aWins, a, b);", "a64",
           "ReduceOps.VectorBuilds*", why="the NEON MAX/MIN lets a number win over a NaN operand "
           "(torch.maximum propagates it)"),
    Mutant("neon_half_narrows_toward_zero", "csrc/reduce/reduce_neon.cc",
           "  const float16x8_t h = vcvt_high_f16_f32(vcvt_f16_f32(f.val[0]), f.val[1]);",
           "  const float16x8_t h = vcvt_high_f16_f32(vcvt_f16_f32(vrndq_f32(f.val[0])), "
           "f.val[1]);", "a64", "SixteenBitBuilds.*",
           why="the NEON float16 narrowing drops the fraction of half its lanes"),
    Mutant("neon_never_served", "csrc/reduce/reduce_table.cc",
           "    case HostIsa::Neon: return cpuHasNeon();", "    case HostIsa::Neon: return false;",
           "a64", "ReduceOps.TheWidestBuild*",
           why="an aarch64 CPU with Advanced SIMD runs the portable loops, its 16-bit floats "
               "an element at a time"),
]
