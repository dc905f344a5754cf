#include "executor/hier_all_reduce.h"

#include "executor/direct_collectives.h"
#include "executor/recursive_multiplying.h"
#include "schedule/ring_plan.h"

namespace ring {

void hierAllReduce(Transport& t, const HostLayout& layout, const std::vector<HostSegment>& segments,
                   char* data, int64_t count, int64_t sliceElems, const PlanBuffers& io,
                   const InterHostPlan& inter, const Fingerprint& fp, const WaitContext& ctx) {
  const int me = t.rank();
  const int host = layout.hostOf[static_cast<size_t>(me)];
  const int local = layout.localIndex(me);
  const std::vector<int>& ranks = layout.members[static_cast<size_t>(host)];
  const int localRanks = static_cast<int>(ranks.size());
  const int64_t es = static_cast<int64_t>(io.elemSize);

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
    if (inter.kind == InterHostKind::Direct) {
      directAllReduceAmong(t, DirectMembers{s.owners.data(), layout.hosts(), host}, at,
                           s.range.count, io, fp, ctx);
      continue;
    }
    if (inter.kind == InterHostKind::Rounds) {
      recursiveAllReduce(t, s.owners, host, inter.schedule, at, s.range.count, io, fp, ctx);
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
