// Ring kernel instantiations: 16-bit floats, every op (see ring_kernels.cu).
#include "kernels/ring_kernels.cuh"

namespace ring {
RING_INSTANTIATE_RING_KERNELS(Float16)
RING_INSTANTIATE_RING_KERNELS(BFloat16)
}  // namespace ring
