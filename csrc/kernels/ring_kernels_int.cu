// Ring kernel instantiations: integers and bool, every op (see ring_kernels.cu).
#include "kernels/ring_kernels.cuh"

namespace ring {
RING_INSTANTIATE_RING_KERNELS(Int8)
RING_INSTANTIATE_RING_KERNELS(Int16)
RING_INSTANTIATE_RING_KERNELS(Int32)
RING_INSTANTIATE_RING_KERNELS(Int64)
RING_INSTANTIATE_RING_KERNELS(UInt8)
RING_INSTANTIATE_RING_KERNELS(Bool)
}  // namespace ring
