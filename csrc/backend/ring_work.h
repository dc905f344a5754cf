// The Work returned by every collective of the ring backend. Completed by the worker thread;
// an error reaches both the Work (wait / exception) and its Future (DDP reads the future).
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace ring {

class RingWork;

// The runner of the group's calls (WorkQueue), as a Work sees it: told that a thread is about
// to block in work.wait(timeout), it decides whether that thread runs the call (and runs it
// there) or not; the Work only reports the wait (backend/work_queue.h says when).
class CallRunner {
 public:
  virtual ~CallRunner() = default;
  virtual void waiting(const RingWork& work, std::chrono::milliseconds timeout) = 0;
};

class RingWork : public c10d::Work {
 public:
  // `profilingTitle` (a string literal, or null): an asynchronous span of torch's profiler from
  // now until the Work completes, as c10d::Work records it for gloo's calls.
  RingWork(int rank, c10d::OpType type, uint64_t seq, std::vector<at::Tensor> outputs,
           const char* profilingTitle = nullptr,
           const std::optional<std::vector<at::Tensor>>& inputs = std::nullopt);

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  // torch's get_future_result: a Future of int, the c10d::WorkResult the call ended with.
  c10::intrusive_ptr<c10::ivalue::Future> getFutureResult() override;
  uint64_t getSequencenumber() const override;
  // torch's Work._get_duration: milliseconds from the start of the call's run to its end, once
  // it has completed (every call is timed; torch's enableCollectivesTiming changes nothing).
  float getDuration() const override;
  // Set by the thread that ran the call, before complete().
  void noteDuration(float ms) { durationMs_.store(ms, std::memory_order_release); }
  // getDuration's value without its check: -1 until the call has run to its end.
  float knownDuration() const { return durationMs_.load(std::memory_order_acquire); }
  int sourceRank() const override;
  // The source of a completed receive from any source, or -1 (never throws).
  int completedSource() const { return sourceRank_.load(); }

  // Called once, on the thread that ran the collective.
  void complete(std::exception_ptr error, int sourceRank = -1);

  // torch's Work.wait: blocks until the call completes (or `timeout` passes: raises). Before it
  // blocks, the runner that queued the call hears of the wait and may run the call on this
  // thread (CallRunner::waiting).
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  // Set by the runner when it queues the call, before the Work can be waited for (a weak
  // reference: the runner may go before the Work).
  void setRunner(std::weak_ptr<CallRunner> runner) { runner_ = std::move(runner); }

 private:
  // Marks `f` with the outcome complete() recorded (futureMutex_ held or not: see the .cc).
  void settle(c10::ivalue::Future& f, const std::exception_ptr& torchError);

  uint64_t seq_;
  std::vector<at::Tensor> outputs_;
  // Made on the first getFuture(), not per call: most callers (dist.all_reduce, a wait())
  // never ask for it, and a Future is an allocation, a list value and a lock per call
  // (issue 26). futureMutex_ orders its creation against complete(): a Future made after
  // completion is made completed.
  std::mutex futureMutex_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  bool settled_ = false;           // complete() has run (futureMutex_)
  std::exception_ptr torchError_;  // its error, as torch users see it (futureMutex_)
  int64_t workResult_ = 0;         // its c10d::WorkResult (futureMutex_)
  c10::intrusive_ptr<c10::ivalue::Future> resultFuture_;  // made on the first ask, as future_
  std::atomic<int> sourceRank_{-1};
  std::atomic<float> durationMs_{-1.0f};  // -1: not run to its end yet
  std::weak_ptr<CallRunner> runner_;
};

// List[Tensor]: the value type of every future this backend completes.
const c10::TypePtr& tensorListType();

// A Work that has already succeeded with `outputs`: the answer of a call that runs nothing
// (a reconfigure, which completes before it returns; a call priced by the time estimator).
c10::intrusive_ptr<c10d::Work> completedWork(std::vector<at::Tensor> outputs);

// Converts a core-library error into the exception type torch users know: communication
// failures become DistBackendError, everything else RuntimeError.
std::exception_ptr toTorchError(std::exception_ptr error);

// What Backend::getError reports for a failure: TIMEOUT for a wait that ran out, REMOTE_ERROR
// when another rank's failure or exit broke the group, COMM_ERROR otherwise.
c10d::ErrorType errorTypeOf(const std::exception_ptr& error);

// What Work.get_future_result() holds for a call that ended with `error` (a core-library error,
// or null): c10d::WorkResult SUCCESS, TIMEOUT or COMM_ERROR, as an int.
int64_t workResultOf(const std::exception_ptr& error);

// The get_future_result() Future of a Work that has no lock of its own to share (the CUDA and
// staged Works): made on the first ask, completed once the outcome is known, whichever first.
class WorkResultFuture {
 public:
  c10::intrusive_ptr<c10::ivalue::Future> get();
  // Once: the first call decides, later ones are ignored.
  void settle(const std::exception_ptr& error) { settleResult(workResultOf(error)); }
  void settleResult(int64_t workResult);

 private:
  std::mutex mutex_;
  bool settled_ = false;
  int64_t result_ = 0;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

}  // namespace ring
