#include "executor/call_estimate.h"

#include "schedule/ring_costs.h"

namespace ring {
namespace {

// Every rank sends its message to the n-1 others over `link` at once: one latency, then the
// bytes this rank receives.
double directRoundSeconds(const LinkCost& link, int n, double bytes) {
  return link.alphaSeconds + bytes * (n - 1) / link.bytesPerSecond;
}

// What a message between two ranks crosses at worst: the network once there are hosts.
const LinkCost& farthest(const PlanSettings& s, const HostLayout& layout) {
  return layout.hosts() > 1 ? s.netLink : s.shmLink;
}

RingShape shape(const PriceInputs& in) { return shapeOf(in.settings, in.layout); }

}  // namespace

namespace plan_prices {

double directRound(const PriceInputs& in) {
  return directRoundSeconds(in.settings.shmLink, in.settings.ranks, in.bytes);
}

double flatAllReduce(const PriceInputs& in) { return flatAllReduceSeconds(shape(in), in.bytes); }

double flatAllGather(const PriceInputs& in) {
  return flatAllGatherSeconds(shape(in), in.bytes * in.settings.ranks);
}

double twoLevelAllReduce(const PriceInputs& in) {
  return in.layout.ranksPerHost() == 0 ? segmentedAllReduceSeconds(shape(in), in.layout, in.bytes)
                                       : twoLevelAllReduceSeconds(shape(in), in.bytes);
}

double twoLevelAllGather(const PriceInputs& in) {
  return twoLevelAllGatherSeconds(shape(in), in.bytes * in.settings.ranks);
}

double leadersRounds(const PriceInputs& in) {
  return leadersAllReduceSeconds(shape(in), in.layout, in.bytes, BetweenHosts{&in.plan.rounds});
}

double leadersDirectRound(const PriceInputs& in) {
  return leadersAllReduceSeconds(shape(in), in.layout, in.bytes, BetweenHosts{});
}

double pairwise(const PriceInputs& in) {
  const LinkCost& link = farthest(in.settings, in.layout);
  return (in.settings.ranks - 1) * (link.alphaSeconds + in.bytes / link.bytesPerSecond);
}

double emptyRound(const PriceInputs& in) {
  return directRoundSeconds(farthest(in.settings, in.layout), in.settings.ranks, 0);
}

}  // namespace plan_prices

double allToAllSeconds(const PlanSettings& s, const HostLayout& layout, double bytes) {
  const int n = s.ranks;
  const LinkCost& link = farthest(s, layout);
  return (n - 1) * (link.alphaSeconds + bytes / n / link.bytesPerSecond);
}

}  // namespace ring
