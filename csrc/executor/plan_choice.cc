#include "executor/plan_choice.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "common/errors.h"

namespace ring {

std::optional<Algorithm> parseAlgoKnob(const std::string& word) {
  if (word == "auto") return std::nullopt;
  std::string choices = "auto";
  for (const AlgorithmRow& row : kAlgorithms) {
    if (!row.forcible) continue;
    if (word == row.word) return row.algorithm;
    choices += strCat(", ", row.word);
  }
  throw UsageError(strCat("ring: collective plan '", word, "' must be one of ", choices,
                          " (TORCH_RING_ALGO)"));
}

const char* algoKnobName(std::optional<Algorithm> forced) {
  return forced ? algorithmRow(*forced).word : "auto";
}

void checkPlanSettings(const PlanSettings& s) {
  RING_USAGE_CHECK(s.rdBytes >= 0, "ring: TORCH_RING_RD_BYTES must be >= 0, got ", s.rdBytes);
  // Only what a knob may force (parseAlgoKnob's rows): the direct round inside one host, forced,
  // would be taken for messages that do not fit its one slot.
  RING_USAGE_CHECK(!s.forced || algorithmRow(*s.forced).forcible,
                   "ring: TORCH_RING_ALGO cannot force ",
                   s.forced ? algorithmRow(*s.forced).word : "", " (auto takes it where it fits)");
}

LinkCost parseLinkCost(const std::string& text, const char* knob, LinkCost fallback) {
  if (text.empty()) return fallback;
  const char* p = text.c_str();
  char* end = nullptr;
  errno = 0;
  const double alpha = std::strtod(p, &end);
  bool ok = end != p && *end == ',' && errno == 0;
  double beta = 0;
  if (ok) {
    const char* b = end + 1;
    beta = std::strtod(b, &end);
    ok = end != b && *end == '\0' && errno == 0;
  }
  ok = ok && std::isfinite(alpha) && std::isfinite(beta) && alpha >= 0 && beta > 0;
  RING_USAGE_CHECK(ok, "ring: ", knob, "='", text,
                   "' must be ALPHA_SECONDS,BYTES_PER_SECOND with a latency >= 0 and a "
                   "bandwidth > 0, e.g. 25e-6,1.25e9 (one step over 10 GbE)");
  return LinkCost{alpha, beta};
}

namespace {

// The most hosts one round may join: what a round sends, bytes * (k - 1), within directBytes.
int maxRadix(const PlanSettings& s, int hosts, int64_t bytes) {
  if (hosts <= 2) return 2;
  if (bytes <= 0 || s.directBytes / bytes >= hosts - 1) return hosts;
  return static_cast<int>(std::max<int64_t>(2, 1 + s.directBytes / bytes));
}

bool allRoundsOfTwo(const RadixSchedule& r) {
  for (int radix : r.radices) {
    if (radix != 2) return false;
  }
  return true;
}

}  // namespace

RingShape shapeOf(const PlanSettings& s, const HostLayout& layout) {
  RingShape shape;
  shape.hosts = layout.hosts();
  shape.ranksPerHost = 1;
  for (const std::vector<int>& ranks : layout.members) {
    shape.ranksPerHost = std::max(shape.ranksPerHost, static_cast<int>(ranks.size()));
  }
  shape.shm = s.shmLink;
  shape.net = s.netLink;
  shape.slotBytes = static_cast<double>(s.slotBytes);
  return shape;
}

namespace {

CallPlan withRounds(Algorithm a, RadixSchedule rounds) {
  CallPlan c;
  c.algorithm = a;
  c.rounds = std::move(rounds);
  return c;
}

// Hosts of unequal size, past the direct round: two levels with a ring all-reduce the segments
// between every host's chunk edges one after another on each owner (host_layout.h), and a
// small host's rank owns many of them, so that plan pays the network's latency once per
// segment on that rank's chain; the rounds go through one rank per host and move the whole
// message (hier_all_reduce.h). On hosts of 3, 1 and 2 ranks the rounds over the segments were
// slower than the flat ring (docs/scale.md). So here auto prices
// each plan (segmentedAllReduceSeconds, leadersAllReduceSeconds) against the flat ring and
// takes the cheapest: the flat ring only where it is strictly cheaper, rounds where they cost
// no more than the ring between hosts, and the leaders' direct round where it costs strictly
// less than those (the model's auto_plan makes the same choice). Past its byte budget the
// direct round is priced here, not ruled out: through the leaders it is one network latency
// a slice against the rounds' several, and on 3+1+2 hosts it halved auto's time at 64 KiB
// against the flat ring, its choice before (docs/scale.md).
CallPlan cheapestOnUnequalHosts(const PlanSettings& s, const HostLayout& layout,
                                       int64_t bytes) {
  const RingShape shape = shapeOf(s, layout);
  const double b = static_cast<double>(bytes);
  CallPlan choice = withRounds(Algorithm::Ring, {});
  double best = flatAllReduceSeconds(shape, b);
  const double ring = segmentedAllReduceSeconds(shape, layout, b);
  if (ring <= best) {
    best = ring;
    choice = withRounds(Algorithm::HierRing, {});
  }
  if (bytes <= s.rdBytes) {
    RadixSchedule rounds = radixSchedule(layout.hosts(), maxRadix(s, layout.hosts(), bytes));
    const double priced = leadersAllReduceSeconds(
        shape, layout, b, BetweenHosts{&rounds});
    if (priced <= best) {
      best = priced;
      const Algorithm a = allRoundsOfTwo(rounds) ? Algorithm::HierRd : Algorithm::HierRadix;
      choice = withRounds(a, std::move(rounds));
    }
    const BetweenHosts direct{};
    if (leadersAllReduceSeconds(shape, layout, b, direct) < best) {
      choice = withRounds(Algorithm::HierDirect, {});
    }
  }
  return choice;
}

}  // namespace

CallPlan chooseAllReducePlan(const PlanSettings& s, const HostLayout& layout,
                                    int64_t bytes) {
  const int hosts = std::max(1, layout.hosts());
  // A forced algorithm runs at every size; only the rounds between hosts need a schedule.
  if (s.forced == Algorithm::HierRd) return withRounds(*s.forced, doublingSchedule(hosts));
  if (s.forced == Algorithm::HierRadix) {
    return withRounds(*s.forced, radixSchedule(hosts, maxRadix(s, hosts, bytes)));
  }
  if (s.forced) return withRounds(*s.forced, {});
  if (hosts <= 1) return withRounds(Algorithm::Ring, {});
  if (bytes <= s.directBytes / (hosts - 1)) return withRounds(Algorithm::HierDirect, {});
  if (layout.ranksPerHost() == 0) return cheapestOnUnequalHosts(s, layout, bytes);
  if (bytes > s.rdBytes) {
    const RingShape shape = shapeOf(s, layout);
    const double b = static_cast<double>(bytes);
    return withRounds(flatAllReduceSeconds(shape, b) < twoLevelAllReduceSeconds(shape, b)
                          ? Algorithm::Ring
                          : Algorithm::HierRing,
                      {});
  }
  // Rounds of two are recursive doubling, and say so in the fingerprint.
  RadixSchedule rounds = radixSchedule(hosts, maxRadix(s, hosts, bytes));
  const Algorithm a = allRoundsOfTwo(rounds) ? Algorithm::HierRd : Algorithm::HierRadix;
  return withRounds(a, std::move(rounds));
}

namespace {

// auto's ring for all_gather / reduce_scatter on hosts of equal size (two or more ranks each).
Algorithm cheaperGatherRing(const PlanSettings& s, const HostLayout& layout, int64_t partBytes) {
  if (layout.ranksPerHost() < 2) return Algorithm::Ring;
  const RingShape shape = shapeOf(s, layout);
  const double whole = static_cast<double>(partBytes) * shape.hosts * shape.ranksPerHost;
  return flatAllGatherSeconds(shape, whole) < twoLevelAllGatherSeconds(shape, whole)
             ? Algorithm::Ring
             : Algorithm::HierRing;
}

// Hosts of unequal size: two levels through one rank per host (hier_gather_scatter.h). The
// leaders' direct round sends each its host's block, as wide as the widest host's parts, to
// the H-1 others: within the direct budget auto takes it. Past it auto keeps the flat ring,
// which moves no padding and spreads a host's traffic over its ranks' connections, where the
// leaders' ring pays H-1 network steps on one connection per host.
Algorithm chooseThroughLeaders(const PlanSettings& s, const HostLayout& layout,
                               int64_t partBytes) {
  if (s.forced == Algorithm::HierDirect) return Algorithm::HierDirect;
  if (s.forced) return Algorithm::HierRing;
  size_t widest = 0;
  for (const std::vector<int>& m : layout.members) widest = std::max(widest, m.size());
  const int64_t hostBlock = partBytes * static_cast<int64_t>(widest);
  if (hostBlock <= s.directBytes / (layout.hosts() - 1)) return Algorithm::HierDirect;
  return Algorithm::Ring;
}

}  // namespace

Algorithm chooseAllGather(const PlanSettings& s, const HostLayout& layout, int64_t partBytes) {
  const int hosts = layout.hosts();
  if (s.forced == Algorithm::Ring || hosts <= 1) return Algorithm::Ring;
  if (layout.ranksPerHost() == 0) return chooseThroughLeaders(s, layout, partBytes);
  if (s.forced == Algorithm::HierDirect) return Algorithm::HierDirect;
  if (s.forced) return Algorithm::HierRing;
  if (partBytes <= s.directBytes / (hosts - 1)) return Algorithm::HierDirect;
  return cheaperGatherRing(s, layout, partBytes);
}

// reduce_scatter's plans are all_gather's run backwards (the same messages, the same links,
// opposite direction), so the same part size takes the same plan.
Algorithm chooseReduceScatter(const PlanSettings& s, const HostLayout& layout,
                              int64_t partBytes) {
  return chooseAllGather(s, layout, partBytes);
}

Algorithm chooseBroadcast(const PlanSettings& s, const HostLayout& layout) {
  if (s.forced == Algorithm::Ring || layout.hosts() <= 1) return Algorithm::Ring;
  return Algorithm::HierRing;
}

CallPlan choosePlanPastDirect(const PlanSettings& s, const HostLayout& layout, Collective k,
                              int64_t bytes) {
  switch (k) {
    case Collective::AllReduce:
      return chooseAllReducePlan(s, layout, bytes);
    case Collective::AllGather:
      return withRounds(chooseAllGather(s, layout, bytes), {});
    case Collective::ReduceScatter:
      return withRounds(chooseReduceScatter(s, layout, bytes), {});
    case Collective::Broadcast:
      return withRounds(chooseBroadcast(s, layout), {});
    case Collective::Barrier: {
      // Every barrier of a group with mailboxes is one round of empty messages through them.
      CallPlan p;
      p.mailboxRound = s.ranks > 1 && s.mailboxBytes >= 0;
      return p;
    }
    default:
      return CallPlan{};
  }
}

namespace {

// Enough digits that two different figures never print alike.
std::string linkText(const LinkCost& c) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.9g,%.9g", c.alphaSeconds, c.bytesPerSecond);
  return text;
}

}  // namespace

std::string settingsLine(const PlanSettings& s, const HostLayout& layout) {
  std::string line = strCat("algo=", algoKnobName(s.forced), " rd_bytes=", s.rdBytes);
  if (layout.hosts() > 1) {
    line += strCat(" direct_bytes=", s.directBytes, " shm_link=", linkText(s.shmLink),
                   " net_link=", linkText(s.netLink));
  }
  return line;
}

}  // namespace ring
