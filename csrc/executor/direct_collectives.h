// Small collectives in one round: every rank sends its message straight to every rank that
// needs it over the pairwise links, instead of passing it around the ring.
//
// Why: a ring all_reduce makes 2(n-1) messages in sequence, each waiting for the previous hop,
// and a ring all_gather n-1. For a message of a few KiB the copying is nothing and these
// hand-offs are the whole cost, above all when ranks outnumber cores: each hop needs the next
// rank to be scheduled (4 ranks on 2 cores: a 4 KiB all_reduce took 50-170 us). In one round
// every rank only waits for every other rank to have arrived once. The price is bytes: each
// rank sends its message n-1 times, so this is for small messages on shared memory, where
// every link is equally close (Communicator decides: TORCH_RING_DIRECT_BYTES).
//
// Same bits on every rank: every rank reduces the n contributions in rank order 0, 1, ...,
// n-1 with the same combine function, so all of them compute the very same sequence of
// operations (floating-point sums are not associative; the order is what makes them agree).
//
// Every message is one slot (the caller checks that it fits) and carries the collective's
// fingerprint with Algorithm::Direct; receivers check it as the ring does. Every rank receives
// from every other, so any disagreement about the call is caught in the call itself. That is
// why broadcast stays on the ring's chain: received only from its root, a direct broadcast
// would let a rank that names another root go unnoticed until the next collective.
#pragma once

#include <cstdint>
#include <vector>

#include "executor/cpu_executor.h"
#include "transport/link.h"

namespace ring {

// In place on `data` (count elements of io.elemSize bytes; io.input and io.output are
// ignored): data = x_0 op x_1 op ... op x_{n-1}, then io.divide (AVG) if set, through the
// FIFOs (a round small enough for the mailboxes is mailbox_collectives.h's: the call's plan
// says which, plan_choice.h).
void directAllReduce(Transport& t, void* data, int64_t count, const PlanBuffers& io,
                     const Fingerprint& fp, const WaitContext& ctx);

// Some ranks of the group as a direct round sees them: `size` members, this rank at `pos`;
// ranks null means members 0 .. size-1 are group ranks 0 .. size-1.
struct DirectMembers {
  const int* ranks;
  int size;
  int pos;
  int rankAt(int i) const { return ranks ? ranks[i] : i; }
};

// The same among `m` (the inter-host phase of the two-level all_reduce, and each round of
// executor/recursive_multiplying.h), in slices of the
// links' capacity, each a round of its own; the sum in member order 0, 1, ..., size-1.
void directAllReduceAmong(Transport& t, const DirectMembers& m, char* data, int64_t count,
                          const PlanBuffers& io, const Fingerprint& fp, const WaitContext& ctx);

// at = part[0] op part[1] op ... op part[n-1] (elems elements), then io.divide; `at` holds
// position `pos`'s own contribution (part[pos] is set here: `at`, or a copy kept in `own`).
// Every rank combines in this one order, so every rank computes the same bits.
void combineInPositionOrder(char* at, const void** part, int n, int pos, int64_t elems,
                            const PlanBuffers& io, std::vector<char>* own);

// output block r (countPerRank elements) = rank r's input; input may be this rank's block of
// output. Through the FIFOs, as directAllReduce.
void directAllGather(Transport& t, const void* input, void* output, int64_t countPerRank,
                     size_t elemSize, const Fingerprint& fp, const WaitContext& ctx);

// The same among `m` (the inter-host phase of the two-level all_gather): output block i is
// member i's input; in slices of the links' capacity, each a round of its own.
void directAllGatherAmong(Transport& t, const DirectMembers& m, const void* input, void* output,
                          int64_t countPerRank, size_t elemSize, const Fingerprint& fp,
                          const WaitContext& ctx);

// Among `m` (the inter-host phase of the two-level reduce_scatter): `input` holds m.size blocks
// of countPerRank elements, block i for member i; output = the sum of every member's block
// m.pos, combined in member order 0, 1, ..., size-1 (combineInPositionOrder), then io.divide.
// Each member sends block i to member i only (not its whole input): m.size-1 blocks per rank,
// what the direct all_gather sends. In slices of the links' capacity, each a round of its own.
void directReduceScatterAmong(Transport& t, const DirectMembers& m, const char* input,
                              char* output, int64_t countPerRank, const PlanBuffers& io,
                              const Fingerprint& fp, const WaitContext& ctx);

}  // namespace ring
