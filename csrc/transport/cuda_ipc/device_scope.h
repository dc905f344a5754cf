// The CUDA device the calling thread must have current before the torch-free CUDA path calls
// the runtime for a device. Why a check and not a switch: the runtime's current device is per
// thread, and a call made with another device current uses (or creates) a context there; but
// switching to the right device and back cannot be done safely here: switching back to the
// device a thread "had" when it never chose one makes device 0 current, which creates device
// 0's context (cudaSetDevice initialises its primary context since CUDA 12.0), on every rank of
// a host with several GPUs. torch's own guard knows better (it skips that switch back when the
// device has no context), so the backend calls in under c10::cuda::CUDAGuard; threads of the
// CUDA path's own (the watchdog) set their device once for their whole life.
#pragma once

#include <cuda_runtime.h>

#include "transport/cuda_ipc/cuda_check.h"

namespace ring {

// Throws CommError naming both devices unless `device` is the calling thread's current one.
inline void requireCurrentDevice(int device, const char* what) {
  int current = -1;
  RING_CUDA_CHECK(cudaGetDevice(&current), what);
  if (current != device) {
    throw CommError(strCat("ring: ", what, " was called with cuda:", current,
                           " current on this thread, not cuda:", device,
                           ", the group's device: make it current first (the backend does, with "
                           "torch's CUDAGuard)"));
  }
}

}  // namespace ring
