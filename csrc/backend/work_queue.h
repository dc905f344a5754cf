// The worker of one group: runs the group's host collectives one at a time, in the order they
// were issued, on one thread ("ring-worker"), records each in the flight recorder, and
// completes its Work (and Future) with the outcome.
//
// Why one thread per group, in issue order: every rank issues a group's collectives in the
// same order, so running them in that order on every rank pairs them up without any matching;
// and the caller never blocks on communication (every call returns a Work at once).
//
// Why a small collective may run on the caller's thread instead: handing it to the worker and
// waiting for its Work costs two thread wake-ups, more than the whole transfer of a few KiB,
// and puts four busy threads (two per rank) on machines where two ranks share two cores. It
// runs there only when nothing of the group is queued or running (order is kept) and when the
// caller's condition holds (the backend: every peer has already issued this collective, so
// the caller waits only for ranks that are bound to come: see RingBackend::runHere).
//
// And a task still in the queue when a thread waits for its Work runs on that thread
// (runOnWaiter, "waiter" in the flight recorder), if it is next in line and the group is free:
// the thread would block for it anyway, and the worker may not have a core yet. Where two
// ranks shared two cores, a call handed to the worker (its peer was late) left its rank a
// wake-up or two behind, so the peer's next call waited past its patience and went to the
// worker too, and so on: runs of 10-70 slow calls (about 190 us and 45 us in turn) in 5 of 14
// jobs, none in 14 with the waiter running the task (docs/latency_cpu.md).
//
// A task whose body can post its message ahead (RunHere::postFirst: a small all_reduce or a
// barrier, one mailbox round) is posted by the caller before it asks, while it holds the group:
// each rank's message travels while the ranks wait for each other's announcements, instead of
// after, which took a second exchange between the cores per call (docs/latency_cpu.md, ninth
// part). If the answer is no, the worker (or a waiter) runs the rest of the same call: the
// group stays held from the post until that task has run, so no other call of the group posts
// in between.
//
// The group is released before a task's Work completes (releaseThenComplete), so a collective
// issued by the thread that the completion wakes, or from a callback on the Work's Future, finds
// the group free. The collectives themselves still run one at a time in issue order; only the
// completion of one Work may trail the start of the next call (by the time its callbacks take).
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "backend/comm_profile.h"
#include "backend/ring_work.h"
#include "executor/communicator.h"
#include "executor/flight_recorder.h"

namespace ring {

// Owned through a shared_ptr (make()): each queued Work holds a weak reference, to run its own
// task when it is waited for before the worker took it (RingWork::wait).
class WorkQueue : public QueueOfWork, public std::enable_shared_from_this<WorkQueue> {
 public:
  struct Task {
    const char* name;    // "all_reduce"
    CallDetail detail;   // for the flight recorder: "1000 x float32, op SUM"
    c10::intrusive_ptr<RingWork> work;
    CallInfo call;
    // What it runs: before(call) if set, then body(call, inputs, outputs). Kept apart, not
    // wrapped in one closure: a closure over all four is one more allocation per call.
    std::function<void(const CallInfo&)> before;
    std::function<void(const CallInfo&, const std::vector<at::Tensor>& in,
                       const std::vector<at::Tensor>& out)>
        body;
    std::vector<at::Tensor> inputs, outputs;
    // Set while a profiler records on the issuing thread: the body runs inside its events.
    std::shared_ptr<const CommProfile> profile;
    // Set for a task the caller's thread may run itself, at push, when nothing of the group is
    // queued or running; asked then, as ask(*comm, call.seq, bytes): true runs it there.
    // Unset (ask null): always the worker. A plain function and its arguments: nothing
    // allocated per call. postFirst: before asking, the caller runs the body with
    // CallInfo::postOnly (host_call.h, postsFirst), whoever runs the rest.
    struct RunHere {
      bool (*ask)(Communicator& comm, uint64_t seq, int64_t bytes) = nullptr;
      Communicator* comm = nullptr;
      int64_t bytes = 0;
      bool postFirst = false;
    } runHere;
  };

  // Called on the worker after each task, before its Work completes: what ran, when, and how it
  // ended (completion hooks, the last error's kind).
  using Finished = std::function<void(c10d::OpType type, uint64_t seq,
                                      std::chrono::steady_clock::time_point start,
                                      std::chrono::steady_clock::time_point end,
                                      const std::exception_ptr& error)>;

  static std::shared_ptr<WorkQueue> make(int rank, std::string groupName,
                                         FlightRecorder& recorder, Finished finished = {});
  // Runs what is queued, then stops (stop()).
  ~WorkQueue() override;

  // Queues `task`, or runs it before returning (Task::runHere); throws (naming the
  // collective) once the queue has stopped.
  void push(Task&& task);
  // Fails every task not yet started with "aborted" (abort()).
  void dropPending();
  // Runs what is queued (each bounded by its timeout), then ends the thread. Idempotent.
  void stop();
  // Blocks until every task queued so far has finished (bounded: each has a timeout).
  void waitIdle();
  // Runs the task of `work` on the calling thread ("waiter" in the flight recorder) if it is
  // first in the queue and nothing of the group is running; false (nothing done) otherwise.
  bool runOnWaiter(const RingWork& work) override;

 private:
  WorkQueue(int rank, std::string groupName, FlightRecorder& recorder, Finished finished);
  void start();
  void loop();
  // Runs one task on the calling thread ("worker" or "caller", for the flight recorder):
  // its body, the recorder and the Finished hook; returns its error (null when it succeeded).
  std::exception_ptr run(uint64_t id, Task& task, const char* thread);
  // After run: releases the group (running_), then completes the task's Work with `error`.
  void releaseThenComplete(Task& task, const std::exception_ptr& error);

  const int rank_;
  const std::string groupName_;
  FlightRecorder& recorder_;
  Finished finished_;

  std::mutex mutex_;
  std::condition_variable wake_;  // a task was queued, or stop
  std::condition_variable idle_;  // a task finished
  std::deque<std::pair<uint64_t, Task>> queue_;  // (flight recorder id, task)
  bool running_ = false;          // a thread (worker or caller) is inside a task: the group is held
  int completing_ = 0;            // tasks released but whose Work is not completed yet
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace ring
