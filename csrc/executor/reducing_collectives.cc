// The Communicator's plan functions of the collectives that reduce: all_reduce, reduce_scatter,
// reduce, and the barrier (a zero-length all_reduce), and of every collective on one rank. Each
// runs the plan prepare chose for it (planRow, communicator_issue.cc), inside guarded() and
// after PREMUL_SUM's scaling (run): here is only the plan.
#include "executor/communicator.h"

#include <cstring>

#include "common/errors.h"
#include "executor/communicator_calls.h"
#include "executor/direct_collectives.h"
#include "executor/hier_gather_scatter.h"
#include "schedule/ring_plan.h"

namespace ring {

using namespace collective_parts;

// The all_reduces run in place on `out`; `in` is the caller's same buffer.
void Communicator::allReduceMailbox(const PreparedCall& p, const void*, void* out,
                                    const WaitContext& ctx) {
  const CollectiveArgs& a = p.args;
  // One round through the mailboxes; where it was posted ahead, the peers' parts remain.
  MailboxRound links(*p.box, rank_, size_, p.posted);
  directAllReduce(links, static_cast<char*>(out), a.count,
                  buffers(out, out, a.dtype, a.op, size_), p.fp, ctx);
}

void Communicator::allReduceDirect(const PreparedCall& p, const void*, void* out,
                                   const WaitContext& ctx) {
  const CollectiveArgs& a = p.args;
  FifoRound links(*transport_, DirectMembers{nullptr, size_, rank_});
  directAllReduce(links, static_cast<char*>(out), a.count,
                  buffers(out, out, a.dtype, a.op, size_), p.fp, ctx);
}

void Communicator::allReduceTwoLevels(const PreparedCall& p, const void*, void* out,
                                      const WaitContext& ctx) {
  const CollectiveArgs& a = p.args;
  if (segmentsCount_ != a.count) {
    segments_ = hostSegments(layout_, a.count);
    segmentsCount_ = a.count;
  }
  hierAllReduce(*transport_, layout_, segments_, static_cast<char*>(out), a.count,
                sliceElems(slotBytes_, a.dtype), buffers(out, out, a.dtype, a.op, size_),
                p.plan, p.fp, ctx);
}

void Communicator::allReduceRing(const PreparedCall& p, const void*, void* out,
                                 const WaitContext& ctx) {
  const CollectiveArgs& a = p.args;
  auto steps = planAllReduce(size_, rank_, a.count, sliceElems(slotBytes_, a.dtype));
  runRingPlan(*transport_, steps, buffers(out, out, a.dtype, a.op, size_), p.fp, ctx);
}

void Communicator::reduceScatterTwoLevels(const PreparedCall& p, const void* in, void* out,
                                          const WaitContext& ctx) {
  const CollectiveArgs& a = p.args;
  hierReduceScatter(*transport_, layout_, a.count, sliceElems(slotBytes_, a.dtype),
                    p.fp.algorithm == Algorithm::HierDirect,
                    buffers(in, out, a.dtype, a.op, size_), &staging_, p.fp, ctx);
  releaseLargeStaging();
}

void Communicator::reduceScatterRing(const PreparedCall& p, const void* in, void* out,
                                     const WaitContext& ctx) {
  const CollectiveArgs& a = p.args;
  auto steps = planReduceScatter(size_, rank_, a.count, sliceElems(slotBytes_, a.dtype));
  runRingPlan(*transport_, steps, buffers(in, out, a.dtype, a.op, size_), p.fp, ctx);
}

void Communicator::reduceRing(const PreparedCall& p, const void* in, void* out,
                              const WaitContext& ctx) {
  const CollectiveArgs& a = p.args;
  auto steps = planReduce(size_, rank_, a.root, a.count, sliceElems(slotBytes_, a.dtype));
  runRingPlan(*transport_, steps, buffers(in, out, a.dtype, a.op, size_), p.fp, ctx);
}

// Where there are mailboxes: one round of empty messages, every rank waiting for each other
// rank's post once.
void Communicator::barrierMailbox(const PreparedCall& p, const void*, void*,
                                  const WaitContext& ctx) {
  MailboxRound links(*p.box, rank_, size_, p.posted);
  directBarrier(links, p.fp, ctx);
}

void Communicator::barrierRing(const PreparedCall& p, const void*, void*,
                               const WaitContext& ctx) {
  auto steps = planAllReduce(size_, rank_, 0, 1);
  char dummy = 0;
  runRingPlan(*transport_, steps, buffers(&dummy, &dummy, DType::UInt8, RedOp::Sum, size_), p.fp,
              ctx);
}

// One rank holds every contribution already: what is left is the output. The in-place
// collectives (all_reduce, broadcast) have it; the others copy their input there (all_gather,
// gather and scatter: the one block; reduce_scatter and reduce: the sum of one). AVG then
// divides by the group's size, one, as the plans' last step does on larger groups.
void Communicator::oneRank(const PreparedCall& p, const void* in, void* out, const WaitContext&) {
  const CollectiveArgs& a = p.args;
  const bool inPlace = a.kind == Collective::AllReduce || a.kind == Collective::Broadcast;
  const size_t bytes = static_cast<size_t>(a.count) * elementSize(a.dtype);
  if (!inPlace && bytes > 0 && in != out) std::memmove(out, in, bytes);
  if (a.op == RedOp::Avg) divideFn(a.dtype)(out, 1, a.count);
}

}  // namespace ring
