// Type-erased reduction for the CPU executor: one function pointer per (dtype, op).
// Why type erasure: the executor's loop is written once and the 90 instantiations live in one
// translation unit, at the cost of one indirect call per slice (a slice is many KiB).
#pragma once

#include <cstdint>

#include "common/types.h"

namespace ring {

using CombineFn = void (*)(void* dst, const void* a, const void* b, int64_t count);
using DivideFn = void (*)(void* data, int64_t divisor, int64_t count);
using ScaleFn = void (*)(void* out, const void* in, double factor, int64_t count);

// Which build of the combine and divide loops combineFn and divideFn serve: the baseline
// one, the one for AVX2 (256-bit vectors, F16C's float16 conversions) where the CPU has AVX2
// and F16C, or the one for AVX-512 (512-bit vectors; reduce_avx512.h) where it has AVX-512
// F/BW/DQ/VL (x86-64), or the NEON one (reduce_neon.h) where an aarch64 CPU has Advanced SIMD:
// the widest the CPU has unless TORCH_RING_CPU_ISA says otherwise. All give the same bits (a NaN's payload aside): each element is one operation on its own
// operands, whatever the vector width (reduce_table.cc). scaleFn, PREMUL_SUM's scaling,
// likewise.
enum class HostIsa : int { Baseline = 0, Avx2 = 1, Avx512 = 2, Neon = 3 };
constexpr int kHostIsas = 4;
HostIsa hostIsa();
// Whether this CPU (and binary) can run `isa`'s build, served or not.
bool hostSupports(HostIsa isa);
// "baseline", "avx2", "avx512", "neon": the names TORCH_RING_CPU_ISA takes.
const char* hostIsaName(HostIsa isa);

// Never null for a pair opSupported() accepts.
CombineFn combineFn(DType t, RedOp op);
// The combine of one build, any that hostSupports (tests and benchmarks).
CombineFn combineFnOf(HostIsa isa, DType t, RedOp op);
DivideFn divideFn(DType t);
// AVG's division of one build, as combineFnOf.
DivideFn divideFnOf(HostIsa isa, DType t);
ScaleFn scaleFn(DType t);
// PREMUL_SUM's scaling of one build, as combineFnOf.
ScaleFn scaleFnOf(HostIsa isa, DType t);

}  // namespace ring
