// torch 2.15's abort hooks (Backend::registerAbortHook, keyed by the caller's ids): run once,
// before the group stops for good, on abort() or on the first failed call (a timeout, a peer's
// failure: ring's group is broken from then on), so that a user can capture debugging state
// while it is still there. A hook that throws is logged and the others still run.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>

namespace ring {

class AbortHooks {
 public:
  using Hook = std::function<void()>;
  void add(int64_t id, Hook hook);  // replaces a hook of the same id
  void remove(int64_t id);          // an unknown id is no error (as unregistering twice)
  // Runs every registered hook, the first time only; `why` goes into the log line.
  void runOnce(int rank, const std::string& group, const char* why);

 private:
  std::mutex mutex_;
  std::map<int64_t, Hook> hooks_;  // guarded by mutex_
  bool ran_ = false;               // guarded by mutex_
};

}  // namespace ring
