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

// Never null for a pair opSupported() accepts.
CombineFn combineFn(DType t, RedOp op);
DivideFn divideFn(DType t);
ScaleFn scaleFn(DType t);

}  // namespace ring
