// The GPU side of a CUDA call that runs on the host ring through pinned host memory (every
// collective without a ring kernel, point-to-point, and every call of a group whose links have
// no peer-memory path), torch-free. It keeps ProcessGroupNCCL's stream semantics where a host
// step allows:
//   copyIn (the caller's thread): the copy stream waits for everything queued on the caller's
//     stream so far, then copies the inputs into host memory; the call returns at once;
//   waitCopiedIn (the thread that runs the host call, before it): waits for those copies,
//     bounded by the call's timeout;
//   queueCopiesBack and finish (that thread, after the host call): the copies back on the copy
//     stream and an event after them, or the host call's error;
//   wait (Work.wait): blocks the CPU only until finish has run - a stream cannot wait for an
//     event that is not recorded yet - then makes the caller's stream wait for the copies back
//     on the GPU. The CPU never waits for a copy back.
// Every call expects the streams' device current on the calling thread (see cuda_event.h).
// The torch adapter (backend/staging.h) picks the buffers, keeps them alive and completes the
// Work's future.
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <mutex>
#include <string>
#include <vector>

#include "executor/cuda_event.h"

namespace ring {

// One contiguous buffer and its pinned host copy.
struct HostCopy {
  void* device = nullptr;
  void* host = nullptr;
  size_t bytes = 0;
};

class StagedCopies {
 public:
  // `what` names the call in errors ("reduce (sequence 4) on rank 1"); `copies`: the stream
  // the copies run on (the backend's own, never one the caller queues on).
  StagedCopies(std::string what, cudaStream_t copies);
  StagedCopies(const StagedCopies&) = delete;
  StagedCopies& operator=(const StagedCopies&) = delete;

  // Queues, after the work queued on `caller` so far, the copies of `in` into host memory.
  // Throws RingError on a CUDA error.
  void copyIn(cudaStream_t caller, const std::vector<HostCopy>& in);
  // Blocks until copyIn's copies have landed; throws TimeoutError after `timeout`.
  void waitCopiedIn(std::chrono::milliseconds timeout) const;
  // After a host call that succeeded: queues the copies of `out` back into device memory and
  // records the event after them. Returns the CUDA error of queueing them, or null.
  std::exception_ptr queueCopiesBack(const std::vector<HostCopy>& out);
  // Once, after the host call (and queueCopiesBack on success): the host part is done, with
  // `error` or null; wakes wait(). Separate from queueCopiesBack so that the owner can complete
  // what a woken waiter reads (torch's Future) in between.
  void finish(std::exception_ptr error);

  // Blocks until finish has run (the host call ends within its own timeout, or at abort),
  // rethrows its error, then makes `caller` wait for the copies back (on the GPU).
  void wait(cudaStream_t caller);
  // Blocks until finish has run (the copies back, if any, are queued), at most `timeout`;
  // whether it has.
  bool waitFinished(std::chrono::milliseconds timeout);
  // `caller` waits on the GPU for the copies back; nothing before finish has run.
  void blockStream(cudaStream_t caller);
  // finish has run and either failed or its copies back have landed.
  bool isCompleted();
  // The error finish was given (null before, or on success).
  std::exception_ptr error();

  cudaStream_t copyStream() const { return copies_; }
  const std::string& what() const { return what_; }

 private:
  const std::string what_;
  const cudaStream_t copies_;
  CudaEvent copiedIn_;
  CudaEvent copiedBack_;
  std::mutex mutex_;
  std::condition_variable finished_;
  bool hostDone_ = false;
  std::exception_ptr error_;
};

}  // namespace ring
