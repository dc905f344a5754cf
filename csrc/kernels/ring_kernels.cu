// The one dispatch of the ring kernels over every (dtype, op) pair: RING_FOR_EACH_DTYPE here,
// RING_FOR_EACH_OP inside launchRingKernelFor (ring_kernels.cuh). The kernels themselves are
// instantiated in ring_kernels_{float,half,int}.cu so that a parallel build compiles them in
// parallel; the extern declarations below keep this file from instantiating them again.
#include "kernels/ring_kernels.cuh"

namespace ring {

#define RING_EXTERN_RING_KERNELS(TYPE)                                                  \
  extern template cudaError_t launchRingKernelFor<DType::TYPE>(RedOp, const RingKernelParams&, \
                                                               cudaStream_t);                  \
  extern template cudaError_t inspectRingKernelsFor<DType::TYPE>(RingKernelFootprint*);
RING_FOR_EACH_DTYPE(RING_EXTERN_RING_KERNELS)
#undef RING_EXTERN_RING_KERNELS

cudaError_t launchRingKernel(DType dtype, RedOp op, const RingKernelParams& p,
                             cudaStream_t stream) {
  switch (dtype) {
#define RING_DISPATCH_TYPE(TYPE) \
  case DType::TYPE:              \
    return launchRingKernelFor<DType::TYPE>(op, p, stream);
    RING_FOR_EACH_DTYPE(RING_DISPATCH_TYPE)
#undef RING_DISPATCH_TYPE
    default:
      return cudaErrorInvalidValue;
  }
}

cudaError_t inspectRingKernels(RingKernelFootprint* f) {
  cudaError_t e = cudaSuccess;
#define RING_INSPECT_TYPE(TYPE)                          \
  e = inspectRingKernelsFor<DType::TYPE>(f);             \
  if (e != cudaSuccess) return e;
  RING_FOR_EACH_DTYPE(RING_INSPECT_TYPE)
#undef RING_INSPECT_TYPE
  return cudaSuccess;
}

}  // namespace ring
