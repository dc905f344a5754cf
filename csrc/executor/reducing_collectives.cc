// The Communicator's collectives that reduce: all_reduce, reduce_scatter, reduce, and the
// barrier (a zero-length all_reduce). Each stamps its fingerprint, takes its plan from
// chooseCallPlan (plan_choice.h) and runs it inside guarded() (communicator_calls.h).
#include "executor/communicator.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "common/errors.h"
#include "executor/communicator_calls.h"
#include "executor/direct_collectives.h"
#include "executor/hier_gather_scatter.h"
#include "schedule/ring_plan.h"

namespace ring {

using namespace collective_parts;

void Communicator::allReduce(void* data, int64_t count, DType t, RedOp op, double factor,
                             const CallInfo& c) {
  PreparedCall local;
  const PreparedCall& p = preparedFor(c, CollectiveArgs::allReduce(count, t, op, factor), &local);
  const Fingerprint& fp = p.fp;
  guarded(fp, p.planName, c, [&](const WaitContext& ctx) {
    // PREMUL_SUM scales this rank's contribution in place (all-reduce is in place anyway);
    // a message posted ahead (post) went out scaled already.
    if (op == RedOp::PreMulSum && !p.posted) scaleFn(t)(data, data, factor, count);
    if (size_ == 1) {
      if (op == RedOp::Avg) divideFn(t)(data, 1, count);
      return;
    }
    char* inPlace = static_cast<char*>(data);
    if (p.box != nullptr) {
      // One round through the mailboxes; where it was posted ahead, the peers' parts remain.
      MailboxRound links(*p.box, rank_, size_, p.posted);
      directAllReduce(links, inPlace, count, buffers(data, data, t, op, size_), fp, ctx);
      return;
    }
    if (fp.algorithm == Algorithm::Direct) {
      FifoRound links(*transport_, DirectMembers{nullptr, size_, rank_});
      directAllReduce(links, inPlace, count, buffers(data, data, t, op, size_), fp, ctx);
      return;
    }
    if (fp.algorithm == Algorithm::HierRing || fp.algorithm == Algorithm::HierRd ||
        fp.algorithm == Algorithm::HierRadix || fp.algorithm == Algorithm::HierDirect) {
      if (segmentsCount_ != count) {
        segments_ = hostSegments(layout_, count);
        segmentsCount_ = count;
      }
      hierAllReduce(*transport_, layout_, segments_, static_cast<char*>(data), count,
                    sliceElems(slotBytes_, t), buffers(data, data, t, op, size_),
                    interHostPlan(CallPlan(p.plan)), fp, ctx);
      return;
    }
    auto steps = planAllReduce(size_, rank_, count, sliceElems(slotBytes_, t));
    runRingPlan(*transport_, steps, buffers(data, data, t, op, size_), fp, ctx);
  });
}

void Communicator::reduceScatter(const void* input, void* output, int64_t countPerRank, DType t,
                                 RedOp op, double factor, const CallInfo& c) {
  PreparedCall local;
  const PreparedCall& p =
      preparedFor(c, CollectiveArgs::reduceScatter(countPerRank, t, op, factor), &local);
  const Fingerprint& fp = p.fp;
  guarded(fp, p.planName, c, [&](const WaitContext& ctx) {
    std::vector<char> scaled;
    const void* in = input;
    if (op == RedOp::PreMulSum) {
      // The caller's input must stay untouched, so the scaled contribution lives in a copy.
      scaled.resize(static_cast<size_t>(countPerRank * size_) * elementSize(t));
      scaleFn(t)(scaled.data(), input, factor, countPerRank * size_);
      in = scaled.data();
    }
    if (fp.algorithm == Algorithm::HierRing || fp.algorithm == Algorithm::HierDirect) {
      hierReduceScatter(*transport_, layout_, countPerRank, sliceElems(slotBytes_, t),
                        fp.algorithm == Algorithm::HierDirect, buffers(in, output, t, op, size_),
                        &staging_, fp, ctx);
      releaseLargeStaging();
      return;
    }
    auto steps = planReduceScatter(size_, rank_, countPerRank, sliceElems(slotBytes_, t));
    runRingPlan(*transport_, steps, buffers(in, output, t, op, size_), fp, ctx);
    if (size_ == 1 && op == RedOp::Avg) divideFn(t)(output, 1, countPerRank);
  });
}

void Communicator::reduce(const void* input, void* output, int64_t count, DType t, RedOp op,
                          double factor, int root, const CallInfo& c) {
  PreparedCall local;
  const PreparedCall& p =
      preparedFor(c, CollectiveArgs::reduce(count, t, op, factor, root), &local);
  const Fingerprint& fp = p.fp;
  guarded(fp, p.planName, c, [&](const WaitContext& ctx) {
    std::vector<char> scaled;
    const void* in = input;
    if (op == RedOp::PreMulSum) {
      scaled.resize(static_cast<size_t>(count) * elementSize(t));
      scaleFn(t)(scaled.data(), input, factor, count);
      in = scaled.data();
    }
    auto steps = planReduce(size_, rank_, root, count, sliceElems(slotBytes_, t));
    runRingPlan(*transport_, steps, buffers(in, output, t, op, size_), fp, ctx);
    if (size_ == 1 && op == RedOp::Avg) divideFn(t)(output, 1, count);
  });
}

void Communicator::barrier(const CallInfo& c) {
  PreparedCall local;
  const PreparedCall& p = preparedFor(c, CollectiveArgs::barrier(), &local);
  const Fingerprint& fp = p.fp;
  guarded(fp, p.planName, c, [&](const WaitContext& ctx) {
    if (size_ == 1) return;
    // Where there are mailboxes: one round of empty messages, every rank waiting for each
    // other rank's post once.
    if (p.box != nullptr) {
      MailboxRound links(*p.box, rank_, size_, p.posted);
      directBarrier(links, fp, ctx);
      return;
    }
    auto steps = planAllReduce(size_, rank_, 0, 1);
    char dummy = 0;
    runRingPlan(*transport_, steps, buffers(&dummy, &dummy, DType::UInt8, RedOp::Sum, size_), fp,
                ctx);
  });
}

}  // namespace ring
