// RingBackend's collectives and their one dispatch (the host ring on the worker, the CUDA kernel
// path, CUDA tensors staged through host memory). The group API is in ring_backend_group.cc,
// point-to-point in ring_backend_p2p.cc, the CUDA path's set-up in ring_backend_cuda.cc
// (ring_backend.h declares them all).
#include "backend/ring_backend.h"

#include <c10/util/Exception.h>

#include <algorithm>

#include "backend/sparse_all_reduce.h"
#include "backend/tensor_checks.h"
#include "common/env.h"
#include "common/errors.h"
#include "common/logging.h"
#include "common/phase_probe.h"
#ifdef RING_WITH_CUDA
#include "backend/cuda_collectives.h"
#include "backend/cuda_sync.h"
#include "backend/staging.h"
#endif

namespace ring {
namespace {

bool anyCuda(const Tensors& v) {
  for (const auto& t : v) {
    if (t.defined() && t.is_cuda()) return true;
  }
  return false;
}

// "1000 x float32[, op SUM][, root 3]": this project's dtype names, as in every other message;
// written out only into the flight recorder's entry (CallDetail).
CallDetail countDetail(int64_t count, DType d, RedOp op, int64_t root = -1) {
  return CallDetail::counted(count, dtypeName(d), redOpName(op), root);
}
CallDetail countDetail(int64_t count, DType d, int64_t root = -1) {
  return CallDetail::counted(count, dtypeName(d), nullptr, root);
}
// The same, then `words` ("1000 x float32 in, 2000 out").
CallDetail countDetailThen(int64_t count, DType d, std::string words) {
  CallDetail detail = countDetail(count, d);
  detail.text = std::move(words);
  return detail;
}

// The concatenation of `parts` as one flat tensor (a copy).
at::Tensor flatCat(const Tensors& parts) {
  Tensors flat;
  flat.reserve(parts.size());
  for (const auto& t : parts) flat.push_back(t.reshape({-1}));
  return at::cat(flat);
}

// Copies consecutive pieces of `flat` into each tensor of `outs`, in order.
void splitInto(const at::Tensor& flat, const Tensors& outs, size_t first = 0, size_t count = SIZE_MAX) {
  int64_t offset = 0;
  for (size_t i = first; i < outs.size() && i - first < count; ++i) {
    outs[i].view({-1}).copy_(flat.narrow(0, offset, outs[i].numel()));
    offset += outs[i].numel();
  }
}

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

// ---- the one dispatch ------------------------------------------------------------------------

c10::intrusive_ptr<RingWork> RingBackend::push(const char* name, uint64_t seq, HostCall call,
                                               std::function<void(const CallInfo&)> beforeBody,
                                               bool callerMayRun) {
  // The call moves into the task whole (the Work keeps its own reference to the outputs).
  WorkQueue::Task task(name, std::move(call));
  if (CommProfile::recording()) {
    task.profile = CommProfile::captureIfProfiling(name, seq, profileGroup(), task.inputs,
                                                   task.outputs);
  }
  task.call = CallInfo{seq, effectiveTimeout(task.timeout)};
  task.work = c10::make_intrusive<RingWork>(rank_, task.type, seq, task.outputs);
  task.callerMayRun = callerMayRun;
  task.bytes = std::max(bytesHeld(task.inputs), bytesHeld(task.outputs));
  task.before = std::move(beforeBody);
  auto work = task.work;
  RING_PHASE(3, "task and Work built");
  queue_->push(std::move(task));
  RING_PHASE(14, "back from the runner");
  return work;
}

c10::intrusive_ptr<c10d::Work> RingBackend::run(const CheckScope& s, HostCall call) {
  LogScope logScope(rank_, groupName_);
  checkConnected(s);
  if (estimating_.load(std::memory_order_relaxed)) return estimated(call);
  if (!anyCuda(call.inputs) && !anyCuda(call.outputs)) {
    // Not a barrier: held, its wait would return at once (coalescing.h) and it would hold no
    // rank back; it runs when called, before the block's calls, alike on every rank.
    if (coalescer_.active() && call.type != c10d::OpType::BARRIER) {
      return coalescer_.hold(rank_, s.collective, std::move(call));
    }
    RING_PHASE(2, "log scope, connection check");
    return push(s.collective, seq_++, std::move(call), nullptr, /*callerMayRun=*/true);
  }
#ifdef RING_WITH_CUDA
  const at::Device device = anyCuda(call.outputs) ? call.outputs[0].device() : call.inputs[0].device();
  // Before the sequence number is taken: a refused call leaves the group's count alone.
  beforeCudaCollective(s, device, effectiveTimeout(call.timeout));
  const uint64_t seq = seq_++;
  // Copies in queued now on the group's stream (after its earlier calls' GPU work); the copies
  // back queued there once the host part ends, before any later call's GPU work (which waits
  // for that in beforeCudaCollective).
  auto staged = std::make_shared<StagedCall>(
      s.collective, strCat(s.collective, " (sequence ", seq, ") on rank ", rank_), call.type, seq, rank_,
      orderStream(device), call.inputs, call.outputs);
  {
    std::lock_guard<std::mutex> lock(stagedMutex_);
    stagedInFlight_.push_back(staged);
  }
  call.inputs = staged->hostInputs();
  call.outputs = staged->hostOutputs();
  call.detail.note = " (CUDA, staged through host memory)";
  auto hostWork = push(s.collective, seq, std::move(call),
                       [staged](const CallInfo& c) { staged->waitCopiedIn(c.timeout); });
  finishWhenDone(hostWork, staged);
  return started(staged->work());
#else
  failUsage(s, "CUDA tensors need a build of torch_ring_backend with CUDA (nvcc was not found "
               "when it was built; rebuild with TORCH_RING_CUDA=1)");
#endif
}

// ---- collectives -------------------------------------------------------------------------------

c10::intrusive_ptr<c10d::Work> RingBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                      const c10d::AllreduceOptions& opts) {
  RING_PHASE(0, "torch and Python, wait() to the next all_reduce");
  CheckScope s{"all_reduce", rank_, size_};
  if (tensors.size() == 1 && tensors[0].defined() && tensors[0].is_sparse()) {
    const at::Tensor sparse = tensors[0];
    const DType d = checkSparseAllReduce(s, sparse, opts.reduceOp);
    return run(s, {c10d::OpType::_ALLREDUCE_SPARSE,
                   strCat("sparse ", shapeString(sparse), ", ", sparse._nnz(), " nonzeros of ",
                          dtypeName(d), ", op SUM"),
                   {sparse}, {sparse}, opts.timeout,
                   [this, d](const CallInfo& c, const Tensors&, const Tensors& out) {
                     sparseAllReduce(*comm_, c, out[0], d);
                   }});
  }
  checkSingle(s, tensors, "input");
  const at::Tensor t = tensors[0];
  double factor = 1.0;
  at::Tensor deviceFactor;
  const RedOp op = toRingOp(s, opts.reduceOp, t.scalar_type(), &factor, &deviceFactor);
  const DType d = toRingDType(s, t.scalar_type());
#ifdef RING_WITH_CUDA
  if (CudaCollectives* cuda = kernelPath(s, t, effectiveTimeout(opts.timeout))) {
    return started(cuda->allReduce(s, t, d, op, factor, deviceFactor, seq_++,
                                   effectiveTimeout(opts.timeout)));
  }
#endif
  factor = hostFactor(factor, deviceFactor);
  RING_PHASE(1, "argument checks");
  return run(s, {c10d::OpType::ALLREDUCE, countDetail(t.numel(), d, op), {t}, {t}, opts.timeout,
                 nullptr, AllReduceKey{d, op, factor},
                 CollectiveArgs::allReduce(t.numel(), d, op, factor)});
}

void RingBackend::allReduceNow(at::Tensor& tensor, const c10d::ReduceOp& op) {
  CheckScope s{"inference_all_reduce", rank_, size_};
  if (!tensor.defined() || !tensor.device().is_cpu()) {
    failUsage(s, strCat("expected a CPU tensor, got ",
                        tensor.defined() ? tensor.device().str() : std::string("an undefined one"),
                        " (for other devices: torch.distributed.all_reduce)"));
  }
  // A call held for a coalescing block runs at its end: waiting for it here would never return.
  if (coalescer_.active()) {
    failUsage(s, "called inside a coalescing block (torch.distributed._coalescing_manager): "
                 "its calls run at the end of the block; use torch.distributed.all_reduce");
  }
  std::vector<at::Tensor> one{tensor};
  c10d::AllreduceOptions opts;
  opts.reduceOp = op;
  allreduce(one, opts)->wait();
}

c10::intrusive_ptr<c10d::Work> RingBackend::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  CheckScope s{"all_reduce_coalesced", rank_, size_};
  if (tensors.empty()) failUsage(s, "expected at least one tensor");
  for (size_t i = 0; i < tensors.size(); ++i) {
    checkTensor(s, tensors[i], strCat("tensor ", i));
    checkSameDType(s, tensors[0], tensors[i], strCat("tensor ", i));
    checkSameDevice(s, tensors[0], tensors[i]);
  }
  double factor = 1.0;
  const RedOp op = toRingOp(s, opts.reduceOp, tensors[0].scalar_type(), &factor);
  const DType d = toRingDType(s, tensors[0].scalar_type());
  const AllReduceKey key{d, op, factor};
  return run(s, {c10d::OpType::ALLREDUCE_COALESCED,
                 strCat(tensors.size(), " tensors of ", dtypeName(d), ", op ", redOpName(op)),
                 tensors, tensors, opts.timeout,
                 [this, key](const CallInfo& c, const Tensors&, const Tensors& out) {
                   allReduceConcatenation(c, out, key);
                 },
                 key});
}

