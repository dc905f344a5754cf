#include "backend/call_ends.h"

#include <utility>

#include "backend/work_outcome.h"
#include "common/env.h"
#include "common/logging.h"

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

void CallEnds::addKeyedHook(int64_t id, KeyedHook hook) {
  std::lock_guard<std::mutex> lock(keyedMutex_);
  keyedHooks_[id] = std::move(hook);
  hasKeyedHooks_.store(true, std::memory_order_release);
}

void CallEnds::removeKeyedHook(int64_t id) {
  std::lock_guard<std::mutex> lock(keyedMutex_);
  keyedHooks_.erase(id);
  hasKeyedHooks_.store(!keyedHooks_.empty(), std::memory_order_release);
}

void CallEnds::runKeyedHooks(uint64_t key, std::optional<float> ms) {
  std::lock_guard<std::mutex> lock(keyedMutex_);
  for (const auto& [id, hook] : keyedHooks_) {
    try {
      hook(key, ms);
    } catch (const std::exception& e) {
      RING_LOG(kLogWarn, "completion hook ", id, " threw on the call with key ", key, ": ",
               e.what());
    }
  }
}

void CallEnds::report(c10d::OpType type, uint64_t seq, Clock::time_point start,
                      Clock::time_point end, const std::exception_ptr& error, uint64_t key,
                      bool timed) {
  if (error) {
    lastError_.store(static_cast<int>(errorTypeOf(error)));
    if (afterFailure_) afterFailure_();
  } else {
    // Failed calls fire nothing: torch's contract, so that a post-mortem still sees them open.
    std::optional<float> ms;
    if (timed) ms = std::chrono::duration<float, std::milli>(end - start).count();
    succeeded(key, ms);
  }
  if (!hasHook_.load(std::memory_order_acquire)) return;
  hooks_->post(std::make_shared<c10d::WorkInfo>(type, seq, start, end,
                                                std::chrono::duration<float>(end - start)));
}

}  // namespace ring
