// The expected time of one call, for torch's collective time estimator
// (torch.distributed._time_estimator, which asks Backend::supportsTimeEstimation): the plan
// chooseCallPlan would take, priced with the alpha-beta model of schedule/ring_costs.h over the
// group's link figures (TORCH_RING_SHM_LINK / TORCH_RING_NET_LINK, else their defaults), plus
// what a call costs before it moves a byte.
//
// Why the model and not a table of measurements: the plan choice already prices plans from the
// same figures, so an estimate follows the plan a call would really take (the direct round,
// the ring, two levels, rounds between hosts); a table would be one machine's.
// tests/python/test_time_estimate.py holds the estimates to a stated factor of the times
// measured on the machine that runs it.
#pragma once

#include <cstdint>

#include "common/types.h"
#include "executor/plan_choice.h"
#include "schedule/host_layout.h"

namespace ring {

// A call's software path before and after its data moves (queueing, the runner's hand-off,
// the Work): about what a 1-byte all_reduce between two ranks of one host takes on the
// machines of docs/notes/latency_cpu.md.
constexpr double kCallOverheadSeconds = 5e-6;

// What one plan of one call is expected to take past that overhead: the price column of the
// plan table (executor/communicator_issue.cc), so a call is priced as the plan it would run.
// `bytes`: an all_reduce's buffer; one rank's part of an all_gather, reduce_scatter, gather or
// scatter; a broadcast's or reduce's message; nothing for a barrier.
struct PriceInputs {
  const PlanSettings& settings;
  const HostLayout& layout;
  const CallPlan& plan;
  double bytes;
};
using PlanPrice = double (*)(const PriceInputs& in);

namespace plan_prices {
// One round inside one host, every rank sending its message to every other at once.
double directRound(const PriceInputs& in);
// The ring of every rank: all_reduce's two halves; all_gather's (and reduce_scatter's) n-1
// steps, which also price broadcast's and reduce's chain of n-1 hops of the whole message (as
// n such messages).
double flatAllReduce(const PriceInputs& in);
double flatAllGather(const PriceInputs& in);
// Two levels with a ring between hosts (on hosts of unequal size, the chain through the
// segments); all_gather's and reduce_scatter's two levels, whatever runs between hosts.
double twoLevelAllReduce(const PriceInputs& in);
double twoLevelAllGather(const PriceInputs& in);
// all_reduce through the hosts' leaders: the plan's rounds, or one direct round.
double leadersRounds(const PriceInputs& in);
double leadersDirectRound(const PriceInputs& in);
// gather and scatter: the root's exchange with each other rank, one after another.
double pairwise(const PriceInputs& in);
// barrier: one round of empty messages.
double emptyRound(const PriceInputs& in);
}  // namespace plan_prices

// all_to_all (no plan table row: it has one plan, pairwise): n-1 rounds of one rank's share of
// `bytes`, the whole input.
double allToAllSeconds(const PlanSettings& s, const HostLayout& layout, double bytes);

}  // namespace ring
