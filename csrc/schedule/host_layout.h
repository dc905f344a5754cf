// Which ranks share a host, and how a two-level all_reduce cuts the buffer between them: pure
// functions of the ranks' host groups, the same on every rank.
//
// Why two levels: a flat ring crosses every host boundary in each of its 2(n-1) steps, and a
// pipelined step waits for its slowest link, so with TCP between hosts a small all_reduce pays
// about 2(n-1) network latencies whatever the host count (docs/scale.md). In two levels the
// ranks of each host first reduce-scatter over shared memory; then the ranks that hold the same
// part of the buffer on every host (one per host) all-reduce it between the hosts, each part
// on its own connections, so a host's traffic spreads over as many connections as it has ranks;
// then each host all-gathers over shared memory. Only the middle phase crosses hosts.
//
// Hosts may hold different numbers of ranks, and a host's ranks need not be contiguous. Each
// host cuts the buffer into as many chunks as it has ranks (chunkRange), so the chunk edges of
// two hosts need not meet; the inter-host phase works on the segments between every host's edges
// taken together: each segment lies inside one chunk of every host, so it has exactly one
// owner per host. With equal hosts the segments are the chunks.
#pragma once

#include <cstdint>
#include <vector>

#include "schedule/partition.h"

namespace ring {

struct HostLayout {
  // Per rank: its host's index. Hosts are numbered by their lowest rank, so the numbering is
  // the same on every rank whatever the identities look like.
  std::vector<int> hostOf;
  // Per host: its ranks in increasing order (a rank's local index is its place here).
  std::vector<std::vector<int>> members;

  int hosts() const { return static_cast<int>(members.size()); }
  int localIndex(int rank) const;
  // How many ranks every host has, where all have the same number; 0 where they differ.
  int ranksPerHost() const;
};

// `groupOf[r]`: any label, equal for the ranks of one host (e.g. the lowest rank of r's host).
HostLayout layoutFromGroups(const std::vector<int>& groupOf);

// A part of the buffer the inter-host phase all-reduces, and who holds it after the intra-host
// reduce-scatter: owners[h] is host h's rank. Ranges are in elements; no segment is empty.
struct HostSegment {
  Range range;
  std::vector<int> owners;
};

// The chunk of host `h` (of `count` elements) that its local rank `local` holds reduced after
// the intra-host reduce-scatter half (planAllReduceReduceHalf): chunk (local + 1) mod L.
Range ownedChunk(const HostLayout& layout, int host, int local, int64_t count);

// The segments in increasing offset order; they cover [0, count) exactly once.
std::vector<HostSegment> hostSegments(const HostLayout& layout, int64_t count);

// Hosts of equal size (ranksPerHost() > 0) only, for the two-level all_gather and
// reduce_scatter (executor/hier_gather_scatter.h), except local index 0, which every host
// has (its leader: the two-level plans through one rank per host on hosts of unequal size):
// the ranks of local index `local`, one per host, in host order;
std::vector<int> ranksOfLocalIndex(const HostLayout& layout, int local);
// rank `rank`'s block in their staging buffer, ordered by local index, then host: the blocks
// of ranksOfLocalIndex(j) are contiguous, at j * hosts() .. j * hosts() + hosts() - 1.
int localMajorPosition(const HostLayout& layout, int rank);

// Every rank, host by host (in host order, each host's ranks in rank order): a ring that
// crosses between hosts exactly hosts() times wherever the ranks sit (the ring in rank order
// crosses as often as consecutive ranks sit on different hosts). broadcast's chain runs on it
// from the root: the same ring whatever the root, so a rank that names another root waits on
// the same neighbour as the others and gets its message's mismatch, not a timeout.
std::vector<int> hostMajorRing(const HostLayout& layout);

}  // namespace ring
