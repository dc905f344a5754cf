#include "schedule/ring_costs.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace ring {
namespace {

double stepSeconds(double bytes, const LinkCost& link, int sharing = 1) {
  // The model's arithmetic, operation for operation, so that both sides break near-ties alike.
  return link.alphaSeconds + bytes / (link.bytesPerSecond / sharing);
}

// A ring of `hops` steps of `chunk` bytes over every rank, in pipeline loops of one piece per
// step. The executor runs a loop's steps in order (ring_plan.h) and step k of a loop waits for
// the previous rank's step k-1 of the same loop, so every loop is a chain of `hops` dependent
// steps, H/n of them over the network (a host's ranks are neighbours on the ring), and the
// next loop starts where it ends. No loop takes less than the slowest link's `hops` pieces one
// after another. So each loop costs the longer of the two.
double ringChainSeconds(const RingShape& s, int hops, double chunk) {
  const int n = s.hosts * s.ranksPerHost;
  if (n <= 1) return 0.0;
  const double piece = std::min(chunk, s.slotBytes);
  const double loops = std::max(1.0, std::ceil(chunk / s.slotBytes));
  const LinkCost& slowest = s.hosts > 1 ? s.net : s.shm;
  const double networkHops = s.hosts > 1 ? static_cast<double>(hops) * s.hosts / n : 0.0;
  const double chain =
      networkHops * stepSeconds(piece, s.net) + (hops - networkHops) * stepSeconds(piece, s.shm);
  const double throughSlowest = hops * piece / slowest.bytesPerSecond;
  return loops * std::max(chain, throughSlowest);
}

// A ring of `hops` steps of `chunk` bytes over one kind of link, in slot-sized pieces as the
// executor cuts it: every piece pays the latency. (On one link ringChainSeconds comes to this,
// so on one host two levels and the flat ring cost the same, as they are the same plan.)
double pipelinedSeconds(const RingShape& s, int hops, double chunk, const LinkCost& link,
                        int sharing) {
  const double piece = std::min(chunk, s.slotBytes);
  const double loops = std::max(1.0, std::ceil(chunk / s.slotBytes));
  return loops * hops * stepSeconds(piece, link, sharing);
}

// One segment of `bytes` all-reduced between the hosts by a ring of its owners, each host's
// link shared by `sharing` flows (the model's _between).
double ringBetweenSeconds(const RingShape& s, double bytes, int sharing) {
  return pipelinedSeconds(s, 2 * (s.hosts - 1), bytes / s.hosts, s.net, sharing);
}

// `bytes` passed down a chain of `hops` ranks in slot-sized pieces (planReduce, planBroadcast):
// the last piece leaves the first rank after loops - 1 pieces and takes `hops` steps to the end
// (the model's _chain).
double chainSeconds(const RingShape& s, double bytes, int hops, const LinkCost& link) {
  if (hops <= 0) return 0.0;
  const double piece = std::min(bytes, s.slotBytes);
  const double loops = std::max(1.0, std::ceil(bytes / s.slotBytes));
  return (hops + loops - 1) * stepSeconds(piece, link);
}

}  // namespace

double segmentedAllReduceSeconds(const RingShape& s, const HostLayout& layout, double bytes) {
  // Each host's half inside it: L_h - 1 steps of S / L_h (reduce, then again gather).
  std::vector<double> half(static_cast<size_t>(layout.hosts()), 0.0);
  for (int h = 0; h < layout.hosts(); ++h) {
    const int l = static_cast<int>(layout.members[static_cast<size_t>(h)].size());
    if (l > 1) half[static_cast<size_t>(h)] = pipelinedSeconds(s, l - 1, bytes / l, s.shm, 1);
  }
  // When each rank is free for its next segment: after its host's reduce half at first.
  std::vector<double> freeAt(layout.hostOf.size());
  for (size_t r = 0; r < freeAt.size(); ++r) {
    freeAt[r] = half[static_cast<size_t>(layout.hostOf[r])];
  }
  // Segments of bytes (a buffer of one-byte elements), in the order every owner takes them.
  for (const HostSegment& seg : hostSegments(layout, std::llround(bytes))) {
    double start = 0;
    for (int o : seg.owners) start = std::max(start, freeAt[static_cast<size_t>(o)]);
    const double done =
        start + ringBetweenSeconds(s, static_cast<double>(seg.range.count), s.ranksPerHost);
    for (int o : seg.owners) freeAt[static_cast<size_t>(o)] = done;
  }
  double end = 0;
  for (size_t r = 0; r < freeAt.size(); ++r) {
    end = std::max(end, freeAt[r] + half[static_cast<size_t>(layout.hostOf[r])]);
  }
  return end;
}

double leadersAllReduceSeconds(const RingShape& s, const HostLayout& layout, double bytes,
                               const BetweenHosts& between) {
  double inside = 0;  // the longest host's chain
  for (const std::vector<int>& m : layout.members) {
    inside = std::max(inside, chainSeconds(s, bytes, static_cast<int>(m.size()) - 1, s.shm));
  }
  // One flow per host: only the leaders cross the network. A round (the direct round too)
  // goes slot by slot in lock step (direct_collectives.cc: the next slice only once every
  // peer's last is in), so each slice pays the latency; folding in and out streams, one step.
  const double piece = std::min(bytes, s.slotBytes);
  const double loops = std::max(1.0, std::ceil(bytes / s.slotBytes));
  double across = 0;
  if (between.rounds != nullptr) {
    for (int radix : between.rounds->radices) across += stepSeconds(piece * (radix - 1), s.net);
    across = loops * across;
    if (between.rounds->folded() > 0) across += 2 * stepSeconds(bytes, s.net);
  } else {
    across = loops * stepSeconds(piece * (layout.hosts() - 1), s.net);
  }
  return inside + across + inside;
}

double flatAllReduceSeconds(const RingShape& s, double bytes) {
  const int n = s.hosts * s.ranksPerHost;
  return ringChainSeconds(s, 2 * (n - 1), bytes / n);
}

double twoLevelAllReduceSeconds(const RingShape& s, double bytes) {
  const int l = s.ranksPerHost;
  const double inner = l > 1 ? pipelinedSeconds(s, 2 * (l - 1), bytes / l, s.shm, 1) : 0.0;
  if (s.hosts <= 1) return inner;
  const double shard = bytes / l;
  return inner + pipelinedSeconds(s, 2 * (s.hosts - 1), shard / s.hosts, s.net, l);
}

double flatAllGatherSeconds(const RingShape& s, double bytes) {
  const int n = s.hosts * s.ranksPerHost;
  return ringChainSeconds(s, n - 1, bytes / n);
}

double twoLevelAllGatherSeconds(const RingShape& s, double bytes) {
  const int l = s.ranksPerHost;
  const double part = bytes / (static_cast<double>(s.hosts) * l);
  const double between = s.hosts > 1 ? pipelinedSeconds(s, s.hosts - 1, part, s.net, l) : 0.0;
  return between + (l > 1 ? pipelinedSeconds(s, l - 1, bytes / l, s.shm, 1) : 0.0);
}

}  // namespace ring
