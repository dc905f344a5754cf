// The one switch between the two builds of the kernel sources: the CUDA runtime for the GPU
// build, the host shim (host_shim.h: CUDA built-ins on the C++ memory model, launches as host
// threads) for the host build that tests the same kernels without a GPU. Everything else in
// the kernel sources is shared; only the primitives behind these headers differ.
#pragma once

#if defined(RING_HOST_KERNELS)
#include "kernels/host_shim.h"
#else
#include <cuda_runtime.h>
#endif
