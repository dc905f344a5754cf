// The AVX-512 build of the host reduction loops (reduce_table.h serves it): bfloat16 sixteen
// lanes at a time, narrowed through AVX512_BF16 where the CPU has it; the other dtypes' loops
// are the AVX2 build's (why: reduce_avx512.cc). Internal to reduce/: the executor reaches it
// only through reduce_table.h's combineFn, divideFn and scaleFn.
#pragma once

#include "common/types.h"
#include "reduce/reduce_table.h"

namespace ring {

// AVX-512 F, BW, DQ and VL (x86-64-v4's vector part) with the OS saving the 512-bit registers.
bool cpuHasAvx512();

// The build's own loops for (t, op), AVG's division of t, PREMUL_SUM's scaling of t; null for
// the dtypes it leaves to the AVX2 build, and where this binary has no AVX-512 build (not
// x86-64, or a compiler without the target attribute).
CombineFn avx512Combine(DType t, RedOp op);
DivideFn avx512Divide(DType t);
ScaleFn avx512Scale(DType t);

}  // namespace ring
