// A CUDA event owned by the backend, torch-free (raw streams): created on first record,
// without timing (timing events cost a device timestamp and are not needed to order streams).
// Every call expects the stream's device current on the calling thread: making it current here
// and restoring the thread's device afterwards would create a context on the restored device
// (cudaSetDevice does since CUDA 12), which torch's own device guard avoids - so the torch
// adapter holds a c10::cuda::CUDAGuard around these calls.
#pragma once

#include <cuda_runtime.h>

#include <chrono>

namespace ring {

class CudaEvent {
 public:
  CudaEvent() = default;
  ~CudaEvent();
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  // Records the event on `stream`. Throws RingError "ring: <what>: <call> failed: ..." on a
  // CUDA error.
  void record(cudaStream_t stream, const char* what);
  // `stream` waits (on the GPU, not the CPU) for the work before the last record; nothing if
  // never recorded.
  void block(cudaStream_t stream, const char* what) const;
  // Whether the work before the last record has finished (true if never recorded).
  bool query(const char* what) const;
  // Polls query() until it is true or `timeout` passes; returns query().
  bool waitFor(std::chrono::milliseconds timeout, const char* what) const;
  bool recorded() const { return event_ != nullptr; }

 private:
  cudaEvent_t event_ = nullptr;
};

// Throws RingError "ring: <what>: <call> failed: <CUDA's text> (<its name>)" unless e is
// cudaSuccess, and clears the (non-sticky) error so that a later call does not report it again.
void checkCuda(cudaError_t e, const char* call, const char* what);

// For its scope, the calling thread's stream-capture interaction mode is ThreadLocal: only a
// capture of this thread's own could forbid its calls. Why: in CUDA's default Global mode, a
// cudaEventQuery made while ANY other thread captures a graph in Global mode (torch.cuda.graph,
// torch.compile's "reduce-overhead") fails and invalidates that thread's capture; the backend's
// watchdog and worker query events while the user's thread may be capturing
// (cudaThreadExchangeStreamCaptureMode; ProcessGroupNCCL's watchdog does the same).
class ThreadLocalCaptureMode {
 public:
  ThreadLocalCaptureMode();
  ~ThreadLocalCaptureMode();
  ThreadLocalCaptureMode(const ThreadLocalCaptureMode&) = delete;
  ThreadLocalCaptureMode& operator=(const ThreadLocalCaptureMode&) = delete;

 private:
  cudaStreamCaptureMode previous_ = cudaStreamCaptureModeThreadLocal;
};

}  // namespace ring
