// all_reduce of a sparse COO tensor (DDP with nn.Embedding(sparse=True) issues these), with
// gloo's semantics: the SUM of every rank's tensor, coalesced, written into each rank's tensor.
//
// Why an all-gather and not a reduction: the ranks' nonzeros sit at different indices, so no
// element-wise combine applies. Every rank gathers every rank's coalesced indices and values
// (two all_gathers of this project's own, padded to the largest count, after one of the counts
// and shapes), then adds the parts in rank order and coalesces. The same torch operations in
// the same order as gloo's own, on the same gathered bytes: the same bits as gloo's result,
// and on every rank.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "backend/tensor_checks.h"
#include "common/types.h"
#include "executor/communicator.h"

namespace ring {

// The refusals before anything is queued (op other than SUM, not on the CPU, an unsupported
// value dtype, more sparse or dense dimensions than the exchange carries); returns the values'
// dtype.
DType checkSparseAllReduce(const CheckScope& s, const at::Tensor& t, const c10d::ReduceOp& op);

// Runs it over `comm` within one call (c): `t` ends up holding the coalesced sum. A rank whose
// tensor has another shape fails the call on every rank, naming it.
void sparseAllReduce(Communicator& comm, const CallInfo& c, const at::Tensor& t, DType values);

}  // namespace ring
