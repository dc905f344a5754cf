// RingBackend's answer to torch.distributed._time_estimator (ring_backend.h): the calls made
// inside it are priced by the group's plan model (executor/call_estimate.h) instead of run;
// the window and the pricing of a torch call are time_estimate.h's.
#include "backend/ring_backend.h"

#include "backend/tensor_checks.h"
#include "backend/time_estimate.h"

namespace ring {

void RingBackend::startTimeEstimate() {
  CheckScope s{"_time_estimator", rank_, size_};
  checkConnected(s);
  estimate_.start(s);
}

float RingBackend::endTimeEstimate() { return estimate_.end(); }

c10::intrusive_ptr<c10d::Work> RingBackend::estimated(const HostCall& call) {
  const auto [collective, bytes] = pricedAs(call, size_);
  double seconds = 0;
  {
    std::lock_guard<std::mutex> lock(commMutex_);
    if (comm_) seconds = comm_->estimatedSeconds(collective, bytes);
  }
  estimate_.add(seconds);
  return completedWork(call.outputs);
}

}  // namespace ring
