// Ring kernel instantiations: 32- and 64-bit floats, every op (see ring_kernels.cu).
#include "kernels/ring_kernels.cuh"

namespace ring {
RING_INSTANTIATE_RING_KERNELS(Float32)
RING_INSTANTIATE_RING_KERNELS(Float64)
}  // namespace ring
