// RingBackend's collectives over lists of tensors (all_gather, all_gather_coalesced, the
// coalesced all_gather and reduce_scatter of tensors, reduce_scatter, gather, scatter) and the
// exchanges (all_to_all, all_to_all_single). Like those of ring_backend.cc, each checks its
// arguments and hands one host call to run() (route, then dispatch): none has a CUDA ring
// kernel.
#include <c10/util/Exception.h>

#include <algorithm>

#include "backend/call_parts.h"
#include "backend/ring_backend.h"
#include "backend/tensor_checks.h"
#include "common/errors.h"

namespace ring {
namespace {

// Byte counts and offsets per peer for all_to_all: element counts times the element size.
struct Exchange {
  std::vector<int64_t> sendCounts, sendOffsets, recvCounts, recvOffsets;
};
Exchange exchangeOf(const std::vector<int64_t>& sendBytes, const std::vector<int64_t>& recvBytes) {
  Exchange x;
  int64_t so = 0, ro = 0;
  for (size_t r = 0; r < sendBytes.size(); ++r) {
    x.sendCounts.push_back(sendBytes[r]);
    x.sendOffsets.push_back(so);
    so += sendBytes[r];
    x.recvCounts.push_back(recvBytes[r]);
    x.recvOffsets.push_back(ro);
    ro += recvBytes[r];
  }
  return x;
}

}  // namespace

c10::intrusive_ptr<c10d::Work> RingBackend::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  CheckScope s{"all_gather", rank_, size_};
  checkSingle(s, inputs, "input");
  checkPerRankList(s, outputs, inputs[0], "output", "the input's size");
  const DType d = toRingDType(s, inputs[0].scalar_type());
  return run(s, {c10d::OpType::ALLGATHER, countDetail(inputs[0].numel(), d), inputs, outputs[0],
                 opts.timeout,
                 [this, d](const CallInfo& c, const Tensors& in, const Tensors& out) {
                   at::Tensor flat = at::empty({size_ * in[0].numel()}, in[0].options());
                   comm_->run(CollectiveArgs::allGather(in[0].numel(), d), in[0].data_ptr(),
                              flat.data_ptr(), c);
                   splitInto(flat, out);
                 },
                 std::nullopt, CollectiveArgs::allGather(inputs[0].numel(), d)});
}

c10::intrusive_ptr<c10d::Work> RingBackend::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputLists, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  CheckScope s{"all_gather_coalesced", rank_, size_};
  // outputLists[r][i] receives input i of rank r.
  checkListSize(s, outputLists.size(), static_cast<size_t>(size_), "output_tensor_lists");
  std::vector<DType> dtypes;
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkTensor(s, inputs[i], strCat("input[", i, "]"));
    checkSameDevice(s, inputs[0], inputs[i]);
    dtypes.push_back(toRingDType(s, inputs[i].scalar_type()));
  }
  Tensors outs;  // rank-major: output_tensor_lists[r][i] at r * inputs + i
  for (size_t r = 0; r < outputLists.size(); ++r) {
    if (outputLists[r].size() != inputs.size()) {
      failUsage(s, strCat("output_tensor_lists[", r, "] has ", outputLists[r].size(),
                          " tensors but there are ", inputs.size(),
                          " inputs; each rank's list holds one tensor per input"));
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
      const auto& o = outputLists[r][i];
      const std::string what = strCat("output_tensor_lists[", r, "][", i, "]");
      checkTensor(s, o, what);
      checkSameDType(s, inputs[i], o, what);
      checkSameDevice(s, inputs[i], o);
      checkNumel(s, o, inputs[i].numel(), what, strCat("input[", i, "]'s size"));
      outs.push_back(o);
    }
  }
  const size_t n = inputs.size();
  return run(s, {c10d::OpType::ALLGATHER_COALESCED, strCat(n, " tensors"), inputs, outs,
                 opts.timeout,
                 [this, dtypes, n](const CallInfo& c, const Tensors& in, const Tensors& out) {
                   for (size_t i = 0; i < n; ++i) {
                     at::Tensor flat = at::empty({size_ * in[i].numel()}, in[i].options());
                     comm_->run(CollectiveArgs::allGather(in[i].numel(), dtypes[i]), in[i].data_ptr(),
                                flat.data_ptr(), c);
                     for (int r = 0; r < size_; ++r) {
                       out[r * n + i].view({-1}).copy_(flat.narrow(0, r * in[i].numel(), in[i].numel()));
                     }
                   }
                 }});
}

