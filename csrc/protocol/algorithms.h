// The algorithms a collective can take: one enum and one table, read by everything that names
// or numbers an algorithm.
//
// Why one table: an algorithm's number travels in every message's fingerprint (every receiver
// compares it, message_header.h), its word is TORCH_RING_ALGO's and the flight recorder's plan
// name, and its description ends every mismatch error. Written once per row, a new algorithm is
// one line of the enum and one row here; which code runs it is the plan table's choice
// (executor/communicator_issue.cc, planRow: its function and its price) and when auto takes
// it plan_choice's.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ring {

// Ring: the schedules of schedule/ring_plan.h, between ring neighbours. Direct: one round in
// which every rank sends its message straight to every rank that needs it
// (executor/direct_collectives.h). HierRing, HierRd, HierDirect, HierRadix: two levels
// (executor/hier_all_reduce.h, hier_gather_scatter.h), inside each host and then between hosts
// by a ring, recursive doubling, a direct round, or rounds of more than two hosts
// (schedule/radix_schedule.h).
enum class Algorithm : uint8_t {
  Ring = 0,
  Direct = 1,
  HierRing = 2,
  HierRd = 3,
  HierDirect = 4,
  HierRadix = 5,
};

struct AlgorithmRow {
  Algorithm algorithm;
  // TORCH_RING_ALGO's word for it, and the plan the flight recorder lists.
  const char* word;
  // What describe() (message_header.h) adds to a fingerprint: empty for the flat ring, the plan
  // every error assumes unless told otherwise.
  const char* described;
  // Whether TORCH_RING_ALGO may name it. The direct round inside one host is auto's alone: its
  // message must fit one slot, which a knob cannot promise for every call.
  bool forcible;
};

// In the enum's order: row i is the algorithm numbered i (checked below).
inline constexpr AlgorithmRow kAlgorithms[] = {
    {Algorithm::Ring, "ring", "", true},
    {Algorithm::Direct, "direct", ", direct", false},
    {Algorithm::HierRing, "hier_ring", ", two-level ring", true},
    {Algorithm::HierRd, "hier_rd", ", two-level recursive doubling", true},
    {Algorithm::HierDirect, "hier_direct", ", two-level direct", true},
    {Algorithm::HierRadix, "hier_radix", ", two-level rounds of several hosts", true},
};
inline constexpr size_t kAlgorithmCount = sizeof(kAlgorithms) / sizeof(kAlgorithms[0]);

constexpr bool algorithmsInNumberOrder() {
  for (size_t i = 0; i < kAlgorithmCount; ++i) {
    if (static_cast<size_t>(kAlgorithms[i].algorithm) != i) return false;
  }
  return true;
}
static_assert(algorithmsInNumberOrder(), "kAlgorithms: row i must be the algorithm numbered i");

// Only for an algorithm of the enum: one this rank chose. A number read off the wire may be
// any byte, so describe() checks it against kAlgorithmCount itself.
inline const AlgorithmRow& algorithmRow(Algorithm a) {
  return kAlgorithms[static_cast<size_t>(a)];
}

}  // namespace ring
