// Element-wise reduction on the GPU for every (dtype, op) pair: the same functors as the CPU
// table (reduce_ops.h), instantiated for the device. Torch-free; callers pass a raw stream.
#pragma once

#include <cstdint>
#include <string>

#include "common/types.h"
#include "kernels/scale_factor.h"

namespace ring {

// dst[i] = a[i] (op) b[i] for i < count, enqueued on `stream` (a cudaStream_t). Returns an
// empty string on success, else the CUDA error text (the caller raises it with context).
std::string launchCombine(DType t, RedOp op, void* dst, const void* a, const void* b,
                          int64_t count, void* stream);

// v[i] /= divisor (AVG's last step), on `stream`.
std::string launchDivide(DType t, void* data, int64_t divisor, int64_t count, void* stream);

// out[i] = in[i] * factor (PREMUL_SUM's first step), on `stream`.
std::string launchScale(DType t, void* out, const void* in, ScaleFactor factor, int64_t count,
                        void* stream);

}  // namespace ring
