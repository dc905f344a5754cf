// One collective handed to the GPU as a CUDA ring kernel: what it is, the event recorded on the
// comm stream after its kernel, its timeout, and its outcome once known. Torch-free: the
// backend's Work (backend/cuda_work.h) sits on top and learns the outcome through onFinish.
//
// The outcome comes from two places, read in this order: the end event (cudaEventQuery), and
// only once it has completed, the host-mapped error record of the group's links - the kernel
// writes the record before it ends, so a record read after the end event is complete and
// belongs to this kernel or an earlier one of the same comm stream. A timeout or a broken group
// finishes the task from outside (fail), before its kernel ends.
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "executor/cuda_group_state.h"

namespace ring {

class CudaTask {
 public:
  // Called once, with the task's error (a CommError) or null, on the thread that finished it.
  using FinishHook = std::function<void(std::exception_ptr error)>;

  // Takes ownership of `end`, recorded on the comm stream after the kernel. `what` names the
  // collective in errors ("all_reduce of 1000 float32 (op SUM), sequence 3"); `recordId` is its
  // flight recorder entry. `completion` (may be empty) runs once when the task finishes, however
  // long its Work lives: the group's own bookkeeping (completion hook, last error).
  // `start` (null: untimed), also owned from now on: an event recorded right before the
  // kernel, with `end` made with timing, so that kernelMilliseconds() can tell the kernel's time.
  CudaTask(uint64_t seq, std::string what, cudaEvent_t end, std::chrono::milliseconds timeout,
           uint64_t recordId, std::shared_ptr<CudaGroupState> state,
           FinishHook completion = nullptr, cudaEvent_t start = nullptr);
  ~CudaTask();
  CudaTask(const CudaTask&) = delete;
  CudaTask& operator=(const CudaTask&) = delete;

  // Any thread: if the kernel has ended, reads the device record and finishes the task (once).
  // Returns whether the kernel has ended.
  bool poll();
  // Finishes the task with `reason` (a timeout or a broken group) unless it already finished;
  // the error is a TimeoutError when `timedOut` (what get_error and get_future_result report).
  void fail(const std::string& reason, bool timedOut = false);
  bool finished();
  // The error it finished with (null while running or on success).
  std::exception_ptr error();

  // `hook` runs when the task finishes, or now if it already has. One hook at a time. Hooks run
  // outside the task's lock (a hook may call into Python, whose thread may be polling).
  void onFinish(FinishHook hook);
  // No hook from now on; waits for a hook that is running (so its owner may go).
  void dropFinishHook();

  uint64_t seq() const { return seq_; }
  const std::string& what() const { return what_; }
  int rank() const { return state_->rank(); }
  // The event after the kernel (a stream that waits on it sees the kernel's results).
  cudaEvent_t endEvent() const { return end_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  std::chrono::milliseconds elapsed() const;
  bool timed() const { return start_ != nullptr; }
  // The milliseconds from the start event to the end event: the kernel's time on the GPU. Only
  // for a timed task whose kernel has ended (poll() returned true); -1 otherwise.
  float kernelMilliseconds();

 private:
  // Under mutex_: poll()'s work; the hooks to run after unlocking go to *hooks.
  bool pollLocked(std::vector<FinishHook>* hooks);
  // Under mutex_: records the outcome (once) and hands back the hooks to run after unlocking.
  std::vector<FinishHook> finishOnce(std::exception_ptr error, const std::string& text);
  // Runs `hooks` (none under the lock), then tells dropFinishHook the Work's hook is done.
  void runHooks(const std::vector<FinishHook>& hooks, const std::exception_ptr& error);

  const uint64_t seq_;
  const std::string what_;
  cudaEvent_t end_;
  cudaEvent_t start_;
  const std::chrono::milliseconds timeout_;
  const uint64_t recordId_;
  const std::chrono::steady_clock::time_point enqueued_;
  std::shared_ptr<CudaGroupState> state_;

  std::mutex mutex_;
  bool kernelEnded_ = false;
  bool finished_ = false;
  std::exception_ptr error_;
  FinishHook hook_;
  FinishHook completion_;
  bool workHookRunning_ = false;  // hook_ was handed out and has not returned yet
  std::condition_variable hookDone_;
};

}  // namespace ring
