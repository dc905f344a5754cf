// Ring kernel instantiations: the unsigned integers wider than a byte (uint16, uint32,
// uint64), every op they support (see ring_kernels.cu); uint8 is with the one-byte types.
#include "kernels/ring_kernels.cuh"

namespace ring {
RING_INSTANTIATE_RING_KERNELS(UInt16)
RING_INSTANTIATE_RING_KERNELS(UInt32)
RING_INSTANTIATE_RING_KERNELS(UInt64)
}  // namespace ring
