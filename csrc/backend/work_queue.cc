#include "backend/work_queue.h"

#include <c10/util/Exception.h>

#include "common/errors.h"
#include "common/logging.h"
#include "common/thread_name.h"

namespace ring {

WorkQueue::WorkQueue(int rank, std::string groupName, FlightRecorder& recorder,
                     Finished finished)
    : rank_(rank), groupName_(std::move(groupName)), recorder_(recorder),
      finished_(std::move(finished)) {
  worker_ = std::thread([this] {
    nameThisThread("ring-worker");
    setThreadLogContext(rank_, groupName_);
    loop();
  });
}

WorkQueue::~WorkQueue() { stop(); }

void WorkQueue::push(Task task) {
  const uint64_t id = recorder_.recordQueued(task.call.seq, task.name, task.detail);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) {
      recorder_.markEnded(id, "called after shutdown");
      TORCH_CHECK(false, "ring: ", task.name, " on rank ", rank_,
                  " was called after the process group was shut down (destroy_process_group)");
    }
    queue_.emplace_back(id, std::move(task));
  }
  wake_.notify_one();
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
  idle_.wait(lock, [&] { return queue_.empty() && !running_; });
}

void WorkQueue::loop() {
  while (true) {
    std::pair<uint64_t, Task> next;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left to run
      next = std::move(queue_.front());
      queue_.pop_front();
      running_ = true;
    }
    recorder_.markStarted(next.first);
    const auto start = std::chrono::steady_clock::now();
    std::exception_ptr error;
    try {
      next.second.body(next.second.call);
    } catch (...) {
      error = std::current_exception();
    }
    const auto end = std::chrono::steady_clock::now();
    const double ms = std::chrono::duration<double, std::milli>(end - start).count();
    std::string what;
    if (error) {
      what = messageOf(error);
      RING_LOG(kLogWarn, next.second.name,
               " (sequence ", next.second.call.seq, ") failed after ", ms, " ms: ", what,
               "\nlast collectives of this group on this rank:\n", recorder_.dump());
    } else {
      RING_LOG(kLogTrace, next.second.name,
               " (sequence ", next.second.call.seq, ") took ", ms, " ms");
    }
    recorder_.markEnded(next.first, what);
    if (finished_) {
      finished_(next.second.work->retrieveOpType(), next.second.call.seq, start, end, error);
    }
    next.second.work->complete(error);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      running_ = false;
    }
    idle_.notify_all();
  }
}

}  // namespace ring
