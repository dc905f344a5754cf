#include "backend/work_queue.h"

#include <c10/util/Exception.h>

#include <algorithm>

#include "common/env.h"
#include "common/errors.h"
#include "common/logging.h"
#include "common/phase_probe.h"
#include "common/thread_name.h"

namespace ring {

namespace {

// What the flight recorder keeps of a call's tensors for the dump (torch's entries list the
// same): views of their shapes and torch's dtype names, which the recorder copies. A call's
// usual one tensor a side has its view in `room`; a list's go to `spill` (an allocation, as the
// list itself was).
ShapeList viewShapes(const std::vector<at::Tensor>& tensors, TensorShapeView& room,
                     std::vector<TensorShapeView>& spill) {
  TensorShapeView* views = &room;
  if (tensors.size() > 1) {
    spill.resize(tensors.size());
    views = spill.data();
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    const c10::IntArrayRef sizes = tensors[i].sizes();
    views[i] = TensorShapeView{sizes.data(), sizes.size(), c10::toString(tensors[i].scalar_type())};
  }
  return ShapeList{views, tensors.size()};
}

// Where a call's first input or output lies (null where it has none: a barrier).
void* firstData(const std::vector<at::Tensor>& tensors) {
  return tensors.empty() ? nullptr : tensors[0].data_ptr();
}

}  // namespace

std::shared_ptr<WorkQueue> WorkQueue::make(int rank, std::string groupName, Communicator& group,
                                           FlightRecorder& recorder, CallEnds& ends) {
  std::shared_ptr<WorkQueue> queue(
      new WorkQueue(rank, std::move(groupName), group, recorder, ends));
  queue->start();
  return queue;
}

WorkQueue::WorkQueue(int rank, std::string groupName, Communicator& group,
                     FlightRecorder& recorder, CallEnds& ends)
    : rank_(rank), groupName_(std::move(groupName)), group_(group), recorder_(recorder),
      ends_(ends) {}

void WorkQueue::start() {
  worker_ = std::thread([this] {
    nameThisThread("ring-worker");
    setThreadLogContext(rank_, groupName_);
    loop();
  });
}

WorkQueue::~WorkQueue() { stop(); }

uint64_t WorkQueue::record(Task& task) {
  // The entry lists the shapes of the task's tensors (what the body will run on).
  if (!recorder_.enabled()) {
    return recorder_.recordQueued(task.call.seq, task.name, task.detail);
  }
  TensorShapeView in, out;
  std::vector<TensorShapeView> inList, outList;
  return recorder_.recordQueued(task.call.seq, task.name, task.detail,
                                viewShapes(task.inputs, in, inList),
                                viewShapes(task.outputs, out, outList),
                                task.call.timeout.count());
}

void WorkQueue::push(Task&& task) {
  uint64_t id = 0;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (stopping_) {
      lock.unlock();
      recorder_.markEnded(record(task), "called after shutdown");
      TORCH_CHECK(false, "ring: ", task.name, " on rank ", rank_,
                  " was called after the process group was shut down (destroy_process_group)");
    }
    // Before anything else, the flight recorder's entry included: a peer that runs this call on
    // its own thread waits for this rank's part of it, and must know that it is coming
    // (allIssued), and a peer that asks waits for this very store. Under the lock: the group is
    // still there (stop() is not past its first step), and announcements go out in the order
    // the calls are queued.
    group_.announceIssued(task.call.seq + 1);
    RING_PHASE(4, "queue lock, announcement");
    RING_ASSERT(task.body || task.collective, task.name, " (sequence ", task.call.seq,
                ") was queued with nothing to run");
    if (task.collective) task.prepared = group_.prepare(*task.collective, task.call.seq);
    RING_PHASE(5, "plan prepared");
    id = record(task);
    RING_PHASE(6, "flight recorder entry");
    const bool callerMay = task.callerMayRun && task.bytes <= env().inlineBytes;
    if (!callerMay || !queue_.empty() || holder_ != Holder::Nobody) {
      task.work->setRunner(weak_from_this());
      queue_.emplace_back(id, std::move(task));
      wake_.notify_one();
      return;
    }
    // Nothing of this group is queued or running: the caller holds the group while it posts
    // and asks, outside the lock (it may wait a little for the peers).
    holder_ = Holder::Caller;
  }
  RING_PHASE(7, "queue unlock");
  if (callerRuns(task)) {
    RING_PHASE(9, "peers awaited (their messages or announcements)");
    const std::exception_ptr error = run(id, task, "caller");  // no hand-off (see the top)
    releaseThenComplete(task, error);
    RING_PHASE(13, "group released, Work completed");
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    holder_ = Holder::Nobody;
    // Not here after all: to the worker, ahead of anything another thread queued meanwhile
    // (it was issued later, and a posted call must be the next to run).
    task.work->setRunner(weak_from_this());
    queue_.emplace_front(id, std::move(task));
  }
  idle_.notify_all();
  wake_.notify_one();
}

