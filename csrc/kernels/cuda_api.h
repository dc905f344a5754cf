// The one switch between the two builds of the kernel sources: the CUDA runtime for the GPU
// build, the host shim (host_shim.h: CUDA built-ins on the C++ memory model, launches as host
// threads) for the host build that tests the same kernels without a GPU. Everything else in
// the kernel sources is shared; only the primitives behind these headers differ.
#pragma once

#if defined(RING_HOST_KERNELS)
#include "kernels/host_shim.h"
#else
#include <cuda_runtime.h>

namespace ring {

// The project's one kernel launch (host_shim.h has the host builds'): cudaLaunchKernel's typed
// form, which takes the parameters' sizes from the compiled kernel.
template <typename... P>
inline cudaError_t launchKernel(void (*kernel)(P...), dim3 grid, dim3 block, void** args,
                                cudaStream_t stream) {
  return cudaLaunchKernel(kernel, grid, block, args, 0, stream);
}

}  // namespace ring
#endif
