// One emulated stream's queue: operations run in the order they were enqueued, one at a
// time, on a host thread that belongs to the stream. A position is the number of operations
// enqueued so far; "reached(p)" means the first p have finished. Events and cross-stream waits
// are positions of a stream, so they need nothing else.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace cudaemu {
namespace detail {

using Operation = std::function<void()>;
class StreamCore;

// One capture sequence: begun on one stream (its origin), joined by every stream that waits on
// an event recorded in it, ended on the origin. Invalidating it invalidates it for all of them.
struct CaptureSequence {
  CaptureSequence(uint64_t i, int m, std::thread::id t) : id(i), mode(m), thread(t) {}
  const uint64_t id;
  const int mode;              // cudaStreamCaptureMode it was begun in
  const std::thread::id thread;  // the thread that began it
  std::atomic<int> status{1};  // cudaStreamCaptureStatus: 1 active, 2 invalidated, 0 ended
  std::mutex mutex;            // guards members
  std::vector<std::weak_ptr<StreamCore>> members;  // the origin first
};

class StreamCore : public std::enable_shared_from_this<StreamCore> {
 public:
  StreamCore(int device, bool blocking, bool legacy);
  ~StreamCore();
  StreamCore(const StreamCore&) = delete;
  StreamCore& operator=(const StreamCore&) = delete;

  // Starts the stream's host thread. Separate from the constructor: the thread holds a
  // shared_ptr to the stream until the stream is retired and drained.
  void start();
  // No more work will come: the thread exits once the queue is empty.
  void retire();

  // Appends `op` and returns its position. While capturing, `op` goes into the capture
  // instead and the position does not move.
  uint64_t enqueue(Operation op);
  uint64_t enqueued();
  bool reached(uint64_t position);
  void waitFor(uint64_t position);
  // Whether the thread running now is this stream's own.
  bool isOwnThread() const { return std::this_thread::get_id() == workerId_; }

  // Stream capture: 0 none, 1 active, 2 invalidated (cudaStreamCaptureStatus' values).
  int captureStatus();
  // The sequence this stream captures into now (null: none).
  std::shared_ptr<CaptureSequence> capture();
  // Joins `sequence` (as its origin, if it has no members yet): from now on work put on this
  // stream is recorded into it.
  void beginCapture(std::shared_ptr<CaptureSequence> sequence);
  // Leaves the capture and hands back what this stream recorded.
  std::vector<Operation> endCapture();
  void invalidateCapture();
  int captureMode();
  std::thread::id captureThread();
  uint64_t captureId();

  const int device;
  const bool blocking;  // synchronizes with the legacy default stream
  const bool legacy;    // is the legacy default stream itself

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Operation> queue_;
  uint64_t enqueued_ = 0;
  uint64_t completed_ = 0;
  bool retired_ = false;
  std::thread::id workerId_;
  std::shared_ptr<CaptureSequence> capture_;
  std::vector<Operation> captured_;
};

}  // namespace detail
}  // namespace cudaemu
