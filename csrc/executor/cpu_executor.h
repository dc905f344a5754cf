// Runs schedules on host memory over a transport's links: the CPU executor.
#pragma once

#include <cstdint>
#include <vector>

#include "reduce/reduce_table.h"
#include "schedule/ring_plan.h"
#include "transport/link.h"

namespace ring {

// Everything a ring plan needs besides its steps.
struct PlanBuffers {
  const char* input;    // byte address of element 0 of the input buffer
  char* output;         // byte address of element 0 of the output buffer
  size_t elemSize;
  CombineFn combine;    // null for plans without reducing steps
  DivideFn divide;      // AVG: applied to each slice when it becomes final; else null
  int64_t divisor;
};

// Executes `steps` for this rank, receiving from ringPrev and sending to ringNext on the
// collective channel. Every received header is checked against `expected`.
void runRingPlan(Transport& t, const std::vector<Step>& steps, const PlanBuffers& io,
                 const Fingerprint& expected, const WaitContext& ctx);

// The same over a ring of some of the group's ranks: `members` in ring order (data flows from
// members[i] to members[i+1]), this rank at members[pos]; `steps` are a plan for
// (members.size(), pos).
void runRingPlanAmong(Transport& t, const std::vector<int>& members, int pos,
                      const std::vector<Step>& steps, const PlanBuffers& io,
                      const Fingerprint& expected, const WaitContext& ctx);

// Sends `bytes` from `data` to `peer` as ceil(bytes / capacity) messages (at least one).
void sendBytes(SendLink& link, int myRank, const void* data, int64_t bytes,
               const Fingerprint& fp, const WaitContext& ctx);

// Receives exactly `bytes` into `data` from `peer`; checks every header against `expected`.
void recvBytes(RecvLink& link, int myRank, void* data, int64_t bytes, const Fingerprint& expected,
               const WaitContext& ctx);

}  // namespace ring
