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
  if (capture_ != nullptr) {
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
  return capture_ == nullptr ? 0 : capture_->status.load();
}

std::shared_ptr<CaptureSequence> StreamCore::capture() {
  std::lock_guard<std::mutex> lock(mutex_);
  return capture_;
}

void StreamCore::beginCapture(std::shared_ptr<CaptureSequence> sequence) {
  {
    std::lock_guard<std::mutex> members(sequence->mutex);
    sequence->members.push_back(weak_from_this());
  }
  std::lock_guard<std::mutex> lock(mutex_);
  capture_ = std::move(sequence);
  captured_.clear();
}

std::vector<Operation> StreamCore::endCapture() {
  std::lock_guard<std::mutex> lock(mutex_);
  capture_ = nullptr;
  std::vector<Operation> out;
  out.swap(captured_);
  return out;
}

void StreamCore::invalidateCapture() {
  std::shared_ptr<CaptureSequence> c = capture();
  int active = 1;
  if (c != nullptr) c->status.compare_exchange_strong(active, 2);
}

int StreamCore::captureMode() {
  std::shared_ptr<CaptureSequence> c = capture();
  return c == nullptr ? 0 : c->mode;
}

std::thread::id StreamCore::captureThread() {
  std::shared_ptr<CaptureSequence> c = capture();
  return c == nullptr ? std::thread::id() : c->thread;
}

uint64_t StreamCore::captureId() {
  std::shared_ptr<CaptureSequence> c = capture();
  return c == nullptr ? 0 : c->id;
}

}  // namespace detail
}  // namespace cudaemu
