// What every collective of the Communicator runs on (private to executor/: the collectives'
// files reducing_collectives.cc and moving_collectives.cc): the guard each call runs inside,
// and the buffers and slices its plans take.
#pragma once

#include <cstdint>
#include <utility>

#include "common/types.h"
#include "executor/communicator.h"
#include "executor/cpu_executor.h"
#include "executor/hier_all_reduce.h"
#include "reduce/reduce_table.h"

namespace ring {

// Runs one collective; a communication failure breaks the group for every rank (the state of
// the FIFOs is no longer in step), a usage error leaves it usable.
template <typename Body>
void Communicator::guarded(const Fingerprint& fp, const char* plan, const CallInfo& c,
                           Body&& body) {
  if (c.plan != nullptr) *c.plan = plan;
  RING_ASSERT(posted_.seq == PostedAhead::kNothing, describe(fp),
              " runs while the post of collective ", posted_.seq,
              " made ahead of its call waits for that call");
  transport_->checkHealth(-1);
  WaitContext ctx = waitContext(fp, c);
  try {
    body(ctx);
  } catch (const CommError& e) {
    transport_->markBroken(e.what());
    throw;
  }
}

// The parts every plan of a collective is built from.
namespace collective_parts {

inline int64_t sliceElems(int64_t slotBytes, DType t) {
  return slotBytes / static_cast<int64_t>(elementSize(t));
}

inline InterHostPlan interHostPlan(CallPlan&& choice) {
  InterHostPlan p;
  const Algorithm a = choice.algorithm;
  if (a == Algorithm::HierRd || a == Algorithm::HierRadix) {
    p.kind = InterHostKind::Rounds;
    p.schedule = std::move(choice.rounds);
  } else if (a == Algorithm::HierDirect) {
    p.kind = InterHostKind::Direct;
  }
  return p;
}

inline PlanBuffers buffers(const void* in, void* out, DType t, RedOp op, int size) {
  PlanBuffers io;
  io.input = static_cast<const char*>(in);
  io.output = static_cast<char*>(out);
  io.elemSize = elementSize(t);
  io.combine = combineFn(t, op);
  io.divide = op == RedOp::Avg ? divideFn(t) : nullptr;
  io.divisor = size;
  return io;
}

}  // namespace collective_parts
}  // namespace ring
