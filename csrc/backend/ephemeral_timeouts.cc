#include "backend/ephemeral_timeouts.h"

#include <algorithm>

namespace ring {

void EphemeralTimeouts::add(std::chrono::milliseconds extra, uint64_t nextSeq) {
  if (extra.count() <= 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  live_.push_back({extra, nextSeq});
  active_.store(true, std::memory_order_release);
}

std::chrono::milliseconds EphemeralTimeouts::extraSlow() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::chrono::milliseconds sum(0);
  for (const Extension& e : live_) sum += e.extra;
  return sum;
}

void EphemeralTimeouts::endedSlow(uint64_t seq) {
  std::lock_guard<std::mutex> lock(mutex_);
  live_.erase(std::remove_if(live_.begin(), live_.end(),
                             [seq](const Extension& e) { return e.endsWith == seq; }),
              live_.end());
  active_.store(!live_.empty(), std::memory_order_release);
}

}  // namespace ring
