// CUDA tensors on the CUDA ring kernels: the torch side of ProcessGroupNCCL's stream and event
// handling (docs/conventions.md section 1) around the torch-free CudaRingEngine
// (executor/cuda_ring_engine.h), which owns the links, the comm stream, the launch of one
// kernel per collective and the watchdog that turns a kernel that does not finish into an error.
//
// Per collective, on the calling thread, this adapter:
//   1. turns the tensors into raw pointers and torch's current stream into a cudaStream_t;
//   2. has the engine enqueue the kernel behind the caller's stream (it refuses CUDA graph
//      capture; the words become a RuntimeError here);
//   3. right behind the kernel, with the comm stream current: recordStream every input and
//      output on the comm stream (the caching allocator keeps their memory until the kernel is
//      done, even if the caller drops them), and completes the Future;
//   4. returns a CudaRingWork over the engine's task; engine errors become DistBackendError.
#pragma once

#include <ATen/ATen.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "backend/cuda_sync.h"
#include "backend/cuda_work.h"
#include "backend/tensor_checks.h"
#include "executor/communicator.h"
#include "executor/cuda_ring_engine.h"
#include "executor/flight_recorder.h"
#include "transport/store.h"

namespace ring {

class CudaCollectives {
 public:
  // Collective over the group: exchanges inbox handles through `store`. Throws CommError if a
  // peer never arrives; a group whose links cannot all use peer memory is created anyway, with
  // usable() false (the caller stages through host memory). The kernels run on `stream`, the
  // group's stream of its CUDA collectives on `device`, which must outlive this object.
  // `finished` runs once per collective when its outcome is known, with its start and end and
  // its Work's completion key (the group's completion hooks and last error, as every other call
  // of the group reports); never after this object is gone.
  using Finished = std::function<void(c10d::OpType, uint64_t seq,
                                      std::chrono::steady_clock::time_point start,
                                      std::chrono::steady_clock::time_point end,
                                      const std::exception_ptr& error, uint64_t key)>;
  CudaCollectives(Store& store, Communicator& comm, FlightRecorder& recorder, int rank,
                  int size, at::Device device, std::chrono::milliseconds timeout,
                  DedicatedStream& stream, Finished finished);
  // Waits for the kernels in flight (each bounded by its timeout), then stops the watchdog and
  // closes the links with the other ranks.
  ~CudaCollectives();

  bool usable() const { return engine_->usable(); }
  const std::string& declineReason() const { return engine_->declineReason(); }
  at::Device device() const { return device_; }

  // Arguments are already checked (tensor_checks.h) except what only the kernel path needs.
  // PREMUL_SUM: `factor`, or `deviceFactor` where defined (a one-element tensor on a GPU, read
  // by the kernels on the device where it is of the call's dtype and device, else on the host).
  c10::intrusive_ptr<c10d::Work> allReduce(const CheckScope& s, const at::Tensor& t, DType d,
                                           RedOp op, double factor,
                                           const at::Tensor& deviceFactor, uint64_t seq,
                                           std::chrono::milliseconds timeout);
  c10::intrusive_ptr<c10d::Work> reduceScatter(const CheckScope& s, const at::Tensor& input,
                                               const at::Tensor& output, DType d, RedOp op,
                                               double factor, const at::Tensor& deviceFactor,
                                               uint64_t seq, std::chrono::milliseconds timeout);
  c10::intrusive_ptr<c10d::Work> allGather(const CheckScope& s, const at::Tensor& input,
                                           const at::Tensor& output, DType d, uint64_t seq,
                                           std::chrono::milliseconds timeout);
  c10::intrusive_ptr<c10d::Work> broadcast(const CheckScope& s, const at::Tensor& t, DType d,
                                           int root, uint64_t seq,
                                           std::chrono::milliseconds timeout);

  // torch's enableCollectivesTiming: the kernels enqueued from now on are timed, and their Works
  // tell the kernel's time (getDuration), as NCCL's do once timing is on.
  void timeKernels() { timed_.store(true, std::memory_order_relaxed); }

  // Blocks the calling thread until every kernel enqueued so far has ended (bounded: the
  // watchdog stops each at its timeout); throws CommError if the group broke. For barrier.
  void waitIdle() { engine_->waitIdle(); }

  // How many collectives have run as ring kernels in this process: GPU tests check that the
  // calls they mean to run as kernels did.
  static uint64_t kernelCallCount() { return CudaRingEngine::kernelCallCount(); }

 private:
  using Enqueue = std::function<std::shared_ptr<CudaTask>(const CudaCall&)>;
  c10::intrusive_ptr<c10d::Work> run(const CheckScope& s, c10d::OpType type, uint64_t seq,
                                     std::chrono::milliseconds timeout,
                                     const std::vector<at::Tensor>& inputs,
                                     std::vector<at::Tensor> outputs, const Enqueue& enqueue);

  const int rank_;
  const at::Device device_;
  const std::string groupName_;
  DedicatedStream& commStream_;  // the group's (CudaRoute::orderStream)
  // `finished`, cut off when this object goes (a task may finish later: kept past
  // destroy_process_group by a Work, or given up on after an abort).
  struct FinishedSink {
    std::mutex mutex;
    Finished finished;
  };
  std::shared_ptr<FinishedSink> sink_;
  std::unique_ptr<CudaRingEngine> engine_;
  std::atomic<bool> timed_{false};  // a flag only: read once per call, ordering nothing else
};

}  // namespace ring
