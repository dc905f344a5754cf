// Ring kernel instantiations: 16-, 32- and 64-bit integers, every op (see ring_kernels.cu).
// The one-byte types have a file of their own (ring_kernels_bytes.cu): one translation unit
// per dtype family keeps each nvcc run short and lets a parallel build run them side by side.
#include "kernels/ring_kernels.cuh"

namespace ring {
RING_INSTANTIATE_RING_KERNELS(Int16)
RING_INSTANTIATE_RING_KERNELS(Int32)
RING_INSTANTIATE_RING_KERNELS(Int64)
}  // namespace ring
