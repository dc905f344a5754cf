#include "backend/completion_hooks.h"

#include <exception>
#include <string>
#include <utility>

#include "common/logging.h"
#include "common/thread_name.h"

namespace ring {

CompletionHooks::CompletionHooks(Hook hook, int rank, std::string group)
    : state_(std::make_shared<State>(std::move(hook))),
      thread_(&CompletionHooks::loop, state_, rank, std::move(group)) {}

CompletionHooks::~CompletionHooks() {
  bool busy = false;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stopping = true;
    busy = state_->running;
  }
  state_->changed.notify_all();
  // Joining a thread that is inside the hook could wait forever: the hook may need the GIL,
  // which the thread destroying the group may hold. The thread owns what it uses (the state and
  // the hook in it). An idle thread only leaves its wait and returns, touching nothing of
  // Python: joined.
  if (busy) {
    thread_.detach();
  } else {
    thread_.join();
  }
}

void CompletionHooks::post(std::shared_ptr<c10d::WorkInfo> info) {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->pending.push_back(std::move(info));
  }
  state_->changed.notify_all();
}

void CompletionHooks::waitIdle() {
  std::unique_lock<std::mutex> lock(state_->mutex);
  state_->changed.wait(lock, [&] { return state_->pending.empty() && !state_->running; });
}

void CompletionHooks::loop(std::shared_ptr<State> state, int rank, std::string group) {
  nameThisThread("ring-hooks");
  LogScope logScope(rank, group);
  std::unique_lock<std::mutex> lock(state->mutex);
  while (true) {
    state->changed.wait(lock, [&] { return state->stopping || !state->pending.empty(); });
    if (state->stopping) {
      if (!state->pending.empty()) {
        RING_LOG(kLogWarn, "the group went with ", state->pending.size(),
                 " completion hook call(s) not yet run; they are dropped "
                 "(destroy_process_group waits for them)");
      }
      return;
    }
    std::shared_ptr<c10d::WorkInfo> info = std::move(state->pending.front());
    state->pending.pop_front();
    state->running = true;
    lock.unlock();
    try {
      state->hook(std::move(info));
    } catch (const std::exception& e) {
      // A user's hook must not take the thread down; say so instead.
      RING_LOG(kLogWarn, "the completion hook raised: ", e.what());
    } catch (...) {
      RING_LOG(kLogWarn, "the completion hook raised something other than an exception");
    }
    lock.lock();
    state->running = false;
    state->changed.notify_all();  // waitIdle
  }
}

}  // namespace ring
