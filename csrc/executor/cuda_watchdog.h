// The thread that turns a CUDA ring kernel that does not finish into an error instead of a hang.
// Torch-free.
//
// It polls the end events of the group's tasks in flight, and every so often the group's health
// (CudaGroupState::checkHealth: a peer's failure, a dead rank, abort()). Past a task's timeout,
// or when the group breaks, it raises the abort word (the kernels exit), breaks the group and
// fails every task in flight with an error naming the collective, sequence, rank and elapsed
// time. It runs with the group's device current: its event queries would otherwise create a
// context on device 0, for every rank of a host with several GPUs.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "executor/cuda_group_state.h"
#include "executor/cuda_task.h"

namespace ring {

class CudaWatchdog {
 public:
  // Starts the thread ("ring-cuda-wdog").
  CudaWatchdog(std::shared_ptr<CudaGroupState> state, int device, std::string groupName);
  // stop().
  ~CudaWatchdog();
  CudaWatchdog(const CudaWatchdog&) = delete;
  CudaWatchdog& operator=(const CudaWatchdog&) = delete;

  // From now until its kernel ends (or the task is given up on at stop).
  void watch(std::shared_ptr<CudaTask> task);
  // Blocks until no task is in flight (bounded: each fails at its timeout).
  void waitIdle();
  // Waits for the tasks in flight (each bounded by its timeout; after an abort, at most
  // kAbortGrace), then ends the thread. Idempotent.
  void stop();

 private:
  void loop();
  // Breaks the group with `reason` and fails every task in `tasks` that has not finished.
  void failAll(const std::vector<std::shared_ptr<CudaTask>>& tasks, const std::string& reason);

  const std::shared_ptr<CudaGroupState> state_;
  const int device_;
  const std::string groupName_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<CudaTask>> pending_;  // kernels not known to have ended
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace ring
