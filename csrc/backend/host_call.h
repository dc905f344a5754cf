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
  // Set where the body honours CallInfo::postOnly (posts this rank's message of its one
  // mailbox round, or does nothing, and returns at once): a call that may run on the caller's
  // thread is then posted before the caller asks whether every peer has issued it
  // (work_queue.h).
  bool postsFirst = false;
};

}  // namespace ring
