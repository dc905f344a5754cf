// Which rounds a recursive all-reduce among m ranks makes when each round may join up to k of
// them: a pure function of (m, k), the same on every rank.
//
// Why radices: recursive doubling (radix 2) pays one network latency per round, ceil(log2 m)
// rounds; one direct round (radix m) pays one latency but sends m-1 copies at once. In between,
// rounds of r ranks each (every rank sends its buffer to the r-1 others of its round and sums
// the r buffers) need log_r m rounds and send r-1 copies per round: 128 hosts in two rounds of
// 16 and 8 instead of seven of 2 (MPICH calls it recursive multiplying; gloo's bcube is the
// same idea with a reduce-scatter). A round's copies are what k bounds (plan_choice.h: the
// direct round's byte budget, so a round never sends more than the direct round may).
//
// The schedule: radices (each 2..k) whose product p is at most m and at least m/2; the m - p
// ranks left over fold in first (each hands its buffer to a partner, which has one of its own
// since p >= m/2, and takes the result back at the end: two exchanges more), as recursive
// doubling does off powers of two. Of those, the fewest exchanges one after the other (rounds
// plus folding), then the fewest copies each rank sends (the sum of r - 1), then the fewest
// ranks folded. So 8 ranks by threes are still three rounds of 2, not rounds of 3 and 2 with
// two ranks folded (four exchanges).
#pragma once

#include <vector>

namespace ring {

struct RadixSchedule {
  int members = 1;
  // The rounds' sizes, first round first; their product is the ranks that stay in (members
  // minus the folded ones).
  std::vector<int> radices;

  int product() const;
  int folded() const { return members - product(); }  // ranks that fold in and out
  // Exchanges one after the other: the rounds, plus two when some ranks fold.
  int rounds() const;
  // Buffers each rank that stays in sends in all: the sum of (r - 1) (without the fold).
  int copiesSent() const;
};

// members >= 1, maxRadix >= 2 (a larger maxRadix than members means members). A pruned search
// over multisets of radices, run per call: about a microsecond up to 128 members, a few up to
// 4096 (more only with tens of thousands of members and radices of 17 or more).
RadixSchedule radixSchedule(int members, int maxRadix);

// Recursive doubling's: radixSchedule(members, 2).
inline RadixSchedule doublingSchedule(int members) { return radixSchedule(members, 2); }

}  // namespace ring
