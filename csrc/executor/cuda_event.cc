#include "executor/cuda_event.h"

#include <thread>

#include "common/errors.h"

namespace ring {

void checkCuda(cudaError_t e, const char* call, const char* what) {
  if (e == cudaSuccess) return;
  (void)cudaGetLastError();
  throw RingError(strCat("ring: ", what, ": ", call, " failed: ", cudaGetErrorString(e), " (",
                         cudaGetErrorName(e), ")"));
}

ThreadLocalCaptureMode::ThreadLocalCaptureMode() {
  if (cudaThreadExchangeStreamCaptureMode(&previous_) != cudaSuccess) {
    (void)cudaGetLastError();
    previous_ = cudaStreamCaptureModeThreadLocal;  // nothing was swapped: nothing to restore
  }
}

ThreadLocalCaptureMode::~ThreadLocalCaptureMode() {
  (void)cudaThreadExchangeStreamCaptureMode(&previous_);
  (void)cudaGetLastError();
}

CudaEvent::~CudaEvent() {
  // Destroying an event whose record is still pending is allowed: the runtime releases it once
  // the work before it completes. Errors ignored: this may run at interpreter exit, after the
  // CUDA runtime began unloading.
  if (event_ != nullptr) (void)cudaEventDestroy(event_);
  (void)cudaGetLastError();
}

void CudaEvent::record(cudaStream_t stream, const char* what) {
  if (event_ == nullptr) {
    checkCuda(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming),
              "cudaEventCreateWithFlags", what);
  }
  checkCuda(cudaEventRecord(event_, stream), "cudaEventRecord", what);
}

void CudaEvent::block(cudaStream_t stream, const char* what) const {
  if (event_ == nullptr) return;
  checkCuda(cudaStreamWaitEvent(stream, event_, 0), "cudaStreamWaitEvent", what);
}

bool CudaEvent::query(const char* what) const {
  if (event_ == nullptr) return true;
  // Queried from the thread that runs a staged call, while the user's may be capturing.
  ThreadLocalCaptureMode notForbiddenByOtherThreadsCaptures;
  const cudaError_t e = cudaEventQuery(event_);
  if (e == cudaErrorNotReady) {
    (void)cudaGetLastError();  // "not ready" is not an error; leave no trace of it
    return false;
  }
  checkCuda(e, "cudaEventQuery", what);
  return true;
}

bool CudaEvent::waitFor(std::chrono::milliseconds timeout, const char* what) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // Polled with short sleeps rather than cudaEventSynchronize: that call cannot be bounded,
  // and a device-to-host copy of a few MiB takes about a millisecond.
  while (!query(what)) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return true;
}

}  // namespace ring
