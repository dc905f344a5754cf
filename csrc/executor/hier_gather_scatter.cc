#include "executor/hier_gather_scatter.h"

#include <algorithm>
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

// Hosts of unequal size, through one rank per host (its lowest, the "leader"; see
// hier_gather_scatter.h). Each host's parts sit in a block as wide as the widest host, host
// after host, so that the phase between the leaders moves equal blocks.
struct Leaders {
  int host;
  int local;
  int localRanks;
  int widest;                       // the largest host's rank count
  std::vector<int> ranks;           // the leaders, in host order
  const std::vector<int>* members;  // this rank's host, in rank order
};

Leaders leadersFor(const HostLayout& layout, int rank) {
  Leaders l;
  l.host = layout.hostOf[static_cast<size_t>(rank)];
  l.local = layout.localIndex(rank);
  l.members = &layout.members[static_cast<size_t>(l.host)];
  l.localRanks = static_cast<int>(l.members->size());
  l.widest = 0;
  for (const std::vector<int>& m : layout.members) {
    l.widest = std::max(l.widest, static_cast<int>(m.size()));
  }
  l.ranks = ranksOfLocalIndex(layout, 0);
  return l;
}

// Rank r's part in the padded staging buffer: its host's block, then its place in the host.
int64_t paddedPosition(const HostLayout& layout, int widest, int r) {
  return static_cast<int64_t>(layout.hostOf[static_cast<size_t>(r)]) * widest +
         layout.localIndex(r);
}

void leaderAllGather(Transport& t, const HostLayout& layout, const void* input, void* output,
                     int64_t countPerRank, size_t elemSize, int64_t sliceElems,
                     bool directBetween, std::vector<char>* staging, const Fingerprint& fp,
                     const WaitContext& ctx) {
  const Leaders l = leadersFor(layout, t.rank());
  const int hosts = layout.hosts();
  const int n = static_cast<int>(layout.hostOf.size());
  const int64_t blockBytes = countPerRank * static_cast<int64_t>(elemSize);
  const int64_t hostBytes = l.widest * blockBytes;
  staging->resize(static_cast<size_t>(hosts * hostBytes));
  // With no bytes the phases still run: their messages carry the fingerprint, so a rank
  // called with another count fails with a mismatch rather than waiting.
  char* stage = staging->data();
  char* mine = stage + l.host * hostBytes;
  // (1) Inside the host: its parts, in rank order, into its block; the padding is zeros, so
  // no stale bytes of this process go to another host.
  if (l.localRanks > 1) {
    PlanBuffers within{static_cast<const char*>(input), mine, elemSize, nullptr, nullptr, 1};
    runRingPlanAmong(t, *l.members, l.local,
                     planAllGather(l.localRanks, l.local, countPerRank, sliceElems), within, fp,
                     ctx);
  } else if (blockBytes > 0) {
    std::memmove(mine, input, static_cast<size_t>(blockBytes));
  }
  if (blockBytes > 0) {
    std::memset(mine + l.localRanks * blockBytes, 0,
                static_cast<size_t>((l.widest - l.localRanks) * blockBytes));
  }
  // (2) Between the leaders: every host's block to every leader.
  if (l.local == 0) {
    const int64_t hostCount = countPerRank * l.widest;
    if (directBetween) {
      FifoRound links(t, DirectMembers{l.ranks.data(), hosts, l.host});
      directAllGather(links, mine, stage, hostCount, elemSize, fp, ctx);
    } else {
      PlanBuffers between{mine, stage, elemSize, nullptr, nullptr, 1};
      runRingPlanAmong(t, l.ranks, l.host, planAllGather(hosts, l.host, hostCount, sliceElems),
                       between, fp, ctx);
    }
  }
  // (3) Inside the host: the leader's whole buffer to the others, down a chain.
  if (l.localRanks > 1) {
    PlanBuffers all{stage, stage, elemSize, nullptr, nullptr, 1};
    runRingPlanAmong(t, *l.members, l.local,
                     planBroadcast(l.localRanks, l.local, 0, countPerRank * l.widest * hosts,
                                   sliceElems),
                     all, fp, ctx);
  }
  char* out = static_cast<char*>(output);
  for (int r = 0; r < n && blockBytes > 0; ++r) {
    std::memcpy(out + r * blockBytes, stage + paddedPosition(layout, l.widest, r) * blockBytes,
                static_cast<size_t>(blockBytes));
  }
}

