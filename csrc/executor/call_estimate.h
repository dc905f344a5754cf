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

// `bytes`: an all_reduce's buffer; one rank's part of an all_gather, reduce_scatter, gather or
// scatter; a broadcast's or reduce's message; an all_to_all's whole input; nothing for a barrier.
double estimateCallSeconds(const PlanSettings& s, const HostLayout& layout, Collective k,
                           int64_t bytes);

}  // namespace ring
