// One call of the group as data: what it is (CollectiveArgs), and the same planned once
// (PreparedCall: its fingerprint, its plan, whether its message went out ahead of it).
//
// Why a call is planned once, before anyone runs it: whoever runs it (the caller, the worker,
// a waiter: backend/work_queue.h) and whatever it does first (post its message ahead, ask
// whether the peers have issued it) work from one choice, made by Communicator::prepare from
// the group's one table of plans (plan_choice.h), instead of each step choosing again.
#pragma once

#include <cstdint>
#include <cstring>

#include "common/types.h"
#include "executor/copy_choice.h"
#include "executor/plan_choice.h"
#include "protocol/message_header.h"

namespace ring {

class Communicator;
class Mailbox;
struct PreparedCall;
struct WaitContext;

// The function that runs a prepared call's plan: a private member of Communicator (the plan
// functions of reducing_collectives.cc and moving_collectives.cc), chosen once by
// Communicator::prepare from the collective, its plan and the group's size. It reads `input`
// (PREMUL_SUM's scaled copy where there is one) and writes `output`.
using PlanFunction = void (Communicator::*)(const PreparedCall& p, const void* input,
                                            void* output, const WaitContext& ctx);

// A collective over one input and one output buffer, described: the runner hands it to the
// group (Communicator::run) with the buffers, so the backend needs no code of its own per call.
// `count` is an all_gather's, reduce_scatter's, gather's or scatter's part per rank, every
// other's whole buffer.
struct CollectiveArgs {
  Collective kind = Collective::Barrier;
  int64_t count = 0;
  DType dtype = DType::UInt8;
  RedOp op = RedOp::Sum;
  double factor = 1.0;  // PREMUL_SUM's
  int root = -1;

  static CollectiveArgs allReduce(int64_t count, DType t, RedOp op, double factor) {
    return {Collective::AllReduce, count, t, op, factor, -1};
  }
  static CollectiveArgs allGather(int64_t countPerRank, DType t) {
    return {Collective::AllGather, countPerRank, t, RedOp::Sum, 1.0, -1};
  }
  static CollectiveArgs reduceScatter(int64_t countPerRank, DType t, RedOp op, double factor) {
    return {Collective::ReduceScatter, countPerRank, t, op, factor, -1};
  }
  static CollectiveArgs broadcast(int64_t count, DType t, int root) {
    return {Collective::Broadcast, count, t, RedOp::Sum, 1.0, root};
  }
  static CollectiveArgs reduce(int64_t count, DType t, RedOp op, double factor, int root) {
    return {Collective::Reduce, count, t, op, factor, root};
  }
  // Each rank's part of countPerRank elements to (gather) or from (scatter) the root's buffer
  // of size * countPerRank.
  static CollectiveArgs gather(int64_t countPerRank, DType t, int root) {
    return {Collective::Gather, countPerRank, t, RedOp::Sum, 1.0, root};
  }
  static CollectiveArgs scatter(int64_t countPerRank, DType t, int root) {
    return {Collective::Scatter, countPerRank, t, RedOp::Sum, 1.0, root};
  }
  static CollectiveArgs barrier() { return {}; }

  // The factor by its bits: a call is the same as itself, a NaN factor too.
  bool operator==(const CollectiveArgs& o) const {
    return kind == o.kind && count == o.count && dtype == o.dtype && op == o.op &&
           std::memcmp(&factor, &o.factor, sizeof factor) == 0 && root == o.root;
  }
};

// A call planned once (Communicator::prepare): what its messages carry, the plan every rank
// chose alike for it, the function that runs that plan, and where it is one mailbox round, the
// mailbox. `posted` is set by Communicator::post once its message is out; the call then only
// reads its peers'.
struct PreparedCall {
  CollectiveArgs args;
  uint64_t seq = 0;
  Fingerprint fp;
  CallPlan plan;
  PlanFunction function = nullptr;
  const char* planName = "ring";  // callPlanName, for the flight recorder
  Mailbox* box = nullptr;
  bool posted = false;
  CopyChoice::Call copy;  // whether its copies into shared memory stream (copy_choice.h)
};

}  // namespace ring
