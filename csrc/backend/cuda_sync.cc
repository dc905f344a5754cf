#include "backend/cuda_sync.h"

#include <c10/cuda/CUDAGuard.h>
#include <c10/util/Exception.h>

#include "common/errors.h"

namespace ring {
namespace {

void check(cudaError_t e, const char* call, const char* what) {
  if (e == cudaSuccess) return;
  (void)cudaGetLastError();
  TORCH_CHECK(false, "ring: ", what, ": ", call, " failed: ", cudaGetErrorString(e), " (",
              cudaGetErrorName(e), ")");
}

cudaStream_t createStream(c10::DeviceIndex device) {
  c10::cuda::CUDAGuard guard(device);
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags",
        "creating the backend's stream");
  return s;
}

}  // namespace

DedicatedStream::DedicatedStream(c10::DeviceIndex device)
    : raw_(createStream(device)), stream_(c10::cuda::getStreamFromExternal(raw_, device)) {}

DedicatedStream::~DedicatedStream() {
  // Errors ignored: this may run at interpreter exit, after the CUDA runtime began unloading.
  if (raw_ != nullptr) (void)cudaStreamDestroy(raw_);
  (void)cudaGetLastError();
}

}  // namespace ring
