// Checks of CUDA runtime calls: a failure throws CommError naming the call, CUDA's error name
// and text, the source location, and whatever context the caller adds (always the rank).
#pragma once

#include <cuda_runtime.h>

#include "common/errors.h"

// RING_CUDA_CHECK(cudaMalloc(&p, n), "rank ", rank, ", inbox of ", n, " bytes");
#define RING_CUDA_CHECK(call, ...)                                                           \
  do {                                                                                       \
    cudaError_t ringCudaError_ = (call);                                                     \
    if (ringCudaError_ != cudaSuccess) {                                                     \
      /* Clear the (non-sticky) error so that it is not reported again by a later call. */  \
      (void)cudaGetLastError();                                                              \
      throw ::ring::CommError(::ring::strCat(#call, " failed: ",                             \
                                             cudaGetErrorString(ringCudaError_), " (",       \
                                             cudaGetErrorName(ringCudaError_), ") at ",      \
                                             __FILE__, ":", __LINE__, "; ", ##__VA_ARGS__)); \
    }                                                                                        \
  } while (0)
