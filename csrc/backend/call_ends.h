// Where every call of a group reports its end, whichever path ran it (the host runner, the CUDA
// kernels, point-to-point): the kind of the group's last failure (Backend::getError), the
// flight recorder's dump after a failure, the completion hook (completion_hooks.h) if one is
// registered, and torch 2.15's keyed completion hooks (Backend::registerCompletionHook).
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "backend/completion_hooks.h"
#include "backend/ephemeral_timeouts.h"

namespace ring {

class CallEnds {
 public:
  using Clock = std::chrono::steady_clock;

  // `afterFailure` runs after each failed call, on the thread that learned of it (the flight
  // recorder's dump, which keeps only the first).
  explicit CallEnds(std::function<void()> afterFailure);
  CallEnds(const CallEnds&) = delete;
  CallEnds& operator=(const CallEnds&) = delete;

  // What a keyed completion hook hears of a call that succeeded: the key its Work answers to
  // getCompletionKey, and the call's milliseconds where the backend timed it (else none).
  using KeyedHook = std::function<void(uint64_t key, std::optional<float> ms)>;

  // One call ended: `error` null if it succeeded. `key`: its Work's completion key; `timed`:
  // whether end - start is the call's own duration (the host runner's calls; not the CUDA
  // kernels', which the GPU times, nor point-to-point's, which include the wait for the peer).
  // Never runs the thread hook itself (see completion_hooks.h). Inline: every call ends here,
  // and a success without a hook has nothing to report, which three loads tell.
  void finished(c10d::OpType type, uint64_t seq, Clock::time_point start, Clock::time_point end,
                const std::exception_ptr& error, uint64_t key, bool timed) {
    if (!isPointToPoint(type)) ephemeral_.ended(seq);
    if (!error && !hasHook_.load(std::memory_order_acquire) &&
        !hasKeyedHooks_.load(std::memory_order_acquire)) {
      return;
    }
    report(type, seq, start, end, error, key, timed);
  }

  // torch 2.15's keyed hooks: each runs on the thread that learned of a successful call (the
  // contract: short, no GIL, no call back into the backend), never for a failed one. The same
  // id replaces a hook; an unknown id is no error.
  void addKeyedHook(int64_t id, KeyedHook hook);
  void removeKeyedHook(int64_t id);
  // The keyed hooks' part of a success, alone: for a Work that completes with another call (a
  // call held in a coalescing block completes with the block's task).
  void succeeded(uint64_t key, std::optional<float> ms) {
    if (hasKeyedHooks_.load(std::memory_order_acquire)) runKeyedHooks(key, ms);
  }

  // torch's registerOnCompletionHook: false (nothing changed) if a hook is already registered.
  // `rank` and `group` name the group in the hook thread's warnings.
  bool setHook(CompletionHooks::Hook hook, int rank, const std::string& group);
  // Blocks until every hook call posted so far has returned (torch's _wait_for_pending_works).
  void waitForHooks();
  c10d::ErrorType lastError() const { return static_cast<c10d::ErrorType>(lastError_.load()); }
  // A new membership starts with no failure (reconfigure).
  void clearLastError() { lastError_.store(0); }
  // The group's temporary timeout extensions, which end with calls (addEphemeralTimeout).
  EphemeralTimeouts& ephemeral() { return ephemeral_; }
  const EphemeralTimeouts& ephemeral() const { return ephemeral_; }

 private:
  void report(c10d::OpType type, uint64_t seq, Clock::time_point start, Clock::time_point end,
              const std::exception_ptr& error, uint64_t key, bool timed);
  void runKeyedHooks(uint64_t key, std::optional<float> ms);

  static bool isPointToPoint(c10d::OpType t) {
    return t == c10d::OpType::SEND || t == c10d::OpType::RECV || t == c10d::OpType::RECVANYSOURCE;
  }

  const std::function<void()> afterFailure_;
  EphemeralTimeouts ephemeral_;
  std::atomic<int> lastError_{0};  // c10d::ErrorType
  std::mutex hookMutex_;
  // The hook's thread: set once (never unset) under hookMutex_, then published by hasHook_,
  // which finished() reads without the lock.
  std::unique_ptr<CompletionHooks> hooks_;
  std::atomic<bool> hasHook_{false};
  // The keyed hooks, called under keyedMutex_ (so that unregistering waits for a running one);
  // hasKeyedHooks_ says whether there are any, for finished() to read without the lock.
  std::mutex keyedMutex_;
  std::map<int64_t, KeyedHook> keyedHooks_;
  std::atomic<bool> hasKeyedHooks_{false};
};

}  // namespace ring