c10::intrusive_ptr<c10d::Work> RingBackend::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  CheckScope s{"all_gather_into_tensor_coalesced", rank_, size_};
  const std::vector<DType> dtypes = checkBlockPairs(s, inputs, "input", outputs, "output");
  for (size_t i = 0; i < inputs.size(); ++i) checkAllGatherAliasing(s, inputs[i], outputs[i]);
  return run(s, {c10d::OpType::COALESCED, strCat(inputs.size(), " tensors"), inputs, outputs,
                 opts.timeout,
                 [this, dtypes](const CallInfo& c, const Tensors& in, const Tensors& out) {
                   for (size_t i = 0; i < in.size(); ++i) {
                     comm_->run(CollectiveArgs::allGather(in[i].numel(), dtypes[i]), in[i].data_ptr(),
                                out[i].data_ptr(), c);
                   }
                 }});
}

c10::intrusive_ptr<c10d::Work> RingBackend::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  CheckScope s{"reduce_scatter", rank_, size_};
  checkSingle(s, outputs, "output");
  checkPerRankList(s, inputs, outputs[0], "input", "the output's size");
  double factor = 1.0;
  const RedOp op = toRingOp(s, opts.reduceOp, outputs[0].scalar_type(), &factor);
  const DType d = toRingDType(s, outputs[0].scalar_type());
  return run(s, {c10d::OpType::REDUCE_SCATTER,
                 countDetail(outputs[0].numel(), d, op), inputs[0],
                 outputs, opts.timeout,
                 [this, d, op, factor](const CallInfo& c, const Tensors& in, const Tensors& out) {
                   at::Tensor flat = flatCat(in);
                   comm_->run(CollectiveArgs::reduceScatter(out[0].numel(), d, op, factor),
                              flat.data_ptr(), out[0].data_ptr(), c);
                 },
                 std::nullopt, CollectiveArgs::reduceScatter(outputs[0].numel(), d, op, factor)});
}

c10::intrusive_ptr<c10d::Work> RingBackend::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  CheckScope s{"reduce_scatter_tensor_coalesced", rank_, size_};
  const std::vector<DType> dtypes = checkBlockPairs(s, outputs, "output", inputs, "input");
  double factor = 1.0;
  RedOp op = RedOp::Sum;
  for (const at::Tensor& t : inputs) op = toRingOp(s, opts.reduceOp, t.scalar_type(), &factor);
  return run(s, {c10d::OpType::COALESCED, strCat(inputs.size(), " tensors, op ", redOpName(op)),
                 inputs, outputs, opts.timeout,
                 [this, dtypes, op, factor](const CallInfo& c, const Tensors& in, const Tensors& out) {
                   for (size_t i = 0; i < in.size(); ++i) {
                     const at::Tensor src = overlaps(in[i], out[i]) ? in[i].clone() : in[i];
                     comm_->run(CollectiveArgs::reduceScatter(out[i].numel(), dtypes[i], op, factor),
                                src.data_ptr(), out[i].data_ptr(), c);
                   }
                 }});
}

c10::intrusive_ptr<c10d::Work> RingBackend::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                   std::vector<at::Tensor>& inputs,
                                                   const c10d::GatherOptions& opts) {
  CheckScope s{"gather", rank_, size_};
  const int root = checkRootedList(s, inputs, "input", opts.rootRank, "root (dst)", outputs,
                                   "gather_list", "the input's size");
  const DType d = toRingDType(s, inputs[0].scalar_type());
  return run(s, {c10d::OpType::GATHER, countDetail(inputs[0].numel(), d, root),
                 inputs, rank_ == root ? outputs[0] : Tensors{}, opts.timeout,
                 [this, d, root](const CallInfo& c, const Tensors& in, const Tensors& out) {
                   at::Tensor flat;
                   if (rank_ == root) flat = at::empty({size_ * in[0].numel()}, in[0].options());
                   comm_->run(CollectiveArgs::gather(in[0].numel(), d, root), in[0].data_ptr(),
                              flat.defined() ? flat.data_ptr() : nullptr, c);
                   if (flat.defined()) splitInto(flat, out);
                 },
                 std::nullopt, CollectiveArgs::gather(inputs[0].numel(), d, root)});
}