bool WorkQueue::callerRuns(Task& task) {
  // The post ahead of the question (the group decides whether the call is one mailbox round).
  // It never waits; where it throws (the group is already broken) the call runs here, where it
  // meets the same failure at once and the Work carries it.
  const PreparedCall* posted = nullptr;
  if (task.prepared) {
    try {
      if (group_.post(*task.prepared, firstData(task.inputs), firstData(task.outputs))) {
        posted = &*task.prepared;
      }
      RING_PHASE(8, "message posted ahead");
    } catch (...) {
      return true;
    }
  }
  return group_.allIssued(task.call.seq + 1, callerPatience(task.bytes), posted);
}

std::chrono::microseconds WorkQueue::callerPatience(int64_t bytes) const {
  // 50 us, or for a larger call about what moving it takes (at 2 GB/s), so that a rank a whole
  // transfer ahead of its peers (a broadcast's root, which returns as soon as its data is in
  // the slots) still finds them issued; never more than a waiter would spin anyway
  // (spinMicros: 500 us where every rank has a core, 50 where they share).
  const int64_t scaled = std::max<int64_t>(50, bytes / 2000);
  return std::chrono::microseconds(std::min<int64_t>(group_.spinMicros(), scaled));
}

void WorkQueue::releaseThenComplete(Task& task, const std::exception_ptr& error) {
  // Why the group is released before the Work completes: completing wakes the thread waiting on
  // the Work, which usually issues the next collective at once. Were the group still held then,
  // that collective would find it busy and go to the worker, whose completion would hand the
  // one after it to the worker again: one late call would keep every later one on the worker,
  // two thread wake-ups each (issue 26). The collective's communication is over here; only its
  // Work (and the callbacks chained on its Future) remain, and a collective issued from those
  // now runs by the rules of any other call. `completing_` keeps waitIdle() waiting for them.
  bool wakeWorker;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    holder_ = Holder::Nobody;
    ++completing_;
    wakeWorker = !queue_.empty() || stopping_;
  }
  // Only when there is something for it to do (work, or stop() waiting for it to end): waking
  // the idle worker on every call would cost the thread switch running here exists to avoid.
  if (wakeWorker) wake_.notify_one();
  task.work->complete(error);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    --completing_;
  }
  idle_.notify_all();
}

void WorkQueue::dropPending() {
  std::deque<std::pair<uint64_t, Task>> dropped;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    dropped.swap(queue_);
  }
  for (auto& [id, task] : dropped) {
    recorder_.markEnded(id, "aborted");
    task.work->complete(std::make_exception_ptr(CommError(strCat(
        "ring: ", task.name, " (sequence ", task.call.seq, ") on rank ", rank_,
        " was aborted before it started"))));
  }
  idle_.notify_all();
}

void WorkQueue::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ && !worker_.joinable()) return;
    stopping_ = true;
  }
  wake_.notify_all();
  // Queued collectives still run (each bounded by its timeout) so that their Works complete.
  if (worker_.joinable()) worker_.join();
}

void WorkQueue::waitIdle() {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [&] { return queue_.empty() && holder_ == Holder::Nobody && completing_ == 0; });
}

void WorkQueue::waiting(const RingWork& work, std::chrono::milliseconds timeout) {
  if (timeout != ::kNoTimeout) return;  // a wait bounded by its own timeout only waits (top)
  std::pair<uint64_t, Task> next;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // First in line and the group free: exactly what the worker would take next, so the order
    // of the group's tasks is the same whoever runs it.
    if (holder_ != Holder::Nobody || queue_.empty() ||
        queue_.front().second.work.get() != &work) {
      return;
    }
    next = std::move(queue_.front());
    queue_.pop_front();
    holder_ = Holder::Waiter;
  }
  LogScope logScope(rank_, groupName_);
  const std::exception_ptr error = run(next.first, next.second, "waiter");
  releaseThenComplete(next.second, error);
}

void WorkQueue::loop() {
  while (true) {
    std::pair<uint64_t, Task> next;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      // Not while a caller runs a task itself: the group's tasks run one at a time, in order.
      wake_.wait(lock, [&] { return holder_ == Holder::Nobody && (stopping_ || !queue_.empty()); });
      if (queue_.empty()) return;  // stopping, and nothing left to run
      next = std::move(queue_.front());
      queue_.pop_front();
      holder_ = Holder::Worker;
    }
    const std::exception_ptr error = run(next.first, next.second, "worker");
    releaseThenComplete(next.second, error);
  }
}

