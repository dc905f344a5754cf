// All-reduce by recursive doubling among some ranks of a group: the latency plan between hosts.
//
// Why: a ring all-reduce of m ranks makes 2(m-1) messages in sequence; recursive doubling makes
// ceil(log2 m) exchanges (plus two for a non-power-of-two m), each rank sending its whole buffer
// to one partner and receiving the partner's at the same time. Between hosts, where each message
// costs a network latency, that is what a small all_reduce pays for (docs/scale.md); it sends
// log2(m) times the buffer instead of the ring's 2(m-1)/m, so it is for small messages.
//
// Non-power-of-two m: with p the largest power of two <= m and e = m - p, the first 2e ranks
// pair up; each even one hands its buffer to the odd one after it and waits, the others run
// recursive doubling as p ranks, and the odd ones hand the result back.
//
// The same bits on every rank: every combine puts the operand of the lower position first, so
// the two partners of an exchange compute the very same operation (a + b and b + a are equal in
// IEEE arithmetic, but min/max of -0 and +0 or of two NaNs with different payloads, and any
// non-commutative rounding, would not be), and the folded ranks receive the result verbatim.
#pragma once

#include <cstdint>
#include <vector>

#include "executor/cpu_executor.h"
#include "transport/link.h"

namespace ring {

// In place on `data` (count elements of io.elemSize bytes; io.input and io.output are
// ignored) among `members` (group ranks, this rank at members[pos]): io.combine over every
// member's buffer, then io.divide (AVG) if set. Messages carry `fp`; any size (sliced by the
// links' capacity).
void recursiveDoublingAllReduce(Transport& t, const std::vector<int>& members, int pos,
                                char* data, int64_t count, const PlanBuffers& io,
                                const Fingerprint& fp, const WaitContext& ctx);

// How many exchanges the plan makes one after the other, the fold-in and hand-back rounds of a
// host count that is no power of two included (its latency in messages on the critical path;
// the C++ tests check it against the textbook counts, bench/model.py counts its own).
int recursiveDoublingRounds(int members);

}  // namespace ring
