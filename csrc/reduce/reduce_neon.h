// The NEON (Advanced SIMD) build of the host reduction loops, for 64-bit Arm hosts (Grace,
// Graviton, Ampere); reduce_table.h serves it where the CPU has Advanced SIMD. Internal to
// reduce/: the executor reaches it only through reduce_table.h's combineFn, divideFn, scaleFn.
#pragma once

#include "common/types.h"
#include "reduce/reduce_table.h"

namespace ring {

// Advanced SIMD and floating point, as the kernel reports them (getauxval(AT_HWCAP)); false
// where this binary has no NEON build (not aarch64).
bool cpuHasNeon();

// The build's own loops for (t, op), AVG's division of t, PREMUL_SUM's scaling of t: float32's
// combine, float16's and bfloat16's combine, division and scaling; null for the rest, which
// the baseline loops serve (on aarch64 the compiler already vectorizes those with Advanced
// SIMD, part of every ARMv8-A CPU), and where this binary has no NEON build.
CombineFn neonCombine(DType t, RedOp op);
DivideFn neonDivide(DType t);
ScaleFn neonScale(DType t);

}  // namespace ring