#if RING_TORCH_AT_LEAST(2, 14)
c10::intrusive_ptr<c10d::Work> RingBackend::gather_single(at::Tensor& output, at::Tensor& input,
                                                          const c10d::GatherOptions& opts) {
  CheckScope s{"gather_single", rank_, size_};
  checkRoot(s, opts.rootRank, "root (dst)");
  const int root = static_cast<int>(opts.rootRank);
  checkTensor(s, input, "input");
  // Only the root's output is read (torch passes the others an empty placeholder); it holds
  // every rank's input in rank order, whatever its shape ([world, *shape] or flat).
  if (rank_ == root) {
    checkBlockPair(s, input, "input", output, "gather_tensor");
    checkAllGatherAliasing(s, input, output);
  }
  const DType d = toRingDType(s, input.scalar_type());
  // Straight into the root's output (none elsewhere): no per-rank list to split into, as
  // gather() has, so the call is its collective alone.
  return run(s, {c10d::OpType::GATHER, countDetail(input.numel(), d, root), {input},
                 rank_ == root ? Tensors{output} : Tensors{}, opts.timeout, nullptr,
                 std::nullopt, CollectiveArgs::gather(input.numel(), d, root)});
}
#endif

c10::intrusive_ptr<c10d::Work> RingBackend::scatter(std::vector<at::Tensor>& outputs,
                                                    std::vector<std::vector<at::Tensor>>& inputs,
                                                    const c10d::ScatterOptions& opts) {
  CheckScope s{"scatter", rank_, size_};
  const int root = checkRootedList(s, outputs, "output", opts.rootRank, "root (src)", inputs,
                                   "scatter_list", "the output's size");
  const DType d = toRingDType(s, outputs[0].scalar_type());
  return run(s, {c10d::OpType::SCATTER, countDetail(outputs[0].numel(), d, root),
                 rank_ == root ? inputs[0] : Tensors{}, outputs, opts.timeout,
                 [this, d, root](const CallInfo& c, const Tensors& in, const Tensors& out) {
                   at::Tensor flat;
                   if (!in.empty()) flat = flatCat(in);
                   comm_->run(CollectiveArgs::scatter(out[0].numel(), d, root),
                              flat.defined() ? flat.data_ptr() : nullptr, out[0].data_ptr(), c);
                 },
                 std::nullopt, CollectiveArgs::scatter(outputs[0].numel(), d, root)});
}