void leaderReduceScatter(Transport& t, const HostLayout& layout, int64_t countPerRank,
                         int64_t sliceElems, bool directBetween, const PlanBuffers& io,
                         std::vector<char>* staging, const Fingerprint& fp,
                         const WaitContext& ctx) {
  const Leaders l = leadersFor(layout, t.rank());
  const int hosts = layout.hosts();
  const int n = static_cast<int>(layout.hostOf.size());
  const int64_t blockBytes = countPerRank * static_cast<int64_t>(io.elemSize);
  const int64_t hostBytes = l.widest * blockBytes;
  const int64_t allBytes = hosts * hostBytes;
  staging->resize(static_cast<size_t>(2 * allBytes + hostBytes));
  char* padded = staging->data();
  char* hostSum = padded + allBytes;
  char* block = hostSum + allBytes;
  // The input in padded order; the padding zeros (reduced along, never read out).
  if (blockBytes > 0) std::memset(padded, 0, static_cast<size_t>(allBytes));
  for (int r = 0; r < n && blockBytes > 0; ++r) {
    std::memcpy(padded + paddedPosition(layout, l.widest, r) * blockBytes,
                io.input + r * blockBytes, static_cast<size_t>(blockBytes));
  }
  // (1) Inside the host: the whole buffer reduced to the leader, down a chain.
  const char* sum = padded;
  if (l.localRanks > 1) {
    // No division (AVG) here: the other hosts' sums are still to come.
    const PlanBuffers within{padded, hostSum, io.elemSize, io.combine, nullptr, io.divisor};
    runRingPlanAmong(t, *l.members, l.local,
                     planReduce(l.localRanks, l.local, 0, countPerRank * l.widest * hosts,
                                sliceElems),
                     within, fp, ctx);
    sum = hostSum;
  }
  // (2) Between the leaders: leader h ends with host h's block summed over every host (and
  // divided, for AVG: once, here).
  if (l.local == 0) {
    const int64_t hostCount = countPerRank * l.widest;
    if (directBetween) {
      FifoRound links(t, DirectMembers{l.ranks.data(), hosts, l.host});
      directReduceScatter(links, sum, block, hostCount, io, fp, ctx);
    } else {
      PlanBuffers between = io;
      between.input = sum;
      between.output = block;
      runRingPlanAmong(t, l.ranks, l.host,
                       planReduceScatter(hosts, l.host, hostCount, sliceElems), between, fp,
                       ctx);
    }
  }
  // (3) Inside the host: the leader's block to the others; each keeps its own part.
  if (l.localRanks > 1) {
    PlanBuffers all{block, block, io.elemSize, nullptr, nullptr, 1};
    runRingPlanAmong(t, *l.members, l.local,
                     planBroadcast(l.localRanks, l.local, 0, countPerRank * l.widest,
                                   sliceElems),
                     all, fp, ctx);
  }
  if (blockBytes > 0) {
    std::memcpy(io.output, block + l.local * blockBytes, static_cast<size_t>(blockBytes));
  }
}

}  // namespace

void hierAllGather(Transport& t, const HostLayout& layout, const void* input, void* output,
                   int64_t countPerRank, size_t elemSize, int64_t sliceElems, bool directBetween,
                   std::vector<char>* staging, const Fingerprint& fp, const WaitContext& ctx) {
  if (layout.ranksPerHost() == 0) {
    leaderAllGather(t, layout, input, output, countPerRank, elemSize, sliceElems, directBetween,
                    staging, fp, ctx);
    return;
  }
  const Place p = placeOf(layout, t.rank());
  const int n = p.hosts * p.localRanks;
  const int64_t blockBytes = countPerRank * static_cast<int64_t>(elemSize);
  staging->resize(static_cast<size_t>(n * blockBytes));
  char* stage = staging->data();
  // The H parts of this rank's local index, once phase 1 is done.
  char* mine = stage + static_cast<int64_t>(p.local) * p.hosts * blockBytes;
  const std::vector<int> peers = ranksOfLocalIndex(layout, p.local);
  if (directBetween) {
    FifoRound links(t, DirectMembers{peers.data(), p.hosts, p.host});
    directAllGather(links, input, mine, countPerRank, elemSize, fp, ctx);
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
  if (layout.ranksPerHost() == 0) {
    leaderReduceScatter(t, layout, countPerRank, sliceElems, directBetween, io, staging, fp,
                        ctx);
    return;
  }
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
    FifoRound links(t, DirectMembers{peers.data(), p.hosts, p.host});
    directReduceScatter(links, hostSum, io.output, countPerRank, io, fp, ctx);
    return;
  }
  PlanBuffers between = io;
  between.input = hostSum;
  runRingPlanAmong(t, peers, p.host, planReduceScatter(p.hosts, p.host, countPerRank, sliceElems),
                   between, fp, ctx);
}

}  // namespace ring
