// What a flat ring and a two-level ring cost, in seconds, from each link's latency and
// bandwidth: the alpha-beta prices of the scale model (torch_ring_backend/bench/model.py,
// docs/scale.md), written again here so that TORCH_RING_ALGO=auto can take the cheaper of the
// two for large messages (executor/plan_choice.h).
//
// Why a price and not a byte threshold: which ring wins depends on the shape, not on the size
// alone. Both rings push the same bytes through each host's network link (2(n-1)/n of an
// all_reduce's message for the flat ring, 2(H-1)/H for the H-host ring over the shards), but
// two levels add a reduce-scatter and an all-gather inside each host that do not overlap the
// network, and save the flat ring's 2(n-1)-hop chain. So two levels win while the chain
// dominates, and while H < beta_shm / beta_net for very large messages; past that the flat
// ring is ahead (python -m torch_ring_backend.bench.model prints where).
//
// The prices (n ranks, H hosts of L, message S; a step costs alpha + bytes / beta):
//   flat ring, hops = 2(n-1) (all_reduce) or n-1 (all_gather, reduce_scatter) of S/n:
//     a chain of `hops` dependent steps of one piece (min(S/n, slot)), H/n of them over the
//     network, per pipeline loop (a loop's steps wait on each other, loops follow each other);
//     a loop never less than the slowest link's `hops` pieces (hops * S/n in all).
//   two-level all_reduce: 2(L-1) shared-memory steps of S/L, plus 2(H-1) network steps of
//     S/(L*H) with the L rings of a host sharing its link (beta / L).
//   two-level all_gather / reduce_scatter: H-1 network steps of S/n at beta / L, plus L-1
//     shared-memory steps of S/L.
//   Every two-level ring runs in slot-sized pieces like the flat ring, each piece paying the
//   latency, so that on one host, where they are the same plan, both cost the same.
// The same formulas as the model's flat_ring, hier_ring, flat_gather and hier_ring_gather;
// tests/python/test_scale_model.py checks that both sides choose alike.
#pragma once

#include <cstdint>

#include "schedule/host_layout.h"
#include "schedule/radix_schedule.h"

namespace ring {

struct LinkCost {
  double alphaSeconds = 0;    // per message
  double bytesPerSecond = 1;  // > 0
};

// One shared-memory step and one step over 10 GbE TCP: the figures issue 27 and the model use.
constexpr LinkCost kDefaultShmLink{2e-6, 10e9};
constexpr LinkCost kDefaultNetLink{25e-6, 1.25e9};

struct RingShape {
  int hosts = 1;
  int ranksPerHost = 1;  // on hosts of unequal size, the largest
  LinkCost shm = kDefaultShmLink;
  LinkCost net = kDefaultNetLink;
  double slotBytes = 256 * 1024;  // a pipeline piece of the flat ring
};

// `bytes`: the all_reduce's message; the all_gather's whole output / reduce_scatter's input.
double flatAllReduceSeconds(const RingShape& s, double bytes);
double twoLevelAllReduceSeconds(const RingShape& s, double bytes);

// The two-level all_reduce with a ring between hosts of unequal size
// (executor/hier_all_reduce.h, the model's _segmented): each host's reduce half (L_h - 1 steps
// of S/L_h); then the segments of hostSegments(layout), each all-reduced by a ring of its
// owners, one per host, each owner taking its segments in order once its host's half is
// done, a segment starting when its last owner is free; then each host's gather half. The
// time is the longest chain through the segments: a host of one rank owns every segment and
// takes them one after another. Each host's link is shared by s.ranksPerHost flows (the
// widest host's ranks). On hosts of equal size this is twoLevelAllReduceSeconds.
double segmentedAllReduceSeconds(const RingShape& s, const HostLayout& layout, double bytes);

// How the leaders all-reduce between the hosts: the rounds `rounds`, or one direct round
// where it is null.
struct BetweenHosts {
  const RadixSchedule* rounds = nullptr;
};

// Rounds or the direct round on hosts of unequal size, through the leaders
// (executor/hier_all_reduce.cc, the model's _leaders_all_reduce): a chain of the widest host's
// L-1 hops reduces the whole message to each leader, the leaders' rounds (or direct round)
// move the whole message with one flow per host, and a chain takes it down again.
double leadersAllReduceSeconds(const RingShape& s, const HostLayout& layout, double bytes,
                               const BetweenHosts& between);
double flatAllGatherSeconds(const RingShape& s, double bytes);
double twoLevelAllGatherSeconds(const RingShape& s, double bytes);

}  // namespace ring
