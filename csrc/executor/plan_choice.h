// Which plan a collective runs, from the group's layout, the message size and the knobs.
//
// Why a table rather than one plan: the flat ring moves the fewest bytes per link and
// pipelines, but pays 2(n-1) hops, each waiting for the slowest link; two levels pay the
// network latency 2(H-1) times with a ring between H hosts, ceil(log2 H) times (+2 when H is no
// power of two) with recursive doubling, which sends the whole part each time, and log_r H
// times in rounds of r hosts, which send it r-1 times a round (schedule/radix_schedule.h;
// docs/scale.md has the alpha-beta model: python -m torch_ring_backend.bench.model). Inside
// one host the flat ring (or the direct round) is as short as it gets.
//
//   group          message S (bytes)                 plan (TORCH_RING_ALGO=auto)
//   one host       S * (n-1) <= TORCH_RING_DIRECT_BYTES  a direct round (through the mailboxes
//                  and S <= the slot                 when S <= TORCH_RING_LL_BYTES)
//   one host       larger                            flat ring
//   H >= 2 hosts   S * (H-1) <= TORCH_RING_DIRECT_BYTES  two levels, a direct round between hosts
//   H >= 2 hosts   S <= TORCH_RING_RD_BYTES            two levels, rounds of up to
//                                                    k = 1 + TORCH_RING_DIRECT_BYTES / S hosts
//                                                    between hosts (recursive doubling if the
//                                                    schedule's rounds are all of 2)
//   H >= 2 hosts   larger                            the cheaper of the flat ring and two levels
//                                                    with a ring between hosts, priced from
//                                                    TORCH_RING_SHM_LINK / TORCH_RING_NET_LINK
//                                                    (schedule/ring_costs.h; two levels on ties)
//   unequal hosts  past the direct round             the cheapest of the flat ring, two levels
//                                                    with a ring (priced by its chain through
//                                                    the segments), and (up to RD_BYTES) the
//                                                    rounds or the direct round through one
//                                                    rank per host (ring_costs.h)
//
// The rounds' bound k keeps what one round sends, S * (k-1), within the direct round's budget,
// so the table's rows meet where the budget says. ("hosts" are the groups of ranks that share
// memory: with TORCH_RING_TRANSPORT=tcp every rank is a host of its own.) The thresholds'
// arithmetic, with figures for 10 GbE: docs/plan_choice.md.
//
// Every rank must choose alike, so the choice is a pure function of values that are the same on
// every rank (the layout from the host identities, the fingerprint's count) and of the knobs,
// which set-up compares across ranks (settingsLine).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "protocol/message_header.h"
#include "schedule/host_layout.h"
#include "schedule/radix_schedule.h"
#include "schedule/ring_costs.h"

