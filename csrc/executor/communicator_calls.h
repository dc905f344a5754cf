// What every collective of the Communicator runs on (private to executor/: run() in
// communicator_issue.cc and the plan functions of reducing_collectives.cc and
// moving_collectives.cc): the guard each call runs inside with the context its waits take, and
// the buffers and slices its plans take.
#pragma once

#include <cstdint>
#include <utility>

#include "common/errors.h"
#include "common/types.h"
#include "executor/communicator.h"
#include "executor/cpu_executor.h"
#include "executor/hier_all_reduce.h"
#include "executor/prepared_call.h"
#include "reduce/reduce_table.h"

namespace ring {

inline WaitContext Communicator::waitContext(const Fingerprint& fp, const CallInfo& c) {
  WaitContext ctx;
  ctx.start = Clock::now();
  ctx.timeout = c.timeout;
  ctx.deadline = ctx.start + c.timeout;
  ctx.spinMicros = spinMicros_;
  ctx.yieldWhileSpinning = !ownCore_;
  // By reference: the context lives only inside guarded(), whose caller holds `fp`; two
  // pointers fit std::function's inline buffer, so a call allocates nothing for its message.
  ctx.describe = [this, &fp] {
    return strCat(describe(fp), " on rank ", rank_, " of ", size_, " in group '", groupName_, "'");
  };
  Transport* t = transport_.get();
  // A rank that waits here on a peer that has gone on into a mailbox round (it ran this call
  // otherwise) would wait for a message that never comes, and so would the peer: the peer's
  // posted head tells (Mailbox::checkPeerNotAhead), and both ranks fail naming both calls.
  ctx.checkHealth = [t, &fp](int peer) {
    t->checkHealth(peer);
    if (Mailbox* box = t->mailbox()) box->checkPeerNotAhead(peer, fp);
  };
  return ctx;
}

// Runs one collective; a communication failure breaks the group for every rank (the state of
// the FIFOs is no longer in step), a usage error leaves it usable.
template <typename Body>
void Communicator::guarded(const Fingerprint& fp, const char* plan, const CallInfo& c,
                           Body&& body) {
  if (c.plan != nullptr) *c.plan = plan;
  if (postedSeq_ != kNoPost) {
    // Only the call that was posted ahead may run now: the peers read that post as the
    // message of the call at its sequence.
    RING_ASSERT(c.prepared != nullptr && c.prepared->posted && c.seq == postedSeq_,
                describe(fp), ": collective ", c.seq, " runs while the post of collective ",
                postedSeq_, " made ahead of its call waits for that call");
    postedSeq_ = kNoPost;
  }
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
