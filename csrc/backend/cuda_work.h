// The Work of a collective that runs as a CUDA ring kernel, with ProcessGroupNCCL's
// semantics (docs/conventions.md section 1):
//   wait()          makes the caller's current stream wait for the kernel's end event; it does
//                   not block the CPU (TORCH_RING_CUDA_BLOCKING_WAIT=1: it does, and raises);
//   isCompleted()   queries the end event; true only once the Work itself holds the outcome
//                   (exception() is set), not merely once the task has it;
//   getFuture()     a Future created with the device, marked completed (with the outputs) on
//                   the enqueuing thread while the comm stream is current, so that its
//                   callbacks and waits are ordered after the kernel on the GPU.
// Errors (a header mismatch the kernel recorded, a timeout, a broken group) reach wait(),
// exception() and isSuccess(). The Future cannot carry them: it is completed at enqueue, as
// NCCL's is; instead the failure breaks the group, so the next collective on any rank raises.
// The kernel's progress and outcome are the torch-free CudaTask's (executor/cuda_task.h); this
// class adds torch's view of it.
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <memory>
#include <vector>

#include "backend/ring_options.h"
#include "backend/work_outcome.h"
#include "executor/cuda_task.h"

namespace ring {

// A Future for `device`'s tensors: with the device list, since a Future without devices does
// no stream synchronization at all for CUDA tensors.
c10::intrusive_ptr<c10::ivalue::Future> cudaFuture(at::Device device);

class CudaRingWork : public c10d::Work {
 public:
  // `future` is already completed (under the comm stream, right behind the kernel).
  CudaRingWork(c10d::OpType type, std::shared_ptr<CudaTask> task, std::vector<at::Tensor> outputs,
               at::Device device, bool blockingWait,
               c10::intrusive_ptr<c10::ivalue::Future> future, uint64_t completionKey);
  ~CudaRingWork() override;

  bool isCompleted() override;
  std::vector<at::Tensor> result() override;
  bool wait(std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) override;
  void synchronize() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  // The c10d::WorkResult the kernel's task ended with, once it has (torch's get_future_result).
  c10::intrusive_ptr<c10::ivalue::Future> getFutureResult() override;
  uint64_t getSequencenumber() const override;
#if RING_TORCH_AT_LEAST(2, 15)
  // The key the kernel's completion hooks report (nextCompletionKey).
  uint64_t getCompletionKey() const override { return completionKey_; }
#endif
  // torch's Work._get_duration, as NCCL's: the kernel's milliseconds on the GPU, once it has
  // ended successfully, when collective timing was on as it was enqueued.
  float getDuration() const override;

 private:
  void streamWait();

  std::shared_ptr<CudaTask> task_;
  std::vector<at::Tensor> outputs_;
  const at::Device device_;
  const bool blockingWait_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  WorkResultFuture result_;
  const uint64_t completionKey_;
};

}  // namespace ring
