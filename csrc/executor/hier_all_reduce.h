// The two-level all_reduce (schedule/host_layout.h says why and how the buffer is cut):
//   1. inside each host, the reduce half of the ring all-reduce over the host's ranks in rank
//      order (shared memory): local rank j ends with chunk j+1 of its host reduced;
//   2. between hosts, each segment (schedule/host_layout.h) is all-reduced among its owners,
//      one per host, in host order: by a ring (bandwidth), in rounds of two or more hosts
//      (latency: recursive doubling or more per round, executor/recursive_multiplying.h), or
//      in one direct round, each owner sending its part to every other and summing the parts
//      in host order (the least latency, H-1 times the bytes: executor/direct_collectives.h);
//      a rank takes part in the segments inside its chunk, in increasing order, so that the
//      lowest unfinished segment always has all its owners at it;
//   3. inside each host, the gather half of the ring all-reduce.
// On hosts of unequal size that holds for the ring between hosts only; rounds and the direct
// round go through one rank per host instead (the leader, its lowest): a chain reduces each
// host's buffer to its leader, the leaders all-reduce the whole buffer in host order, and
// each leader's result goes down a chain (hier_all_reduce.cc says why).
//
// The same bits on every rank: each element is reduced once per host in that host's ring (or
// chain) order (phase 1), then once between hosts in an order every owner (leader) shares
// (phase 2), and then only copied (phase 3). Flat and two-level results differ in their order
// of additions, so each rank must pick the same plan: it is in every message's fingerprint,
// and the knob that picks it is compared at set-up (executor/plan_choice.h).
#pragma once

#include <cstdint>
#include <vector>

#include "executor/cpu_executor.h"
#include "executor/plan_choice.h"
#include "schedule/host_layout.h"
#include "schedule/radix_schedule.h"
#include "transport/link.h"

namespace ring {

// In place on `data` (count elements; io.input and io.output are ignored). `segments` is
// hostSegments(layout, count). Messages carry `fp`; AVG's division (io.divide) is applied once,
// when an element's inter-host reduction completes. `plan`: a two-level algorithm, and for
// HierRd and HierRadix the rounds between hosts (plan_choice.h).
void hierAllReduce(Transport& t, const HostLayout& layout, const std::vector<HostSegment>& segments,
                   char* data, int64_t count, int64_t sliceElems, const PlanBuffers& io,
                   const CallPlan& plan, const Fingerprint& fp, const WaitContext& ctx);

}  // namespace ring
