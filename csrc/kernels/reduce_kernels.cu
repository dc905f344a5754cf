// Device instantiations of every reduce functor: proves in CI (no GPU) that each
// (dtype, op) pair compiles for the target architectures, and serves the CUDA path.
#include "kernels/reduce_kernels.h"

#include "kernels/cuda_api.h"
#include "reduce/reduce_ops.h"

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
__global__ void scaleKernel(void* out, const void* in, ScaleFactor f, int64_t count) {
  const double factor = scaleFactorValue<D>(f);
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

template <typename T> struct Exactly { using type = T; };

// Launches `kernel` over `count` elements on `stream`; the arguments are converted to the
// kernel's exact parameter types first (the runtime copies each by its parameter's size).
template <typename... P>
std::string launchOver(void (*kernel)(P...), int64_t count, void* stream,
                       typename Exactly<P>::type... args) {
  void* argv[] = {&args...};
  cudaError_t e = launchKernel(kernel, dim3(gridFor(count)), dim3(kThreads), argv,
                               static_cast<cudaStream_t>(stream));
  return e == cudaSuccess ? std::string() : std::string(cudaGetErrorString(e));
}

}  // namespace

std::string launchCombine(DType t, RedOp op, void* dst, const void* a, const void* b,
                          int64_t count, void* stream) {
  if (count <= 0) return {};
#define RING_CASE_OP(OP) \
  case RedOp::OP:        \
    return launchOver(&combineKernel<kType, RedOp::OP>, count, stream, dst, a, b, count);
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
#define RING_CASE_TYPE(TYPE) \
  case DType::TYPE:          \
    return launchOver(&divideKernel<DType::TYPE>, count, stream, data, divisor, count);
  switch (t) {
    RING_FOR_EACH_DTYPE(RING_CASE_TYPE)
    default: return "unsupported dtype";
  }
#undef RING_CASE_TYPE
}

std::string launchScale(DType t, void* out, const void* in, ScaleFactor factor, int64_t count,
                        void* stream) {
  if (count <= 0) return {};
#define RING_CASE_TYPE(TYPE) \
  case DType::TYPE:          \
    return launchOver(&scaleKernel<DType::TYPE>, count, stream, out, in, factor, count);
  switch (t) {
    RING_FOR_EACH_DTYPE(RING_CASE_TYPE)
    default: return "unsupported dtype";
  }
#undef RING_CASE_TYPE
}

}  // namespace ring
