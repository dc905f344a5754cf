// Device instantiations of every reduce functor: proves in CI (no GPU) that each
// (dtype, op) pair compiles for the target architectures, and serves the CUDA path.
#include "kernels/reduce_kernels.h"

#include <cuda_runtime.h>

#include "kernels/reduce_ops.h"

namespace ring {
namespace {

// Grid-stride loops: one launch covers any count with a bounded grid.
template <DType D, RedOp Op>
__global__ void combineKernel(void* dst, const void* a, const void* b, int64_t count) {
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += stride) {
    combineRange<D, Op>(dst, a, b, i, i + 1);
  }
}

template <DType D>
__global__ void divideKernel(void* data, int64_t divisor, int64_t count) {
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += stride) {
    divideRange<D>(data, divisor, i, i + 1);
  }
}

template <DType D>
__global__ void scaleKernel(void* out, const void* in, double factor, int64_t count) {
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += stride) {
    scaleRange<D>(out, in, factor, i, i + 1);
  }
}

constexpr int kThreads = 256;

unsigned gridFor(int64_t count) {
  int64_t blocks = (count + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 4096 ? 4096 : blocks));
}

std::string lastError() {
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? std::string() : std::string(cudaGetErrorString(e));
}

}  // namespace

std::string launchCombine(DType t, RedOp op, void* dst, const void* a, const void* b,
                          int64_t count, void* stream) {
  if (count <= 0) return {};
  auto s = static_cast<cudaStream_t>(stream);
#define RING_CASE_OP(OP)                                                               \
  case RedOp::OP:                                                                      \
    combineKernel<kType, RedOp::OP><<<gridFor(count), kThreads, 0, s>>>(dst, a, b, count); \
    return lastError();
#define RING_CASE_TYPE(TYPE)                  \
  case DType::TYPE: {                         \
    constexpr DType kType = DType::TYPE;      \
    switch (op) {                             \
      RING_FOR_EACH_OP(RING_CASE_OP)          \
      default: return "unsupported op";       \
    }                                         \
  }
  switch (t) {
    RING_FOR_EACH_DTYPE(RING_CASE_TYPE)
    default: return "unsupported dtype";
  }
#undef RING_CASE_TYPE
#undef RING_CASE_OP
}

std::string launchDivide(DType t, void* data, int64_t divisor, int64_t count, void* stream) {
  if (count <= 0) return {};
  auto s = static_cast<cudaStream_t>(stream);
#define RING_CASE_TYPE(TYPE)                                                      \
  case DType::TYPE:                                                               \
    divideKernel<DType::TYPE><<<gridFor(count), kThreads, 0, s>>>(data, divisor, count); \
    return lastError();
  switch (t) {
    RING_FOR_EACH_DTYPE(RING_CASE_TYPE)
    default: return "unsupported dtype";
  }
#undef RING_CASE_TYPE
}

std::string launchScale(DType t, void* out, const void* in, double factor, int64_t count,
                        void* stream) {
  if (count <= 0) return {};
  auto s = static_cast<cudaStream_t>(stream);
#define RING_CASE_TYPE(TYPE)                                                          \
  case DType::TYPE:                                                                   \
    scaleKernel<DType::TYPE><<<gridFor(count), kThreads, 0, s>>>(out, in, factor, count); \
    return lastError();
  switch (t) {
    RING_FOR_EACH_DTYPE(RING_CASE_TYPE)
    default: return "unsupported dtype";
  }
#undef RING_CASE_TYPE
}

}  // namespace ring
