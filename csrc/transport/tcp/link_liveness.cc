#include "transport/tcp/link_liveness.h"

#include "common/errors.h"

namespace ring {

LinkLiveness::LinkLiveness(int size, std::chrono::milliseconds bound)
    : bound_(bound),
      watched_(static_cast<size_t>(size), 0),
      lastHeard_(static_cast<size_t>(size)) {
  RING_ASSERT(bound.count() == 0 || bound >= kShortestSilenceBound, "silence bound ",
              bound.count(), " ms");
}

void LinkLiveness::watch(int peer, Clock::time_point now) {
  watched_[static_cast<size_t>(peer)] = 1;
  lastHeard_[static_cast<size_t>(peer)] = now;
}

void LinkLiveness::forget(int peer) { watched_[static_cast<size_t>(peer)] = 0; }

void LinkLiveness::heard(int peer, Clock::time_point now) {
  Clock::time_point& last = lastHeard_[static_cast<size_t>(peer)];
  if (now > last) last = now;
}

void LinkLiveness::passBegins(Clock::time_point now) {
  if (passed_ && bound_.count() > 0 && now - lastPass_ > bound_ / 4) {
    for (Clock::time_point& last : lastHeard_) {
      if (now > last) last = now;
    }
  }
  lastPass_ = now;
  passed_ = true;
}

std::vector<int> LinkLiveness::silent(Clock::time_point now) const {
  std::vector<int> out;
  if (bound_.count() == 0) return out;
  for (size_t p = 0; p < watched_.size(); ++p) {
    if (watched_[p] && now - lastHeard_[p] > bound_) out.push_back(static_cast<int>(p));
  }
  return out;
}

Clock::duration LinkLiveness::silentFor(int peer, Clock::time_point now) const {
  return now - lastHeard_[static_cast<size_t>(peer)];
}

}  // namespace ring
