#include "backend/cuda_sync.h"

#include <c10/cuda/CUDAGuard.h>
#include <c10/util/Exception.h>

#include <thread>

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

StreamEvent::~StreamEvent() {
  // Destroying an event whose record is still pending is allowed: the runtime releases it once
  // the work before it completes.
  if (event_ != nullptr) (void)cudaEventDestroy(event_);
  (void)cudaGetLastError();
}

void StreamEvent::record(const c10::cuda::CUDAStream& stream, const char* what) {
  c10::cuda::CUDAGuard guard(stream.device_index());
  if (event_ == nullptr) {
    check(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), "cudaEventCreateWithFlags",
          what);
  }
  check(cudaEventRecord(event_, stream.stream()), "cudaEventRecord", what);
}

void StreamEvent::block(const c10::cuda::CUDAStream& stream, const char* what) const {
  if (event_ == nullptr) return;
  c10::cuda::CUDAGuard guard(stream.device_index());
  check(cudaStreamWaitEvent(stream.stream(), event_, 0), "cudaStreamWaitEvent", what);
}

bool StreamEvent::query() const {
  if (event_ == nullptr) return true;
  const cudaError_t e = cudaEventQuery(event_);
  if (e == cudaErrorNotReady) {
    (void)cudaGetLastError();  // "not ready" is not an error; leave no trace of it
    return false;
  }
  check(e, "cudaEventQuery", "waiting for a copy");
  return true;
}

bool StreamEvent::waitFor(std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // Short sleeps: a device-to-host copy of a few MiB takes about a millisecond.
  while (!query()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return true;
}

}  // namespace ring
