#include "backend/abort_hooks.h"

#include <exception>
#include <utility>
#include <vector>

#include "common/logging.h"

namespace ring {

void AbortHooks::add(int64_t id, Hook hook) {
  std::lock_guard<std::mutex> lock(mutex_);
  hooks_[id] = std::move(hook);
}

void AbortHooks::remove(int64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  hooks_.erase(id);
}

void AbortHooks::runOnce(int rank, const std::string& group, const char* why) {
  std::vector<std::pair<int64_t, Hook>> toRun;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (ran_) return;
    ran_ = true;
    toRun.assign(hooks_.begin(), hooks_.end());
  }
  // Outside the lock: a hook may register or unregister hooks itself.
  for (auto& [id, hook] : toRun) {
    try {
      hook();
    } catch (const std::exception& e) {
      RING_LOG(kLogWarn, "rank ", rank, " of group '", group, "': abort hook ", id, " (run ",
               why, ") raised: ", e.what());
    }
  }
}

}  // namespace ring
