#include "stream_core.h"

namespace cudaemu {
namespace detail {

StreamCore::StreamCore(int dev, bool isBlocking, bool isLegacy)
    : device(dev), blocking(isBlocking), legacy(isLegacy) {}

StreamCore::~StreamCore() = default;

void StreamCore::start() {
  std::shared_ptr<StreamCore> self = shared_from_this();
  std::lock_guard<std::mutex> lock(mutex_);
  std::thread worker([self] { self->run(); });
  workerId_ = worker.get_id();
  // Why detached: a destroyed stream still finishes its queued work (cudaStreamDestroy returns
  // at once), so nobody is there to join it; the thread holds the stream alive until then.
  worker.detach();
}

void StreamCore::retire() {
  std::lock_guard<std::mutex> lock(mutex_);
  retired_ = true;
  changed_.notify_all();
}

uint64_t StreamCore::enqueue(Operation op) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (captureStatus_ != 0) {
    captured_.push_back(std::move(op));
    return enqueued_;
  }
  queue_.push_back(std::move(op));
  ++enqueued_;
  changed_.notify_all();
  return enqueued_;
}

uint64_t StreamCore::enqueued() {
  std::lock_guard<std::mutex> lock(mutex_);
  return enqueued_;
}

bool StreamCore::reached(uint64_t position) {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_ >= position;
}

void StreamCore::waitFor(uint64_t position) {
  std::unique_lock<std::mutex> lock(mutex_);
  // The mutex makes the finished operation's writes happen-before the waiter's next reads,
  // as a completed stream synchronization orders device work before later host work.
  changed_.wait(lock, [&] { return completed_ >= position; });
}

void StreamCore::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return !queue_.empty() || retired_; });
    if (queue_.empty()) return;  // retired and drained
    Operation op = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    op();
    op = nullptr;  // release what the operation held before reporting it done
    lock.lock();
    ++completed_;
    changed_.notify_all();
  }
}

int StreamCore::captureStatus() {
  std::lock_guard<std::mutex> lock(mutex_);
  return captureStatus_;
}

void StreamCore::beginCapture(int mode, std::thread::id by, uint64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  captureStatus_ = 1;
  captureMode_ = mode;
  captureThread_ = by;
  captureId_ = id;
  captured_.clear();
}

std::vector<Operation> StreamCore::endCapture() {
  std::lock_guard<std::mutex> lock(mutex_);
  captureStatus_ = 0;
  std::vector<Operation> out;
  out.swap(captured_);
  return out;
}

void StreamCore::invalidateCapture() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (captureStatus_ == 1) captureStatus_ = 2;
}

int StreamCore::captureMode() {
  std::lock_guard<std::mutex> lock(mutex_);
  return captureMode_;
}

std::thread::id StreamCore::captureThread() {
  std::lock_guard<std::mutex> lock(mutex_);
  return captureThread_;
}

uint64_t StreamCore::captureId() {
  std::lock_guard<std::mutex> lock(mutex_);
  return captureId_;
}

}  // namespace detail
}  // namespace cudaemu
