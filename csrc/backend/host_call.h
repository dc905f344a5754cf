// One call as the host ring runs it: its tensors, and what runs over the tensors it is handed
// (the caller's own CPU tensors, or pinned host copies of CUDA ones: staging.h): where it is one
// collective of the group over input 0 and output 0, that collective as data (`collective`),
// else a body. What the worker queue, staging and coalescing pass around.
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
#include "executor/prepared_call.h"

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
  // Runs the call where `collective` cannot say it all (lists of tensors, copies around it);
  // a body that calls the group with the CallInfo it is handed runs the collective the runner
  // prepared (CallInfo::prepared), posted ahead or not.
  std::function<void(const CallInfo&, const Tensors& in, const Tensors& out)> body;
  // Set for an in-place all_reduce of every output (all_reduce, all_reduce_coalesced): such
  // calls can be fused into one (coalescing.h).
  std::optional<AllReduceKey> allReduce = std::nullopt;
  // The call as one collective of the group: the runner prepares it at issue, may post it
  // ahead (a small all_reduce, all_gather or barrier on the caller's thread), and runs it over
  // input 0 and output 0 (Communicator::run) where there is no body.
  std::optional<CollectiveArgs> collective = std::nullopt;
};

}  // namespace ring
