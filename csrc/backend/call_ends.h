// Where every call of a group reports its end, whichever path ran it (the host runner, the CUDA
// kernels, point-to-point): the kind of the group's last failure (Backend::getError), the
// flight recorder's dump after a failure, and the completion hook (completion_hooks.h) if one is
// registered.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
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

  // One call ended: `error` null if it succeeded. Never runs the hook itself (see
  // completion_hooks.h). Inline: every call ends here, and a success without a hook has nothing
  // to report, which two loads tell.
  void finished(c10d::OpType type, uint64_t seq, Clock::time_point start, Clock::time_point end,
                const std::exception_ptr& error) {
    if (!isPointToPoint(type)) ephemeral_.ended(seq);
    if (!error && !hasHook_.load(std::memory_order_acquire)) return;
    report(type, seq, start, end, error);
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
              const std::exception_ptr& error);

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
};

}  // namespace ring
