// CUDA tensors on the CUDA ring kernels: the stream and event handling of ProcessGroupNCCL
// (docs/conventions.md section 1) around one kernel launch per collective, and a watchdog thread that
// turns a kernel that does not finish into an error instead of a hang.
//
// Per collective, on the calling thread:
//   1. refuse CUDA graph capture (the kernels' counters advance on the host at enqueue time, so
//      a replayed graph would run with stale counters);
//   2. record an event on the caller's current stream; the comm stream (a dedicated,
//      non-blocking stream of this group: cuda_sync.h) waits on it;
//   3. recordStream every input and output on the comm stream (the caching allocator keeps
//      their memory until the kernel is done, even if the caller drops them);
//   4. launch the kernel on the comm stream, then record the end event;
//   5. return a CudaRingWork whose Future is completed right away under the comm stream.
// The watchdog polls the end events; past a work's timeout, or when the group breaks (a peer's
// failure, a dead rank, abort()), it raises the abort word (the kernels exit), breaks the
// group and fails the pending works with a DistBackendError naming the collective, sequence,
// rank and elapsed time.
#pragma once

#include <ATen/ATen.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "backend/cuda_sync.h"
#include "backend/cuda_work.h"
#include "backend/tensor_checks.h"
#include "kernels/ring_launcher.h"
#include "transport/store.h"

namespace ring {

class CudaCollectives {
 public:
  // Collective over the group: exchanges inbox handles through `store`. Throws CommError if a
  // peer never arrives; a group whose links cannot all use peer memory is created anyway, with
  // usable() false (the caller stages through host memory).
  CudaCollectives(Store& store, Communicator& comm, FlightRecorder& recorder, int rank,
                  int size, at::Device device, std::chrono::milliseconds timeout);
  // Waits for the kernels in flight (each bounded by its timeout), then stops the watchdog.
  ~CudaCollectives();

  bool usable() const;
  const std::string& declineReason() const;
  at::Device device() const { return device_; }

  // Arguments are already checked (tensor_checks.h) except what only the kernel path needs.
  c10::intrusive_ptr<c10d::Work> allReduce(const CheckScope& s, const at::Tensor& t, DType d,
                                           RedOp op, double factor, uint64_t seq,
                                           std::chrono::milliseconds timeout);
  c10::intrusive_ptr<c10d::Work> reduceScatter(const CheckScope& s, const at::Tensor& input,
                                               const at::Tensor& output, DType d, RedOp op,
                                               double factor, uint64_t seq,
                                               std::chrono::milliseconds timeout);
  c10::intrusive_ptr<c10d::Work> allGather(const CheckScope& s, const at::Tensor& input,
                                           const at::Tensor& output, DType d, uint64_t seq,
                                           std::chrono::milliseconds timeout);
  c10::intrusive_ptr<c10d::Work> broadcast(const CheckScope& s, const at::Tensor& t, DType d,
                                           int root, uint64_t seq,
                                           std::chrono::milliseconds timeout);

  // Blocks the calling thread until every kernel enqueued so far has ended (bounded: the
  // watchdog stops each at its timeout); throws CommError if the group broke. For barrier.
  void waitIdle();

  // How many collectives have run as ring kernels in this process: GPU tests check that the
  // calls they mean to run as kernels did.
  static uint64_t kernelCallCount();

 private:
  using Launch = std::function<std::string(void* stream)>;
  c10::intrusive_ptr<c10d::Work> run(const CheckScope& s, c10d::OpType type, const Fingerprint& fp,
                                     std::string detail, std::chrono::milliseconds timeout,
                                     const std::vector<at::Tensor>& inputs,
                                     std::vector<at::Tensor> outputs, const Launch& launch);
  void watchdogLoop();
  // Breaks the group with `reason` and fails every work in `works` that has not finished.
  void failAll(const std::vector<c10::intrusive_ptr<CudaRingWork>>& works,
               const std::string& reason);

  const int rank_;
  const int size_;
  const at::Device device_;
  const std::string groupName_;
  Store& store_;  // this set-up's keys; outlives this object (the backend's shutdown order)
  const std::chrono::milliseconds timeout_;
  std::shared_ptr<CudaGroupState> state_;

  // Enqueue: one collective at a time (the counters and the comm stream's order).
  std::mutex enqueueMutex_;
  ChannelCounters counters_{};
  std::unique_ptr<DedicatedStream> commStream_;
  StreamEvent ready_;  // recorded on the caller's stream, waited on by the comm stream

  // Watchdog.
  std::mutex watchMutex_;
  std::condition_variable watchCv_;
  std::vector<c10::intrusive_ptr<CudaRingWork>> pending_;  // kernels not known to have ended
  bool stopping_ = false;
  std::thread watchdog_;
};

}  // namespace ring
