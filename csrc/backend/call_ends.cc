#include "backend/call_ends.h"

#include <utility>

#include "backend/work_outcome.h"

namespace ring {

CallEnds::CallEnds(std::function<void()> afterFailure)
    : afterFailure_(std::move(afterFailure)) {}

bool CallEnds::setHook(CompletionHooks::Hook hook, int rank, const std::string& group) {
  std::lock_guard<std::mutex> lock(hookMutex_);
  if (hooks_) return false;
  hooks_ = std::make_unique<CompletionHooks>(std::move(hook), rank, group);
  hasHook_.store(true, std::memory_order_release);
  return true;
}

void CallEnds::waitForHooks() {
  if (hasHook_.load(std::memory_order_acquire)) hooks_->waitIdle();
}

void CallEnds::report(c10d::OpType type, uint64_t seq, Clock::time_point start,
                      Clock::time_point end, const std::exception_ptr& error) {
  if (error) {
    lastError_.store(static_cast<int>(errorTypeOf(error)));
    if (afterFailure_) afterFailure_();
  }
  if (!hasHook_.load(std::memory_order_acquire)) return;
  hooks_->post(std::make_shared<c10d::WorkInfo>(type, seq, start, end,
                                                std::chrono::duration<float>(end - start)));
}

}  // namespace ring
