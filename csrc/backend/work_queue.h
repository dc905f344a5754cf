// The runner of one group's host collectives, and the Work each call returns: one class
// (WorkQueue) decides who runs each call and runs it, one call at a time, in the order the calls
// were issued, recording each in the flight recorder and completing its Work (RingWork, and its
// Future) with the outcome. The Work only observes: it is completed by the thread that ran the
// call, and a wait() on it tells the runner, which may run the call on the waiting thread.
//
// Why one call at a time, in issue order: every rank issues a group's collectives in the same
// order, so running them in that order on every rank pairs them up without any matching.
//
// Who runs a call (push, waiting, loop), and why:
//   - the caller's thread, at issue, for a small call (at most TORCH_RING_INLINE_BYTES) when
//     the group is free and every peer has issued the call within a short patience
//     (callerPatience): a hand-off to the worker costs two thread wake-ups, more than moving a
//     few KiB, and the caller waits only for ranks bound to come;
//   - a thread that waits for the call's Work without a timeout of its own (waiting, "waiter")
//     when the call is next in line and the group is free: it would block for it anyway, and a
//     call handed to the worker and then waited for costs two thread wake-ups (the worker's,
//     then the waiter's), while the worker may not even have a core yet (docs/notes/latency_cpu.md,
//     "One late call"). Not a wait with a timeout: the call may take up to the group's
//     timeout, and torch's Work.wait(timeout) returns (raises) at its own;
//   - the group's worker thread ("ring-worker") otherwise.
// The group is held by exactly one of them at a time (holder_).
//
// A call that can post its message ahead (its prepared collective is a small all_reduce,
// all_gather or barrier that is one mailbox round: Communicator::post) is posted by the caller
// before it asks whether the peers have issued it, so its message travels while the ranks wait
// for each other (docs/notes/latency_cpu.md, "The message posted before the question"). If the
// answer is no, the call goes to the front of the queue: it is the next to run, whoever runs
// it, so no other call of the group posts in between.
//
// The states of a call: issued (push) -> [posted] -> queued or running -> completing -> done.
// The group is released before a call's Work completes (releaseThenComplete), so a collective
// issued by the thread that the completion wakes, or from a callback on the Work's Future,
// finds the group free; only the completion of one Work may trail the start of the next call.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "backend/call_ends.h"
#include "backend/comm_profile.h"
#include "backend/host_call.h"
#include "backend/ring_options.h"
#include "backend/work_outcome.h"
#include "executor/communicator.h"
#include "executor/flight_recorder.h"

namespace ring {

class WorkQueue;

// The Work of a host call (every CPU collective, a CUDA call's host part, point-to-point). It
// observes the call: the thread that ran it completes it (complete()); an error reaches both the
// Work (wait / exception) and its Future (DDP reads the future).
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
  // The key this call's completion hooks report (nextCompletionKey).
  uint64_t completionKey() const { return completionKey_; }
#if RING_TORCH_AT_LEAST(2, 15)
  uint64_t getCompletionKey() const override { return completionKey_; }
#endif
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
  // thread (WorkQueue::waiting).
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  // Set by the runner when it queues the call, before the Work can be waited for (a weak
  // reference: the runner may go before the Work).
  void setRunner(std::weak_ptr<WorkQueue> runner) { runner_ = std::move(runner); }

 private:
  // Marks `f` with the outcome complete() recorded (futureMutex_ held or not: see the .cc).
  void settle(c10::ivalue::Future& f, const std::exception_ptr& torchError);

  uint64_t seq_;
  const uint64_t completionKey_ = nextCompletionKey();
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
  std::weak_ptr<WorkQueue> runner_;
};

