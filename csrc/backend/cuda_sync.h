// The CUDA streams the backend owns: one dedicated stream per use, as a torch stream. Torch-side
// (c10::cuda) types, CUDA runtime calls only; the backend's events are executor/cuda_event.h's.
#pragma once

#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>


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

}  // namespace ring
