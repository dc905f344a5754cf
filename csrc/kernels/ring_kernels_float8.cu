// Ring kernel instantiations: the 8-bit floats (float8_e4m3fn, float8_e5m2), every op they
// support (see ring_kernels.cu), reduced in float and rounded as reduce/float8_bits.h says.
#include "kernels/ring_kernels.cuh"

namespace ring {
RING_INSTANTIATE_RING_KERNELS(Float8E4M3)
RING_INSTANTIATE_RING_KERNELS(Float8E5M2)
}  // namespace ring
