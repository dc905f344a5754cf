// RingBackend's answer to torch.distributed._time_estimator (ring_backend.h): the calls made
// inside it are priced by the group's plan model (executor/call_estimate.h) instead of run.
#include "backend/ring_backend.h"

#include <c10/util/Exception.h>

#include "backend/tensor_checks.h"

namespace ring {
namespace {

// The collective a torch call type runs as, and the bytes its estimate counts
// (estimateCallSeconds' `bytes`).
std::pair<Collective, int64_t> pricedAs(const HostCall& call, int size) {
  using T = c10d::OpType;
  const int64_t in = bytesHeld(call.inputs), out = bytesHeld(call.outputs);
  switch (call.type) {
    case T::ALLREDUCE:
    case T::ALLREDUCE_COALESCED:
      return {Collective::AllReduce, out};
    case T::_ALLREDUCE_SPARSE:
      return {Collective::AllGather, in};
    case T::ALLGATHER:
    case T::_ALLGATHER_BASE:
    case T::ALLGATHER_COALESCED:
      return {Collective::AllGather, in};
    case T::REDUCE_SCATTER:
    case T::_REDUCE_SCATTER_BASE:
      return {Collective::ReduceScatter, out};
    case T::BROADCAST:
      return {Collective::Broadcast, out};
    case T::REDUCE:
      return {Collective::Reduce, out};
    case T::GATHER:
      return {Collective::Gather, in};
    case T::SCATTER:
      return {Collective::Scatter, out};
    case T::ALLTOALL:
    case T::ALLTOALL_BASE:
      return {Collective::AllToAll, in};
    case T::BARRIER:
      return {Collective::Barrier, 0};
    default:  // a block of several calls: as one all_gather of its inputs
      return {Collective::AllGather, size > 0 ? in / size : in};
  }
}

}  // namespace

void RingBackend::startTimeEstimate() {
  CheckScope s{"_time_estimator", rank_, size_};
  checkConnected(s);
  std::lock_guard<std::mutex> lock(estimateMutex_);
  if (estimating_.load()) failUsage(s, "already estimating: time estimators do not nest");
  estimatedSeconds_ = 0;
  estimating_.store(true);
}

float RingBackend::endTimeEstimate() {
  std::lock_guard<std::mutex> lock(estimateMutex_);
  estimating_.store(false);
  return static_cast<float>(estimatedSeconds_ * 1e6);
}

c10::intrusive_ptr<c10d::Work> RingBackend::estimated(const HostCall& call) {
  const auto [collective, bytes] = pricedAs(call, size_);
  double seconds = 0;
  {
    std::lock_guard<std::mutex> lock(commMutex_);
    if (comm_) seconds = comm_->estimatedSeconds(collective, bytes);
  }
  {
    std::lock_guard<std::mutex> lock(estimateMutex_);
    estimatedSeconds_ += seconds;
  }
  return completedWork(call.outputs);
}

}  // namespace ring
