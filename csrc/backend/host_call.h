// One call as the host ring runs it: its tensors, and a body that runs it over the tensors it is
// handed (the caller's own CPU tensors, or pinned host copies of CUDA ones: staging.h). What the
// worker queue, staging and coalescing pass around.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/types.h"
#include "executor/communicator.h"
#include "executor/flight_recorder.h"

namespace ring {

using Tensors = std::vector<at::Tensor>;

// What makes all_reduces fusable into one: the same dtype, op and PREMUL_SUM factor.
struct AllReduceKey {
  DType dtype;
  RedOp op;
  double factor;
  bool operator==(const AllReduceKey& o) const {
    return dtype == o.dtype && op == o.op && factor == o.factor;
  }
};

// What a call can post ahead of itself: this rank's message of its one mailbox round, taken
// from the call's tensors (AllReduce: output 0, in place; AllGather: input 0; Barrier: none).
// A description, not code: the runner decides whether to post (work_queue.h), the group
// whether the call is one round (Communicator::postAllReduce, postAllGather, postBarrier).
struct PostAhead {
  enum class Kind : uint8_t { Nothing, AllReduce, AllGather, Barrier };
  Kind kind = Kind::Nothing;
  int64_t count = 0;
  DType dtype = DType::UInt8;
  RedOp op = RedOp::Sum;
  double factor = 1.0;

  static PostAhead allReduce(int64_t count, DType t, RedOp op, double factor) {
    return {Kind::AllReduce, count, t, op, factor};
  }
  static PostAhead allGather(int64_t countPerRank, DType t) {
    return {Kind::AllGather, countPerRank, t, RedOp::Sum, 1.0};
  }
  static PostAhead barrier() { return {Kind::Barrier, 0, DType::UInt8, RedOp::Sum, 1.0}; }
};

struct HostCall {
  c10d::OpType type;
  CallDetail detail;   // for the flight recorder: "1000 x float32, op SUM"
  Tensors inputs;      // read by the body
  Tensors outputs;     // written by the body; the Work's result (may alias inputs)
  std::chrono::milliseconds timeout;
  std::function<void(const CallInfo&, const Tensors& in, const Tensors& out)> body;
  // Set for an in-place all_reduce of every output (all_reduce, all_reduce_coalesced): such
  // calls can be fused into one (coalescing.h).
  std::optional<AllReduceKey> allReduce = std::nullopt;
  // What it can post ahead of itself (PostAhead); Nothing for most calls.
  PostAhead post = {};
};

}  // namespace ring