// Owned through a shared_ptr (make()): each queued Work holds a weak reference, to run its own
// task when it is waited for before the worker took it (RingWork::wait).
class WorkQueue : public std::enable_shared_from_this<WorkQueue> {
 public:
  // The call as the adapter built it (HostCall: its tensors, detail, body or collective), moved
  // in whole, and what the runner adds to it. Why the runner's record extends the adapter's
  // rather than copying it field by field: a field added to the call reaches the runner without
  // a second edit, and nothing is copied per call.
  struct Task : HostCall {
    Task() = default;  // a place for one to be moved into (the worker's next)
    Task(const char* name_, HostCall&& host) : HostCall(std::move(host)), name(name_) {}
    const char* name = nullptr;  // "all_reduce"
    c10::intrusive_ptr<RingWork> work;
    CallInfo call;
    // What it runs: before(call) if set, then body(call, inputs, outputs), or where it has no
    // body, its collective through the group (Communicator::run) over input 0 and output 0.
    // Kept apart, not wrapped in one closure: a closure over all four is one more allocation
    // per call.
    std::function<void(const CallInfo&)> before;
    // The collective (HostCall::collective) prepared at push: its plan, chosen once; the caller
    // may post it ahead.
    std::optional<PreparedCall> prepared;
    // Set while a profiler records on the issuing thread: the body runs inside its events.
    std::shared_ptr<const CommProfile> profile;
    // Whether the caller's thread may run it (a host call on CPU tensors, barrier included:
    // RingBackend::dispatch's Host route);
    // the runner decides whether it does (push). `bytes`: the larger of its inputs and outputs.
    bool callerMayRun = false;
    int64_t bytes = 0;
  };

  // `group` answers the runner's questions (posts ahead, whether every peer has issued a
  // call); it outlives every call pushed before stop().
  static std::shared_ptr<WorkQueue> make(int rank, std::string groupName, Communicator& group,
                                         FlightRecorder& recorder, CallEnds& ends);
  // Runs what is queued, then stops (stop()).
  ~WorkQueue();

  // Announces `task` to the peers, prepares its collective, and queues it or runs it before
  // returning (see the top of this file); throws (naming the collective) once the queue has
  // stopped.
  void push(Task&& task);
  // Fails every task not yet started with "aborted" (abort()).
  void dropPending();
  // Runs what is queued (each bounded by its timeout), then ends the thread. Idempotent.
  void stop();
  // Blocks until every task queued so far has finished (bounded: each has a timeout).
  void waitIdle();
  // A thread is about to block in work.wait(timeout): runs the task of `work` on it ("waiter"
  // in the flight recorder) if the wait has no timeout of its own, the task is first in the
  // queue and nothing of the group is running (see the top of this file); otherwise returns.
  void waiting(const RingWork& work, std::chrono::milliseconds timeout);

 private:
  // Who holds the group: runs one of its calls (or has posted one, as the caller).
  enum class Holder { Nobody, Caller, Worker, Waiter };

  WorkQueue(int rank, std::string groupName, Communicator& group, FlightRecorder& recorder,
            CallEnds& ends);
  void start();
  void loop();
  // The task's entry in the flight recorder ("scheduled"), with its tensors' shapes; its id.
  uint64_t record(Task& task);
  // Whether the caller runs `task` itself: posts it ahead where it can, then asks whether every
  // peer has issued it. Called with the group held by the caller.
  bool callerRuns(Task& task);
  // How long the caller waits for its peers' announcements before the call goes to the worker.
  std::chrono::microseconds callerPatience(int64_t bytes) const;
  // Runs one task on the calling thread ("worker", "caller" or "waiter", for the recorder):
  // its body, the recorder and the call's end (CallEnds); returns its error (null when it
  // succeeded).
  std::exception_ptr run(uint64_t id, Task& task, const char* thread);
  // After run: releases the group (holder_), then completes the task's Work with `error`.
  void releaseThenComplete(Task& task, const std::exception_ptr& error);

  const int rank_;
  const std::string groupName_;
  Communicator& group_;
  FlightRecorder& recorder_;
  CallEnds& ends_;  // after each task, before its Work completes

  std::mutex mutex_;
  std::condition_variable wake_;  // a task was queued, or stop
  std::condition_variable idle_;  // a task finished
  std::deque<std::pair<uint64_t, Task>> queue_;  // (flight recorder id, task)
  Holder holder_ = Holder::Nobody;
  int completing_ = 0;            // tasks released but whose Work is not completed yet
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace ring