// One ring pass over the concatenation: many small tensors cost one latency, not many.
void RingBackend::allReduceConcatenation(const CallInfo& c, const Tensors& tensors,
                                         const AllReduceKey& k) {
  at::Tensor buffer = flatCat(tensors);
  comm_->allReduce(buffer.data_ptr(), buffer.numel(), k.dtype, k.op, k.factor, c);
  splitInto(buffer, tensors);
}

c10::intrusive_ptr<c10d::Work> RingBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                      const c10d::BroadcastOptions& opts) {
  CheckScope s{"broadcast", rank_, size_};
  const int root = checkRootedTensor(s, tensors, opts.rootRank, opts.rootTensor, "root (src)");
  const at::Tensor t = tensors[0];
  const DType d = toRingDType(s, t.scalar_type());
#ifdef RING_WITH_CUDA
  if (CudaCollectives* cuda = kernelPath(s, t, effectiveTimeout(opts.timeout))) {
    return started(cuda->broadcast(s, t, d, root, seq_++, effectiveTimeout(opts.timeout)));
  }
#endif
  return run(s, {c10d::OpType::BROADCAST, countDetail(t.numel(), d, root), {t}, {t}, opts.timeout,
                 nullptr, std::nullopt, CollectiveArgs::broadcast(t.numel(), d, root)});
}

