// The CUDA streams the backend owns: one dedicated stream per use, as a torch stream. Torch-side
// (c10::cuda) types, CUDA runtime calls only; the backend's events are executor/cuda_event.h's.
#pragma once

#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>


namespace ring {

// A stream for this backend alone, non-blocking (it never waits implicitly for the legacy
// default stream), held for the owner's life. Why not torch's stream pool: the pool hands the
// same few streams to every caller in the process, so another rank thread of this process, or
// a Future.then callback, could get the stream a ring kernel spins on and queue work behind it.
//
// Why never destroyed: torch's caching allocator keeps the stream of every recordStream with
// the memory block and records an event on it when the block is freed, which may be long after
// the group is gone (a tensor kept past destroy_process_group); an event recorded on a destroyed
// stream fails, and the allocator's free then terminates the process. So a released stream goes
// back to a process-wide list of its device and serves the next owner there (one owner at a
// time: it stays dedicated).
class DedicatedStream {
 public:
  explicit DedicatedStream(c10::DeviceIndex device);
  // Hands the stream back to its device's list; work still queued on it completes.
  ~DedicatedStream();
  DedicatedStream(const DedicatedStream&) = delete;
  DedicatedStream& operator=(const DedicatedStream&) = delete;

  c10::cuda::CUDAStream stream() const { return stream_; }
  cudaStream_t raw() const { return raw_; }
  c10::DeviceIndex device() const { return stream_.device_index(); }

 private:
  cudaStream_t raw_ = nullptr;
  c10::cuda::CUDAStream stream_;
};

}  // namespace ring
