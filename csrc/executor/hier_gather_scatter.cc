#include "executor/hier_gather_scatter.h"

#include <cstring>

#include "common/errors.h"
#include "executor/direct_collectives.h"
#include "schedule/ring_plan.h"

namespace ring {

namespace {

struct Place {
  int host;
  int local;
  int hosts;
  int localRanks;
};

Place placeOf(const HostLayout& layout, int rank) {
  Place p{layout.hostOf[static_cast<size_t>(rank)], layout.localIndex(rank), layout.hosts(),
          layout.ranksPerHost()};
  RING_ASSERT(p.localRanks > 0, "two-level all_gather/reduce_scatter on hosts of unequal size");
  return p;
}

}  // namespace

void hierAllGather(Transport& t, const HostLayout& layout, const void* input, void* output,
                   int64_t countPerRank, size_t elemSize, int64_t sliceElems, bool directBetween,
                   std::vector<char>* staging, const Fingerprint& fp, const WaitContext& ctx) {
  const Place p = placeOf(layout, t.rank());
  const int n = p.hosts * p.localRanks;
  const int64_t blockBytes = countPerRank * static_cast<int64_t>(elemSize);
  staging->resize(static_cast<size_t>(n * blockBytes));
  char* stage = staging->data();
  // The H parts of this rank's local index, once phase 1 is done.
  char* mine = stage + static_cast<int64_t>(p.local) * p.hosts * blockBytes;
  const std::vector<int> peers = ranksOfLocalIndex(layout, p.local);
  if (directBetween) {
    directAllGatherAmong(t, DirectMembers{peers.data(), p.hosts, p.host}, input, mine,
                         countPerRank, elemSize, fp, ctx);
  } else {
    PlanBuffers between{static_cast<const char*>(input), mine, elemSize, nullptr, nullptr, 1};
    runRingPlanAmong(t, peers, p.host, planAllGather(p.hosts, p.host, countPerRank, sliceElems),
                     between, fp, ctx);
  }
  if (p.localRanks > 1) {
    // Our contribution is our block of the staging buffer already (the plan's copy is a no-op).
    PlanBuffers within{mine, stage, elemSize, nullptr, nullptr, 1};
    runRingPlanAmong(t, layout.members[static_cast<size_t>(p.host)], p.local,
                     planAllGather(p.localRanks, p.local, countPerRank * p.hosts, sliceElems),
                     within, fp, ctx);
  }
  char* out = static_cast<char*>(output);
  for (int r = 0; r < n && blockBytes > 0; ++r) {
    std::memcpy(out + r * blockBytes, stage + localMajorPosition(layout, r) * blockBytes,
                static_cast<size_t>(blockBytes));
  }
}

void hierReduceScatter(Transport& t, const HostLayout& layout, int64_t countPerRank,
                       int64_t sliceElems, bool directBetween, const PlanBuffers& io,
                       std::vector<char>* staging, const Fingerprint& fp,
                       const WaitContext& ctx) {
  const Place p = placeOf(layout, t.rank());
  const int n = p.hosts * p.localRanks;
  const int64_t blockBytes = countPerRank * static_cast<int64_t>(io.elemSize);
  staging->resize(static_cast<size_t>((n + p.hosts) * blockBytes));
  char* stage = staging->data();
  for (int r = 0; r < n && blockBytes > 0; ++r) {
    std::memcpy(stage + localMajorPosition(layout, r) * blockBytes, io.input + r * blockBytes,
                static_cast<size_t>(blockBytes));
  }
  // With one rank per host, its region is the whole (reordered) input.
  const char* hostSum = stage;
  if (p.localRanks > 1) {
    char* sum = stage + n * blockBytes;
    PlanBuffers within = io;
    within.input = stage;
    within.output = sum;
    within.divide = nullptr;  // not final: the other hosts' sums are still to come
    runRingPlanAmong(t, layout.members[static_cast<size_t>(p.host)], p.local,
                     planReduceScatter(p.localRanks, p.local, countPerRank * p.hosts, sliceElems),
                     within, fp, ctx);
    hostSum = sum;
  }
  const std::vector<int> peers = ranksOfLocalIndex(layout, p.local);
  if (directBetween) {
    directReduceScatterAmong(t, DirectMembers{peers.data(), p.hosts, p.host}, hostSum,
                             io.output, countPerRank, io, fp, ctx);
    return;
  }
  PlanBuffers between = io;
  between.input = hostSum;
  runRingPlanAmong(t, peers, p.host, planReduceScatter(p.hosts, p.host, countPerRank, sliceElems),
                   between, fp, ctx);
}

}  // namespace ring
