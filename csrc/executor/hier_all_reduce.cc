#include "executor/hier_all_reduce.h"

#include "executor/direct_collectives.h"
#include "executor/recursive_multiplying.h"
#include "schedule/ring_plan.h"

namespace ring {

namespace {

// How the hosts' owners (or leaders) reduce between hosts: one direct round, rounds (recursive
// doubling or more hosts a round), else a ring.
bool directBetweenHosts(const CallPlan& p) { return p.algorithm == Algorithm::HierDirect; }
bool roundsBetweenHosts(const CallPlan& p) {
  return p.algorithm == Algorithm::HierRd || p.algorithm == Algorithm::HierRadix;
}

// Hosts of unequal size, rounds or the direct round between hosts: through one rank per host
// (its lowest, the leader). Why not the segments: a host of fewer ranks owns more segments
// and takes them one after another, so a plan made for one network latency paid one per
// segment, and on hosts of 3, 1 and 2 ranks took about the flat ring's time (docs/scale.md).
// Through the leaders the network is crossed once per round, by one
// message per host of the whole buffer, which these plans' byte budgets allow (plan_choice.h).
void leadersAllReduce(Transport& t, const HostLayout& layout, char* data, int64_t count,
                      int64_t sliceElems, const PlanBuffers& io, const CallPlan& plan,
                      const Fingerprint& fp, const WaitContext& ctx) {
  const int me = t.rank();
  const int host = layout.hostOf[static_cast<size_t>(me)];
  const int local = layout.localIndex(me);
  const std::vector<int>& ranks = layout.members[static_cast<size_t>(host)];
  const int localRanks = static_cast<int>(ranks.size());
  // (1) Inside the host, a chain reduces the buffer to the leader (no division yet).
  PlanBuffers within = io;
  within.input = data;
  within.output = data;
  within.divide = nullptr;
  if (localRanks > 1) {
    runRingPlanAmong(t, ranks, local, planReduce(localRanks, local, 0, count, sliceElems),
                     within, fp, ctx);
  }
  // (2) Between the leaders, in host order: every leader sums the hosts' sums in one order
  // (and divides, for AVG: once, here).
  if (local == 0) {
    const std::vector<int> leaders = ranksOfLocalIndex(layout, 0);
    if (directBetweenHosts(plan)) {
      FifoRound links(t, DirectMembers{leaders.data(), layout.hosts(), host});
      directAllReduce(links, data, count, io, fp, ctx);
    } else {
      recursiveAllReduce(t, leaders, host, plan.rounds, data, count, io, fp, ctx);
    }
  }
  // (3) Inside the host, the leader's result down a chain: every rank holds its bits.
  if (localRanks > 1) {
    const PlanBuffers copy{data, data, io.elemSize, nullptr, nullptr, 1};
    runRingPlanAmong(t, ranks, local, planBroadcast(localRanks, local, 0, count, sliceElems),
                     copy, fp, ctx);
  }
}

}  // namespace

void hierAllReduce(Transport& t, const HostLayout& layout, const std::vector<HostSegment>& segments,
                   char* data, int64_t count, int64_t sliceElems, const PlanBuffers& io,
                   const CallPlan& plan, const Fingerprint& fp, const WaitContext& ctx) {
  const int me = t.rank();
  const int host = layout.hostOf[static_cast<size_t>(me)];
  const int local = layout.localIndex(me);
  const std::vector<int>& ranks = layout.members[static_cast<size_t>(host)];
  const int localRanks = static_cast<int>(ranks.size());
  const int64_t es = static_cast<int64_t>(io.elemSize);
  if (layout.ranksPerHost() == 0 && (directBetweenHosts(plan) || roundsBetweenHosts(plan))) {
    leadersAllReduce(t, layout, data, count, sliceElems, io, plan, fp, ctx);
    return;
  }

  // Inside the host nothing is final yet (no division), unless the group is one host: then
  // the reduce half completes every element.
  const bool oneHost = layout.hosts() == 1;
  PlanBuffers within = io;
  within.input = data;
  within.output = data;
  if (!oneHost) within.divide = nullptr;
  if (localRanks > 1) {
    runRingPlanAmong(t, ranks, local,
                     planAllReduceReduceHalf(localRanks, local, count, sliceElems), within, fp,
                     ctx);
  }
  for (const HostSegment& s : segments) {
    if (oneHost || s.owners[static_cast<size_t>(host)] != me) continue;
    char* at = data + s.range.offset * es;
    if (directBetweenHosts(plan)) {
      FifoRound links(t, DirectMembers{s.owners.data(), layout.hosts(), host});
      directAllReduce(links, at, s.range.count, io, fp, ctx);
      continue;
    }
    if (roundsBetweenHosts(plan)) {
      recursiveAllReduce(t, s.owners, host, plan.rounds, at, s.range.count, io, fp, ctx);
      continue;
    }
    PlanBuffers part = io;
    part.input = at;
    part.output = at;
    runRingPlanAmong(t, s.owners, host,
                     planAllReduce(layout.hosts(), host, s.range.count, sliceElems), part, fp,
                     ctx);
  }
  if (localRanks > 1) {
    runRingPlanAmong(t, ranks, local,
                     planAllReduceGatherHalf(localRanks, local, count, sliceElems), within, fp,
                     ctx);
  }
}

}  // namespace ring
