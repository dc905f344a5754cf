// All-reduce in rounds among some ranks of a group, r ranks to a round (schedule/
// radix_schedule.h): the latency plans between hosts. Radix 2 throughout is recursive doubling.
//
// Why: a ring all-reduce of m ranks makes 2(m-1) messages in sequence; these plans make one
// exchange per round (plus two when some ranks fold), each rank sending its whole buffer to the
// r-1 others of its round and receiving theirs at the same time. Between hosts, where each
// message costs a network latency, that is what a small all_reduce pays for (docs/scale.md).
// They send the whole buffer (r-1) times per round instead of the ring's 2(m-1)/m in all, so
// they are for small messages.
//
// Rounds: the p = product of the radices ranks that stay in take virtual positions 0..p-1,
// written in mixed radix (digit i counts in radix i); round i is a direct all-reduce
// (direct_collectives.h) among the ranks whose positions differ from each other's in digit i
// only. Ranks left over (m - p, at most
// p): the first 2(m-p) positions pair up; each even one hands its buffer to the odd one after it
// and waits, and the odd ones hand the result back at the end.
//
// The same bits on every rank: a round's r ranks each combine the r buffers in the order of
// their positions (the lowest first; combineInPositionOrder), so all r compute the very same
// operations (a + b and
// b + a are equal in IEEE arithmetic, but min/max of -0 and +0 or of two NaNs with different
// payloads, and any non-commutative rounding, would not be); after the last round every rank
// that stayed in holds the same bits, and the folded ranks receive them verbatim.
#pragma once

#include <cstdint>
#include <vector>

#include "executor/cpu_executor.h"
#include "schedule/radix_schedule.h"
#include "transport/link.h"

namespace ring {

// In place on `data` (count elements of io.elemSize bytes; io.input and io.output are
// ignored) among `members` (group ranks, this rank at members[pos]; schedule.members ==
// members.size()): io.combine over every member's buffer, then io.divide (AVG) if set.
// Messages carry `fp`; any size (sliced by the links' capacity, which must be the same on every
// link of the plan, as it is between hosts: a difference fails the receiver's header check).
// Each pair of ranks exchanges in one round at most, so every round's messages on a link
// count from step 0.
void recursiveAllReduce(Transport& t, const std::vector<int>& members, int pos,
                        const RadixSchedule& schedule, char* data, int64_t count,
                        const PlanBuffers& io, const Fingerprint& fp, const WaitContext& ctx);

}  // namespace ring