namespace ring {

// TORCH_RING_ALGO, parsed once at set-up: "auto" (none: each call's plan is priced) or the word
// of an algorithm the table lets a knob force (protocol/algorithms.h). Throws UsageError naming
// the word and the choices for anything else.
std::optional<Algorithm> parseAlgoKnob(const std::string& word);
// "auto", or the forced algorithm's word.
const char* algoKnobName(std::optional<Algorithm> forced);

struct PlanSettings {
  // The algorithm TORCH_RING_ALGO forces, or none (auto). Only a forcible row of the table
  // (checkPlanSettings refuses the others).
  std::optional<Algorithm> forced;
  // The group: its ranks, and whether every rank shares memory with every other (only there
  // is there a direct round inside one host, and mailboxes).
  int ranks = 1;
  bool oneSharedMemory = false;
  // Largest message of a mailbox round (the mailbox's capacity: TORCH_RING_LL_BYTES); -1: the
  // group has no mailboxes.
  int64_t mailboxBytes = -1;
  int64_t rdBytes = 256 * 1024;
  int64_t directBytes = 64 * 1024;
  // What auto prices the flat ring and two levels with, for messages past the rounds.
  LinkCost shmLink = kDefaultShmLink;
  LinkCost netLink = kDefaultNetLink;
  // The group's slot: the flat ring's pipeline piece (not a knob of its own here).
  int64_t slotBytes = 256 * 1024;
};

// Throws UsageError for a negative limit.
void checkPlanSettings(const PlanSettings& s);

// "ALPHA_SECONDS,BYTES_PER_SECOND" (the model's --intra / --inter syntax: "25e-6,1.25e9"), or
// empty for `fallback`. Throws UsageError naming `knob` for anything else, a negative latency
// or a bandwidth that is not positive.
LinkCost parseLinkCost(const std::string& text, const char* knob, LinkCost fallback);

// The plan of one call: the algorithm its messages carry in their fingerprint, whether it is one
// round through the mailboxes (transport/link.h, Mailbox: the protocol of a direct round's or a
// barrier's small messages), and for rounds between hosts (HierRd, HierRadix) the rounds.
struct CallPlan {
  Algorithm algorithm = Algorithm::Ring;
  bool mailboxRound = false;
  RadixSchedule rounds;  // HierRd: rounds of 2; HierRadix: of up to 1 + directBytes / bytes
};

// The direct round inside one host: a message of `bytes` to each of the n-1 others, in one
// slot. Why the budget counts n-1 messages: a direct round sends the message to every other
// rank, where a ring passes about one message's worth per rank whatever n is, so the direct
// round's lead shrinks as n grows (docs/plan_choice.md has the measurements).
inline bool directInsideOneHost(const PlanSettings& s, int64_t bytes) {
  return s.oneSharedMemory && s.ranks > 1 && s.directBytes > 0 && bytes <= s.slotBytes &&
         bytes * (s.ranks - 1) <= s.directBytes;
}

// The layout as the ring prices see it: on hosts of unequal size the largest host, whose
// shared-memory phases and shared network link take longest.
RingShape shapeOf(const PlanSettings& s, const HostLayout& layout);

// chooseCallPlan past the direct round inside one host.
CallPlan choosePlanPastDirect(const PlanSettings& s, const HostLayout& layout, Collective k,
                              int64_t bytes);

// The one choice of a call's plan, from the group's settings and layout and the call:
// all_reduce (`bytes`: the whole buffer), all_gather and reduce_scatter (one rank's part),
// broadcast and barrier (`bytes` unused). Every other collective has one plan (Ring). Inline:
// every call asks it, and its answers inside one host (the direct round, else the flat ring)
// are a few comparisons.
inline CallPlan chooseCallPlan(const PlanSettings& s, const HostLayout& layout, Collective k,
                               int64_t bytes) {
  if ((k == Collective::AllReduce || k == Collective::AllGather) &&
      directInsideOneHost(s, bytes)) {
    CallPlan p;
    p.algorithm = Algorithm::Direct;
    p.mailboxRound = bytes <= s.mailboxBytes;
    return p;
  }
  // One host past the direct round, under auto: the flat ring for every collective but the
  // barrier (the table's second row); there is nothing to price between hosts.
  if (k != Collective::Barrier && !s.forced && layout.hosts() <= 1) {
    return CallPlan{};
  }
  return choosePlanPastDirect(s, layout, k, bytes);
}

// What the flight recorder lists as a call's plan: "direct/mailbox", "mailbox" (a barrier's
// round), else the algorithm's word ("direct", "ring", "hier_ring", ...).
inline const char* callPlanName(Collective k, const CallPlan& p) {
  if (p.mailboxRound) return k == Collective::Barrier ? "mailbox" : "direct/mailbox";
  return algorithmRow(p.algorithm).word;
}

// The plan of an all_reduce of `bytes` over `layout` past the direct round inside one host
// (Algorithm::Ring, HierRing, HierRd, HierRadix or HierDirect). The rounds are searched once
// per call, here.
CallPlan chooseAllReducePlan(const PlanSettings& s, const HostLayout& layout, int64_t bytes);
inline Algorithm chooseAllReduce(const PlanSettings& s, const HostLayout& layout, int64_t bytes) {
  return chooseAllReducePlan(s, layout, bytes).algorithm;
}

// all_gather and reduce_scatter in two levels (executor/hier_gather_scatter.h): by local index
// on hosts of equal size, through one rank per host (the leaders) on hosts of unequal size.
//   group                         plan (auto)
//   one host                      flat ring (or the direct round inside one host)
//   equal hosts, part P bytes, P * (H-1) <= TORCH_RING_DIRECT_BYTES   two levels, direct between
//   equal hosts of 2+ ranks       the cheaper of the flat ring and two levels with a ring
//                                 between hosts (schedule/ring_costs.h; two levels on ties)
//   one rank per host             flat ring (two levels would be the same ring)
//   unequal hosts, P * W * (H-1) <= TORCH_RING_DIRECT_BYTES (W: the widest host's ranks)
//                                 two levels, a direct round between the leaders
//   unequal hosts, larger         flat ring
// hier_rd and hier_radix pick the ring between hosts (their rounds are all_reduce's only),
// hier_direct the direct round at any size. Each of the H-1 messages of a direct round is one
// part: the same budget as the direct round of all_gather and all_reduce.
// `partBytes`: one rank's part (the all_gather's input, the reduce_scatter's output).
Algorithm chooseAllGather(const PlanSettings& s, const HostLayout& layout, int64_t partBytes);
Algorithm chooseReduceScatter(const PlanSettings& s, const HostLayout& layout, int64_t partBytes);

// broadcast: a chain around the ring that visits the hosts one after the other (host_layout.h's
// hostMajorRing: the network crossed at most H times wherever the ranks sit) unless the knob
// says ring or the group is one host: Algorithm::HierRing or Ring.
Algorithm chooseBroadcast(const PlanSettings& s, const HostLayout& layout);

// "algo=auto rd_bytes=262144": what set-up publishes and compares between ranks; in a group of
// several hosts " direct_bytes=65536 shm_link=2e-06,1e+10 net_link=2.5e-05,1.25e+09" too,
// because there they bound the rounds between hosts and price the rings, and ranks whose
// rounds differ would exchange with other partners under the same fingerprint (a timeout or,
// worse, partial sums taken for whole ones). On one host it is not compared:
// ranks that differ there run plans whose first messages carry different fingerprints (direct
// or not), a mismatch error on every rank (tests/cpp/test_direct_collectives.cc).
std::string settingsLine(const PlanSettings& s, const HostLayout& layout);

}  // namespace ring
