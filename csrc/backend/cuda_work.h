// The Work of a collective that runs as a CUDA ring kernel, with ProcessGroupNCCL's
// semantics (docs/conventions.md section 1):
//   wait()          makes the caller's current stream wait for the kernel's end event; it does
//                   not block the CPU (TORCH_RING_CUDA_BLOCKING_WAIT=1: it does, and raises);
//   isCompleted()   queries the end event;
//   getFuture()     a Future created with the device, marked completed (with the outputs) on
//                   the enqueuing thread while the comm stream is current, so that its
//                   callbacks and waits are ordered after the kernel on the GPU.
// Errors (a header mismatch the kernel recorded, a timeout, a broken group) reach wait(),
// exception() and isSuccess(). The Future cannot carry them: it is completed at enqueue, as
// NCCL's is; instead the failure breaks the group, so the next collective on any rank raises.
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <cuda_runtime.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "executor/communicator.h"
#include "executor/flight_recorder.h"
#include "transport/cuda_ipc/cuda_ring_links.h"

namespace ring {

// What a group's CUDA works share, and may outlive the backend through (a user can keep a Work
// after destroy_process_group): the links (inbox memory), and the way back to the
// communicator and flight recorder, which the backend detaches when it goes.
class CudaGroupState {
 public:
  CudaGroupState(std::unique_ptr<CudaRingLinks> links, Communicator* comm, FlightRecorder* recorder,
                 int rank, int size);
  CudaRingLinks& links() { return *links_; }
  int rank() const { return rank_; }
  int size() const { return size_; }

  // The first failure wins: stops this rank's kernels (abort word), keeps the inbox allocated
  // (a peer's kernel may still write into it) and marks the group broken, so that every other
  // rank's watchdog stops its kernels too and every rank's next collective raises.
  void breakGroup(const std::string& reason);
  // The first failure, or "" while healthy.
  std::string brokenReason() const;
  // Throws CommError if this rank's group is broken, aborted, or lost a rank.
  void checkHealth();

  uint64_t recordQueued(uint64_t seq, const std::string& name, const std::string& detail);
  void recordEnded(uint64_t id, const std::string& error);
  // Called by the backend before it goes: no more calls into the communicator or recorder.
  void detach();

 private:
  std::unique_ptr<CudaRingLinks> links_;
  const int rank_;
  const int size_;
  mutable std::mutex mutex_;
  Communicator* comm_;
  FlightRecorder* recorder_;
  std::string broken_;
};

class CudaRingWork : public c10d::Work {
 public:
  // Takes ownership of `end`, recorded on the comm stream after the kernel.
  CudaRingWork(int rank, c10d::OpType type, uint64_t seq, std::string what,
               std::vector<at::Tensor> outputs, at::Device device, cudaEvent_t end,
               std::chrono::milliseconds timeout, bool blockingWait, uint64_t recordId,
               std::shared_ptr<CudaGroupState> state);
  ~CudaRingWork() override;

  bool isCompleted() override;
  std::vector<at::Tensor> result() override;
  bool wait(std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) override;
  void synchronize() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  uint64_t getSequencenumber() const override;

  // On the enqueuing thread, with the comm stream current (a CUDAStreamGuard).
  void markFutureCompleted();

  // Any thread: if the kernel has ended, reads the device record and finishes the work (once).
  // Returns whether the kernel has ended.
  bool poll();
  // Finishes the work with `reason` (a timeout or a broken group) unless it already finished.
  void fail(const std::string& reason);
  bool finished();

  const std::string& what() const { return what_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  std::chrono::milliseconds elapsed() const;

 private:
  void finishOnce(std::exception_ptr error, const std::string& text);
  void streamWait();

  const uint64_t seq_;
  const std::string what_;  // "all_reduce of 1000 float32 (op SUM), sequence 3"
  std::vector<at::Tensor> outputs_;
  const at::Device device_;
  cudaEvent_t end_;
  const std::chrono::milliseconds timeout_;
  const bool blockingWait_;
  const uint64_t recordId_;
  const std::chrono::steady_clock::time_point enqueued_;
  std::shared_ptr<CudaGroupState> state_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;

  std::mutex pollMutex_;
  bool kernelEnded_ = false;
  bool finished_ = false;
};

}  // namespace ring