std::exception_ptr WorkQueue::run(uint64_t id, Task& task, const char* thread) {
  const auto start = std::chrono::steady_clock::now();
  recorder_.markStarted(id, thread, start);
  RING_PHASE(10, "start time, recorder marked");
  // The group writes the plan it chose here (CallInfo::plan), for the recorder.
  const char* plan = nullptr;
  task.call.plan = &plan;
  std::exception_ptr error;
  try {
    // The body, or the group, runs the collective as prepared (posted ahead or not).
    task.call.prepared = task.prepared ? &*task.prepared : nullptr;
    const auto body = [this, &task] {
      if (task.before) task.before(task.call);
      if (task.body) {
        task.body(task.call, task.inputs, task.outputs);
      } else {
        group_.run(*task.prepared, firstData(task.inputs), firstData(task.outputs), task.call);
      }
    };
    if (task.profile) {
      task.profile->run(body);
    } else {
      body();
    }
  } catch (...) {
    error = std::current_exception();
  }
  RING_PHASE(11, "the collective");
  const auto end = std::chrono::steady_clock::now();
  const double ms = std::chrono::duration<double, std::milli>(end - start).count();
  std::string what;
  if (error) {
    what = messageOf(error);
    RING_LOG(kLogWarn, task.name, " (sequence ", task.call.seq, ") failed after ", ms, " ms: ",
             what, "\nlast collectives of this group on this rank:\n", recorder_.dump());
  } else {
    RING_LOG(kLogTrace, task.name, " (sequence ", task.call.seq, ") took ", ms, " ms");
  }
  task.work->noteDuration(static_cast<float>(ms));
  recorder_.markEnded(id, what, end, plan);
  task.call.plan = nullptr;
  task.call.prepared = nullptr;
  ends_.finished(task.work->retrieveOpType(), task.call.seq, start, end, error,
                 task.work->completionKey(), /*timed=*/true);
  RING_PHASE(12, "end time, recorder, call ends");
  return error;
}

// ---- the Work ------------------------------------------------------------------------------

RingWork::RingWork(int rank, c10d::OpType type, uint64_t seq, std::vector<at::Tensor> outputs,
                   const char* profilingTitle,
                   const std::optional<std::vector<at::Tensor>>& inputs)
    : c10d::Work(rank, type, profilingTitle, inputs),
      seq_(seq),
      outputs_(std::move(outputs)) {}

bool RingWork::isCompleted() { return c10d::Work::isCompleted(); }

bool RingWork::wait(std::chrono::milliseconds timeout) {
  RING_PHASE(15, "torch's return path, to wait()");
  if (!c10d::Work::isCompleted()) {
    if (std::shared_ptr<WorkQueue> runner = runner_.lock()) runner->waiting(*this, timeout);
  }
  const bool done = c10d::Work::wait(timeout);
  RING_PHASE(16, "wait()");
  return done;
}
bool RingWork::isSuccess() const { return c10d::Work::isSuccess(); }
std::exception_ptr RingWork::exception() const { return c10d::Work::exception(); }
std::vector<at::Tensor> RingWork::result() { return outputs_; }
c10::intrusive_ptr<c10::ivalue::Future> RingWork::getFuture() {
  std::lock_guard<std::mutex> lock(futureMutex_);
  if (!future_) {
    future_ = c10::make_intrusive<c10::ivalue::Future>(tensorListType());
    // No callback can be on a Future nobody has seen yet, so marking it under the lock runs
    // no user code here.
    if (settled_) settle(*future_, torchError_);
  }
  return future_;
}

c10::intrusive_ptr<c10::ivalue::Future> RingWork::getFutureResult() {
  std::lock_guard<std::mutex> lock(futureMutex_);
  if (!resultFuture_) {
    resultFuture_ = c10::make_intrusive<c10::ivalue::Future>(c10::IntType::get());
    if (settled_) resultFuture_->markCompleted(c10::IValue(workResult_));  // nobody waits yet
  }
  return resultFuture_;
}

void RingWork::settle(c10::ivalue::Future& f, const std::exception_ptr& torchError) {
  if (torchError) {
    f.setError(torchError);
  } else {
    f.markCompleted(c10::IValue(outputs_));
  }
}
uint64_t RingWork::getSequencenumber() const { return seq_; }

float RingWork::getDuration() const {
  const float ms = durationMs_.load(std::memory_order_acquire);
  TORCH_CHECK(ms >= 0.0f, "ring: Work._get_duration on rank ", rank_, ": ",
              c10d::opTypeToString(opType_), " (sequence ", seq_,
              ") has not run to its end yet; its duration is known once it has completed");
  return ms;
}
int RingWork::sourceRank() const {
  int r = sourceRank_.load();
  TORCH_CHECK(r >= 0, "ring: sourceRank() is only defined for a completed recv from any source");
  return r;
}

void RingWork::complete(std::exception_ptr error, int sourceRank) {
  sourceRank_.store(sourceRank);
  std::exception_ptr torchError = error ? toTorchError(error) : nullptr;
  c10::intrusive_ptr<c10::ivalue::Future> future;
  c10::intrusive_ptr<c10::ivalue::Future> resultFuture;
  const int64_t result = workResultOf(error);
  {
    std::lock_guard<std::mutex> lock(futureMutex_);
    settled_ = true;
    torchError_ = torchError;
    workResult_ = result;
    future = future_;  // null if nobody asked: getFuture() makes it completed
    resultFuture = resultFuture_;
  }
  if (resultFuture) resultFuture->markCompleted(c10::IValue(result));
  // The future first: whoever returns from wait() may read the future's value at once. Marked
  // outside the lock: its callbacks run here and may call getFuture() again.
  if (future) settle(*future, torchError);
  finish(torchError);  // wakes wait()
}

}  // namespace ring
