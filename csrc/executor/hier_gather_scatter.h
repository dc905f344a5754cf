// all_gather and reduce_scatter in two levels (H hosts): on hosts of equal size L by local
// index, on hosts of unequal size through one rank per host (below).
//
// Why: a flat ring all_gather makes n-1 steps, and each waits for the slowest link, so with TCP
// between hosts a small one pays about n-1 network latencies, and every byte of it crosses the
// network in one flow per host. In two levels the network phase runs among the ranks of one
// local index j (one per host, ranksOfLocalIndex): H-1 steps (one round with the direct
// plan), L such groups in parallel, so a host's traffic spreads over L connections and each
// rank sends only (H-1) parts over the network instead of n-1.
//
// all_gather: (1) between hosts, the ranks of local index j all-gather their parts; (2) inside
// each host, a ring all_gather in which local rank j contributes the H parts it now holds. The
// H parts of one local index are contiguous in a staging buffer ordered by local index, then
// host (localMajorPosition), so both phases are plain ring plans over contiguous blocks,
// whatever the ranks' numbering; a final copy puts the blocks in rank order.
//
// reduce_scatter, the mirror image: the input copied into the same order; (1) inside each
// host, a ring reduce_scatter of blocks of H parts: local rank j gets its host's sum of the
// parts of local index j; (2) between hosts, a ring reduce_scatter (or one direct round, for
// small parts) of those among the ranks of local index j: each ends with its own part summed
// over the group. AVG divides once, in (2). Each element is reduced in the host ring's order,
// then the hosts' ring's (or in host order): the same order wherever the call runs, a
// different one from the flat ring's (so the plan is in the fingerprint, like all_reduce's).
//
// Hosts of unequal size have no local-index groups that span every host (a host of one rank
// has no local rank 1), so there the phase between hosts runs among one rank per host, its
// lowest (the leader), on blocks as wide as the widest host's parts (the narrower hosts' blocks
// padded with zeros, which no output reads):
// all_gather: (1) inside each host, a ring all_gather of its parts into its block; (2) between
// the leaders, an all_gather of the blocks (a ring, or one direct round); (3) inside each host
// the leader broadcasts every block down a chain; a copy puts the parts in rank order.
// reduce_scatter: (1) inside each host a chain reduces the whole (padded) input to the leader;
// (2) between the leaders, a reduce_scatter of the blocks (a ring, or one direct round; AVG
// divides here, once); (3) inside each host the leader broadcasts its host's block, and each
// rank keeps its part. The network carries H-1 messages per leader (one with the direct round)
// where the flat ring's n-1 steps each wait for a network hop; but one connection per host
// carries them and the blocks are padded, so auto takes it only for small parts
// (plan_choice.h). Each element of a reduce_scatter is reduced inside each host in the chain's
// order, then between the leaders in the ring's (or in host order), and is then only copied.
#pragma once

#include <cstdint>
#include <vector>

#include "executor/cpu_executor.h"
#include "schedule/host_layout.h"
#include "transport/link.h"

namespace ring {

// input: countPerRank elements of elemSize bytes (may be this rank's block of output); output:
// size * countPerRank. `directBetween`: phase 1 in one direct round (sliced by the links'
// capacity) instead of a ring. `staging` is resized to the output's size and reused.
void hierAllGather(Transport& t, const HostLayout& layout, const void* input, void* output,
                   int64_t countPerRank, size_t elemSize, int64_t sliceElems, bool directBetween,
                   std::vector<char>* staging, const Fingerprint& fp, const WaitContext& ctx);

// io.input: size * countPerRank elements (not modified), io.output: countPerRank; io.combine
// and io.divide as for the ring plans. `directBetween`: phase 2 in one direct round (each rank
// sends each other host's rank of its local index that one's part, and sums the H parts in
// host order: executor/direct_collectives.h) instead of a ring. `staging` is resized to
// (size + hosts) parts and reused.
void hierReduceScatter(Transport& t, const HostLayout& layout, int64_t countPerRank,
                       int64_t sliceElems, bool directBetween, const PlanBuffers& io,
                       std::vector<char>* staging, const Fingerprint& fp,
                       const WaitContext& ctx);

}  // namespace ring
