// Lets the same arithmetic compile for the host compiler and for nvcc.
#pragma once

#if defined(__CUDACC__)
#define RING_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define RING_HOST_DEVICE inline
#endif