c10::intrusive_ptr<c10d::Work> RingBackend::reduce(std::vector<at::Tensor>& tensors,
                                                   const c10d::ReduceOptions& opts) {
  CheckScope s{"reduce", rank_, size_};
  const int root = checkRootedTensor(s, tensors, opts.rootRank, opts.rootTensor, "root (dst)");
  const at::Tensor t = tensors[0];
  double factor = 1.0;
  const RedOp op = toRingOp(s, opts.reduceOp, t.scalar_type(), &factor);
  const DType d = toRingDType(s, t.scalar_type());
  return run(s, {c10d::OpType::REDUCE, countDetail(t.numel(), d, op, root), {t}, {t}, opts.timeout,
                 nullptr, std::nullopt, CollectiveArgs::reduce(t.numel(), d, op, factor, root)});
}

c10::intrusive_ptr<c10d::Work> RingBackend::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                            const c10d::AllgatherOptions& opts) {
  CheckScope s{"all_gather_into_tensor", rank_, size_};
  checkBlockPair(s, input, "input", output, "output");
  checkAllGatherAliasing(s, input, output);
  const DType d = toRingDType(s, input.scalar_type());
#ifdef RING_WITH_CUDA
  if (CudaCollectives* cuda = kernelPath(s, input, effectiveTimeout(opts.timeout))) {
    return started(cuda->allGather(s, input, output, d, seq_++, effectiveTimeout(opts.timeout)));
  }
#endif
  return run(s, {c10d::OpType::_ALLGATHER_BASE, countDetail(input.numel(), d), {input}, {output},
                 opts.timeout, nullptr, std::nullopt, CollectiveArgs::allGather(input.numel(), d)});
}

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
                   comm_->allGather(in[0].data_ptr(), flat.data_ptr(), in[0].numel(), d, c);
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
                     comm_->allGather(in[i].data_ptr(), flat.data_ptr(), in[i].numel(), dtypes[i], c);
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
                     comm_->allGather(in[i].data_ptr(), out[i].data_ptr(), in[i].numel(), dtypes[i], c);
                   }
                 }});
}

