#include "executor/call_estimate.h"

#include <algorithm>

#include "schedule/ring_costs.h"

namespace ring {
namespace {

// Every rank sends its message to the n-1 others over `link` at once: one latency, then the
// bytes this rank receives.
double directRoundSeconds(const LinkCost& link, int n, double bytes) {
  return link.alphaSeconds + bytes * (n - 1) / link.bytesPerSecond;
}

double reducingSeconds(const PlanSettings& s, const HostLayout& layout, Collective k,
                       double bytes) {
  const RingShape shape = shapeOf(s, layout);
  const int n = s.ranks;
  const bool allReduce = k == Collective::AllReduce;
  const CallPlan plan = chooseCallPlan(s, layout, k, static_cast<int64_t>(bytes));
  switch (plan.algorithm) {
    case Algorithm::Direct:
      return directRoundSeconds(s.shmLink, n, bytes);
    case Algorithm::Ring:
      return allReduce ? flatAllReduceSeconds(shape, bytes) : flatAllGatherSeconds(shape, bytes * n);
    case Algorithm::HierRing:
      if (!allReduce) return twoLevelAllGatherSeconds(shape, bytes * n);
      return layout.ranksPerHost() == 0 ? segmentedAllReduceSeconds(shape, layout, bytes)
                                        : twoLevelAllReduceSeconds(shape, bytes);
    case Algorithm::HierRd:
    case Algorithm::HierRadix:
      return leadersAllReduceSeconds(shape, layout, bytes,
                                     BetweenHosts{&plan.rounds});
    case Algorithm::HierDirect:
      if (!allReduce) return twoLevelAllGatherSeconds(shape, bytes * n);
      return leadersAllReduceSeconds(shape, layout, bytes,
                                     BetweenHosts{});
  }
  return flatAllReduceSeconds(shape, bytes);
}

}  // namespace

double estimateCallSeconds(const PlanSettings& s, const HostLayout& layout, Collective k,
                           int64_t bytes) {
  const int n = s.ranks;
  if (n <= 1) return kCallOverheadSeconds;
  const double b = static_cast<double>(std::max<int64_t>(bytes, 0));
  // What a message between two ranks crosses at worst: the network once there are hosts.
  const LinkCost& farthest = layout.hosts() > 1 ? s.netLink : s.shmLink;
  double moving = 0;
  switch (k) {
    case Collective::AllReduce:
    case Collective::AllGather:
    case Collective::ReduceScatter:
      moving = reducingSeconds(s, layout, k, b);
      break;
    case Collective::Broadcast:
    case Collective::Reduce:
      // A chain through every rank, pipelined in slots: the ring's chain of n-1 hops of the
      // whole message (flatAllGatherSeconds of n such messages prices exactly that).
      moving = flatAllGatherSeconds(shapeOf(s, layout), b * n);
      break;
    case Collective::Gather:
    case Collective::Scatter:
      // The root exchanges one part with each of the others, one after another.
      moving = (n - 1) * (farthest.alphaSeconds + b / farthest.bytesPerSecond);
      break;
    case Collective::AllToAll:
      // Pairwise: n-1 rounds, each one rank's share of the input to one peer.
      moving = (n - 1) * (farthest.alphaSeconds + b / n / farthest.bytesPerSecond);
      break;
    default:  // barrier: one empty direct round
      moving = directRoundSeconds(farthest, n, 0);
      break;
  }
  return kCallOverheadSeconds + moving;
}

}  // namespace ring
