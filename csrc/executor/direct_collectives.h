// Small collectives in one round: every rank sends its message straight to every rank that
// needs it, instead of passing it around the ring; each written once, over either protocol of
// a round (round_links.h: the FIFOs, or the mailboxes where the whole group shares memory).
//
// Why: a ring all_reduce makes 2(n-1) messages in sequence, each waiting for the previous hop,
// and a ring all_gather n-1. For a message of a few KiB the copying is nothing and these
// hand-offs are the whole cost, above all when ranks outnumber cores: each hop needs the next
// rank to be scheduled (docs/notes/code_comment_figures.md, "The direct round"). In one round
// every rank only waits for every other rank to have arrived once. The price is bytes: each
// rank sends its message n-1 times, so this is for small messages on shared memory, where
// every link is equally close (the plan decides: plan_choice.h, TORCH_RING_DIRECT_BYTES and,
// for the mailboxes, TORCH_RING_LL_BYTES).
//
// Same bits on every rank: every rank reduces the n contributions in member order 0, 1, ...,
// n-1 with the same combine function, so all of them compute the very same sequence of
// operations (floating-point sums are not associative; the order is what makes them agree).
//
// Every message carries the collective's fingerprint with Algorithm::Direct, and receivers
// check it as the ring does. Every rank receives from every other, so any disagreement about
// the call is caught in the call itself. That is why broadcast stays on the ring's chain:
// received only from its root, a direct broadcast would let a rank that names another root go
// unnoticed until the next collective.
//
// `Round` is FifoRound or MailboxRound (both instantiated in direct_collectives.cc). A message
// longer than the round's capacity goes in several rounds, one slice each.
#pragma once

#include <cstdint>
#include <vector>

#include "executor/cpu_executor.h"
#include "executor/round_links.h"

namespace ring {

// In place on `data` (count elements of io.elemSize bytes; io.input and io.output are
// ignored), among the round's members: data = x_0 op x_1 op ... op x_{n-1} in member order,
// then io.divide (AVG) if set.
// Over a MailboxRound whose first message was posted ahead, data must still hold what was
// posted (the caller's contract: an in-place all_reduce's tensor is not touched until its Work
// completes).
template <class Round>
void directAllReduce(Round& round, char* data, int64_t count, const PlanBuffers& io,
                     const Fingerprint& fp, const WaitContext& ctx);

// output block i (countPerRank elements of elemSize bytes) = member i's input; input may be
// this member's block of output (FSDP).
template <class Round>
void directAllGather(Round& round, const void* input, void* output, int64_t countPerRank,
                     size_t elemSize, const Fingerprint& fp, const WaitContext& ctx);

// `input` holds one block of countPerRank elements per member, block i for member i; output =
// the sum of every member's block m.pos, combined in member order (combineInPositionOrder),
// then io.divide. Each member sends block i to member i only (not its whole input): m.size-1
// blocks per rank, what the direct all_gather sends. FifoRound only (a mailbox message is one
// for every member).
template <class Round>
void directReduceScatter(Round& round, const char* input, char* output, int64_t countPerRank,
                         const PlanBuffers& io, const Fingerprint& fp, const WaitContext& ctx);

// Returns once every member has sent its (empty) message of this round of `fp`.
template <class Round>
void directBarrier(Round& round, const Fingerprint& fp, const WaitContext& ctx);

// at = part[0] op part[1] op ... op part[n-1] (elems elements), then io.divide; `at` holds
// position `pos`'s own contribution (part[pos] is set here: `at`, or a copy kept in `own`).
// Every rank combines in this one order, so every rank computes the same bits.
void combineInPositionOrder(char* at, const void** part, int n, int pos, int64_t elems,
                            const PlanBuffers& io, std::vector<char>* own);

}  // namespace ring
