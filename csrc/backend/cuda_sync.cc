#include "backend/cuda_sync.h"

#include <c10/cuda/CUDAGuard.h>
#include <c10/util/Exception.h>

#include <map>
#include <mutex>
#include <vector>

#include "common/errors.h"

namespace ring {
namespace {

void check(cudaError_t e, const char* call, const char* what) {
  if (e == cudaSuccess) return;
  (void)cudaGetLastError();
  TORCH_CHECK(false, "ring: ", what, ": ", call, " failed: ", cudaGetErrorString(e), " (",
              cudaGetErrorName(e), ")");
}

// Released streams of each device, waiting for their next owner (see DedicatedStream).
std::mutex gReleasedMutex;
std::map<c10::DeviceIndex, std::vector<cudaStream_t>>& released() {
  // Never destroyed: streams are handed back from destructors that may run at exit.
  static auto* lists = new std::map<c10::DeviceIndex, std::vector<cudaStream_t>>();
  return *lists;
}

cudaStream_t takeStream(c10::DeviceIndex device) {
  {
    std::lock_guard<std::mutex> lock(gReleasedMutex);
    std::vector<cudaStream_t>& list = released()[device];
    if (!list.empty()) {
      cudaStream_t s = list.back();
      list.pop_back();
      return s;
    }
  }
  c10::cuda::CUDAGuard guard(device);
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags",
        "creating the backend's stream");
  return s;
}

}  // namespace

DedicatedStream::DedicatedStream(c10::DeviceIndex device)
    : raw_(takeStream(device)), stream_(c10::cuda::getStreamFromExternal(raw_, device)) {}

DedicatedStream::~DedicatedStream() {
  std::lock_guard<std::mutex> lock(gReleasedMutex);
  released()[stream_.device_index()].push_back(raw_);
}

}  // namespace ring