c10::intrusive_ptr<c10d::Work> RingBackend::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  CheckScope s{"reduce_scatter_tensor", rank_, size_};
  checkBlockPair(s, output, "output", input, "input");
  double factor = 1.0;
  at::Tensor deviceFactor;
  const RedOp op = toRingOp(s, opts.reduceOp, input.scalar_type(), &factor, &deviceFactor);
  const DType d = toRingDType(s, input.scalar_type());
#ifdef RING_WITH_CUDA
  if (CudaCollectives* cuda = kernelPath(s, input, effectiveTimeout(opts.timeout))) {
    return started(cuda->reduceScatter(s, input, output, d, op, factor, deviceFactor, seq_++,
                                       effectiveTimeout(opts.timeout)));
  }
#endif
  factor = hostFactor(factor, deviceFactor);
  // Blocks of the input are read until the last step: an output inside the input would be
  // overwritten first, so such an input is read from a copy.
  HostCall call{c10d::OpType::_REDUCE_SCATTER_BASE, countDetail(output.numel(), d, op), {input},
                {output}, opts.timeout, nullptr, std::nullopt,
                CollectiveArgs::reduceScatter(output.numel(), d, op, factor)};
  if (overlaps(input, output)) {
    call.body = [this, d, op, factor](const CallInfo& c, const Tensors& in, const Tensors& out) {
      const at::Tensor src = in[0].clone();
      comm_->reduceScatter(src.data_ptr(), out[0].data_ptr(), out[0].numel(), d, op, factor, c);
    };
  }
  return run(s, std::move(call));
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
                   comm_->reduceScatter(flat.data_ptr(), out[0].data_ptr(), out[0].numel(), d, op,
                                        factor, c);
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
                     comm_->reduceScatter(src.data_ptr(), out[i].data_ptr(), out[i].numel(),
                                          dtypes[i], op, factor, c);
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
                   comm_->gather(in[0].data_ptr(), flat.defined() ? flat.data_ptr() : nullptr,
                                 in[0].numel(), d, root, c);
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
                   comm_->scatter(flat.defined() ? flat.data_ptr() : nullptr, out[0].data_ptr(),
                                  out[0].numel(), d, root, c);
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

c10::intrusive_ptr<c10d::Work> RingBackend::barrier(const c10d::BarrierOptions& opts) {
  CheckScope s{"barrier", rank_, size_};
  // Queued behind every earlier collective of the group, so it also waits for all of them.
  // Through the same run() as every host call: priced, not run, inside torch's time estimator
  // (as ProcessGroupNCCL's barrier, an all_reduce, is), refused on a group no longer connected.
  // Like any small host call it may run on the caller's thread (work_queue.h). Its empty
  // message is posted ahead only where no CUDA work of the group can be pending: the barrier
  // waits for that work before its round.
  HostCall call{c10d::OpType::BARRIER, CallDetail(), {}, {}, opts.timeout, nullptr, std::nullopt,
                CollectiveArgs::barrier()};
  if (cudaPathSetUp()) {
    call.collective = std::nullopt;
    call.body = [this](const CallInfo& c, const Tensors&, const Tensors&) {
      waitCudaWork();
      comm_->barrier(c);
    };
  }
  return run(s, std::move(call));
}

}  // namespace ring
