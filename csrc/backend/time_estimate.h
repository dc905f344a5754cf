// torch.distributed._time_estimator's window on one group (Backend::startTimeEstimate /
// endTimeEstimate): between start and end every call of the group is priced by the plan model
// (executor/call_estimate.h) instead of run, and the prices add up; end returns the sum in
// microseconds, as ProcessGroupNCCL's does.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <utility>

#include "backend/host_call.h"
#include "common/types.h"

namespace ring {

struct CheckScope;  // backend/tensor_checks.h

class TimeEstimate {
 public:
  // Opens the window. Throws a usage error naming `s` where one is open already: windows do
  // not nest (the inner end would close the outer one's).
  void start(const CheckScope& s);
  // Closes the window: the sum of its prices, in microseconds.
  float end();
  // Whether calls are priced now. Read by every call (route()); relaxed, because the window
  // opens and closes on the caller's thread, between its calls.
  bool open() const { return open_.load(std::memory_order_relaxed); }
  // One call's price, added to the window's sum (calls may come from several threads).
  void add(double seconds);

 private:
  std::atomic<bool> open_{false};
  std::mutex mutex_;
  double seconds_ = 0;
};

// The collective a torch call type runs as, and the bytes its price counts (call_estimate.h's
// `bytes`), on a group of `size` ranks.
std::pair<Collective, int64_t> pricedAs(const HostCall& call, int size);

}  // namespace ring
