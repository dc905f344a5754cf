// Makes one CUDA device current on the calling thread for a scope, and restores the one that
// was current before. Why: the CUDA runtime's current device is per thread, and a call made
// without the right one current creates (or uses) a context on another device - on a host with
// several GPUs every rank would then also hold a context on device 0.
#pragma once

#include <cuda_runtime.h>

#include "transport/cuda_ipc/cuda_check.h"

namespace ring {

class DeviceScope {
 public:
  // Throws CommError naming the device if it cannot be made current.
  explicit DeviceScope(int device) {
    if (cudaGetDevice(&saved_) != cudaSuccess) saved_ = -1;
    (void)cudaGetLastError();
    RING_CUDA_CHECK(cudaSetDevice(device), "making cuda:", device, " current");
  }
  ~DeviceScope() {
    if (saved_ >= 0) (void)cudaSetDevice(saved_);
    (void)cudaGetLastError();
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int saved_ = -1;
};

}  // namespace ring
