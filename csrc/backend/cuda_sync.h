// The CUDA streams and events the backend owns: one dedicated stream per use, and a RAII event.
// Torch-side (c10::cuda) types, CUDA runtime calls only.
#pragma once

#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

#include <chrono>
#include <string>

namespace ring {

// A stream created for this backend alone, non-blocking (it never waits implicitly for the
// legacy default stream). Why not torch's stream pool: the pool hands the same few streams to
// every caller in the process, so another rank thread of this process, or a Future.then
// callback, could get the stream a ring kernel spins on and queue work behind it.
class DedicatedStream {
 public:
  explicit DedicatedStream(c10::DeviceIndex device);
  // Work still queued on it completes; the runtime frees the stream afterwards.
  ~DedicatedStream();
  DedicatedStream(const DedicatedStream&) = delete;
  DedicatedStream& operator=(const DedicatedStream&) = delete;

  c10::cuda::CUDAStream stream() const { return stream_; }
  c10::DeviceIndex device() const { return stream_.device_index(); }

 private:
  cudaStream_t raw_ = nullptr;
  c10::cuda::CUDAStream stream_;
};

// An event without timing, created on first record.
class StreamEvent {
 public:
  StreamEvent() = default;
  ~StreamEvent();
  StreamEvent(const StreamEvent&) = delete;
  StreamEvent& operator=(const StreamEvent&) = delete;

  // Throws c10::Error naming `what` on a CUDA error.
  void record(const c10::cuda::CUDAStream& stream, const char* what);
  // `stream` waits (on the GPU) for the work before the last record.
  void block(const c10::cuda::CUDAStream& stream, const char* what) const;
  // Whether the work before the last record has finished (true if never recorded).
  bool query() const;
  // Polls query() until it is true or `timeout` passes; returns query().
  bool waitFor(std::chrono::milliseconds timeout) const;

 private:
  cudaEvent_t event_ = nullptr;
};

}  // namespace ring
