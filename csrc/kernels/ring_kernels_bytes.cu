// Ring kernel instantiations: the one-byte types (int8, uint8, bool), every op (see
// ring_kernels.cu and ring_kernels_int.cu).
#include "kernels/ring_kernels.cuh"

namespace ring {
RING_INSTANTIATE_RING_KERNELS(Int8)
RING_INSTANTIATE_RING_KERNELS(UInt8)
RING_INSTANTIATE_RING_KERNELS(Bool)
}  // namespace ring
