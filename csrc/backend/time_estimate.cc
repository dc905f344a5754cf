#include "backend/time_estimate.h"

#include "backend/tensor_checks.h"

namespace ring {

void TimeEstimate::start(const CheckScope& s) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (open_.load()) failUsage(s, "already estimating: time estimators do not nest");
  seconds_ = 0;
  open_.store(true);
}

float TimeEstimate::end() {
  std::lock_guard<std::mutex> lock(mutex_);
  open_.store(false);
  return static_cast<float>(seconds_ * 1e6);
}

void TimeEstimate::add(double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  seconds_ += seconds;
}

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

}  // namespace ring