c10::intrusive_ptr<c10d::Work> RingBackend::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                          std::vector<int64_t>& outputSplits,
                                                          std::vector<int64_t>& inputSplits,
                                                          const c10d::AllToAllOptions& opts) {
  CheckScope s{"all_to_all_single", rank_, size_};
  checkTensor(s, input, "input");
  checkTensor(s, output, "output");
  checkSameDevice(s, input, output);
  checkSameDType(s, input, output, "output");
  // Splits count rows of dimension 0; an empty list means equal splits.
  auto rowsOf = [&](const at::Tensor& t, const std::vector<int64_t>& splits, const char* what) {
    const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
    if (splits.empty()) {
      if (rows % size_ != 0) {
        failUsage(s, strCat(what, " has ", rows, " rows, not divisible by the world size ", size_,
                            "; pass explicit split sizes"));
      }
      return std::vector<int64_t>(static_cast<size_t>(size_), rows / size_);
    }
    checkListSize(s, splits.size(), static_cast<size_t>(size_), strCat(what, " split sizes"));
    int64_t total = 0;
    for (int64_t v : splits) {
      if (v < 0) failUsage(s, strCat(what, " split sizes contain a negative value ", v));
      total += v;
    }
    if (total != rows) {
      failUsage(s, strCat(what, " split sizes add up to ", total, " but dimension 0 has ", rows));
    }
    return splits;
  };
  const std::vector<int64_t> outRows = rowsOf(output, outputSplits, "output");
  const std::vector<int64_t> inRows = rowsOf(input, inputSplits, "input");
  auto rowBytes = [](const at::Tensor& t) {
    const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
    return rows == 0 ? 0 : t.numel() / rows * static_cast<int64_t>(t.element_size());
  };
  if (input.numel() > 0 && output.numel() > 0 && rowBytes(input) != rowBytes(output)) {
    failUsage(s, strCat("input rows have ", rowBytes(input), " bytes but output rows have ",
                        rowBytes(output), "; all dimensions but the first must match"));
  }
  if (inRows[rank_] != outRows[rank_]) {
    failUsage(s, strCat("this rank sends ", inRows[rank_], " rows to itself but expects ",
                        outRows[rank_], " from itself"));
  }
  std::vector<int64_t> sendBytes, recvBytes;
  for (int r = 0; r < size_; ++r) {
    sendBytes.push_back(inRows[r] * rowBytes(input));
    recvBytes.push_back(outRows[r] * rowBytes(output));
  }
  const Exchange x = exchangeOf(sendBytes, recvBytes);
  const DType d = toRingDType(s, input.scalar_type());
  return run(s, {c10d::OpType::ALLTOALL_BASE,
                 countDetailThen(input.numel(), d, strCat(" in, ", output.numel(), " out")), {input},
                 {output}, opts.timeout,
                 [this, d, x](const CallInfo& c, const Tensors& in, const Tensors& out) {
                   comm_->allToAll(in[0].data_ptr(), out[0].data_ptr(), x.sendCounts,
                                   x.sendOffsets, x.recvCounts, x.recvOffsets, d, c);
                 }});
}

c10::intrusive_ptr<c10d::Work> RingBackend::alltoall(std::vector<at::Tensor>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllToAllOptions& opts) {
  CheckScope s{"all_to_all", rank_, size_};
  checkListSize(s, inputs.size(), static_cast<size_t>(size_), "the input list");
  checkListSize(s, outputs.size(), static_cast<size_t>(size_), "the output list");
  for (int r = 0; r < size_; ++r) {
    checkTensor(s, inputs[r], strCat("input[", r, "]"));
    checkTensor(s, outputs[r], strCat("output[", r, "]"));
    checkSameDType(s, inputs[0], inputs[r], strCat("input[", r, "]"));
    checkSameDType(s, inputs[0], outputs[r], strCat("output[", r, "]"));
    checkSameDevice(s, inputs[0], inputs[r]);
    checkSameDevice(s, inputs[0], outputs[r]);
  }
  if (inputs[rank_].numel() != outputs[rank_].numel()) {
    failUsage(s, strCat("input[", rank_, "] has ", inputs[rank_].numel(), " elements but output[",
                        rank_, "] has ", outputs[rank_].numel()));
  }
  const int64_t esize = static_cast<int64_t>(inputs[0].element_size());
  std::vector<int64_t> sendBytes, recvBytes;
  int64_t outElems = 0;
  for (int r = 0; r < size_; ++r) {
    sendBytes.push_back(inputs[r].numel() * esize);
    recvBytes.push_back(outputs[r].numel() * esize);
    outElems += outputs[r].numel();
  }
  const Exchange x = exchangeOf(sendBytes, recvBytes);
  const DType d = toRingDType(s, inputs[0].scalar_type());
  return run(s, {c10d::OpType::ALLTOALL, strCat(size_, " tensors of ", dtypeName(d)), inputs,
                 outputs, opts.timeout,
                 [this, d, x, outElems](const CallInfo& c, const Tensors& in, const Tensors& out) {
                   at::Tensor src = flatCat(in);
                   at::Tensor dst = at::empty({outElems}, in[0].options());
                   comm_->allToAll(src.data_ptr(), dst.data_ptr(), x.sendCounts, x.sendOffsets,
                                   x.recvCounts, x.recvOffsets, d, c);
                   splitInto(dst, out);
                 }});
}

}  // namespace ring
