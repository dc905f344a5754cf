// RingBackend's one decision per call and the collectives on whole tensors: route() says where
// a call goes (priced, held for a coalescing block, the host ring, a CUDA ring kernel, or staged
// through host memory), dispatch() runs a host call there, push() hands it to the group's
// runner; each collective checks its arguments, asks route() once and builds the call for it.
// The collectives over lists of tensors and the exchanges are in ring_backend_lists.cc, the
// group API in ring_backend_group.cc, point-to-point in ring_backend_p2p.cc, the CUDA kernels'
// construction in ring_backend_cuda.cc (ring_backend.h declares them all); the CUDA route
// itself (set-up, streams, staged calls in flight) is CudaRoute's (cuda_route.h).
#include "backend/ring_backend.h"

#include <c10/util/Exception.h>

#include <algorithm>

#include "backend/call_parts.h"
#include "backend/sparse_all_reduce.h"
#include "backend/tensor_checks.h"
#include "common/env.h"
#include "common/errors.h"
#include "common/logging.h"
#include "common/phase_probe.h"
#ifdef RING_WITH_CUDA
#include "backend/cuda_collectives.h"
#include "backend/cuda_route.h"
#include "backend/cuda_sync.h"
#include "backend/staging.h"
#endif

namespace ring {
namespace {

// The first CUDA tensor of `v`, or null.
const at::Tensor* firstCuda(const Tensors& v) {
  for (const auto& t : v) {
    if (t.defined() && t.is_cuda()) return &t;
  }
  return nullptr;
}

// The CUDA tensor a host call is routed by: an output's, else an input's (the checks made
// every tensor of a call share one device).
const at::Tensor* firstCuda(const HostCall& call) {
  const at::Tensor* t = firstCuda(call.outputs);
  return t != nullptr ? t : firstCuda(call.inputs);
}

// The tensor route() asks about: `t` where it is a CUDA tensor.
const at::Tensor* cudaOne(const at::Tensor& t) { return t.is_cuda() ? &t : nullptr; }

}  // namespace

// ---- the one decision per call, and the paths it leads to ---------------------------------

RingBackend::CallRoute RingBackend::route(const CheckScope& s, const at::Tensor* cudaTensor,
                                          c10d::OpType type, std::chrono::milliseconds timeout,
                                          bool kernelCollective) {
  LogScope logScope(rank_, groupName_);
  checkConnected(s);
  if (estimate_.open()) return {Route::Priced};
  if (cudaTensor == nullptr) {
    // Not a barrier: held, its wait would return at once (coalescing.h) and it would hold no
    // rank back; it runs when called, before the block's calls, alike on every rank.
    const bool held = coalescer_.active() && type != c10d::OpType::BARRIER;
    return {held ? Route::Held : Route::Host};
  }
#ifdef RING_WITH_CUDA
  // Before the sequence number is taken: a refused call leaves the group's count alone.
  cuda_->beforeCollective(s, cudaTensor->device(), effectiveTimeout(timeout));
  if (kernelCollective) {
    if (CudaCollectives* kernels = cuda_->kernelsFor(s, *cudaTensor, getBoundDeviceId())) {
      return {Route::CudaKernel, kernels};
    }
  }
  return {Route::Staged};
#else
  (void)type;
  (void)timeout;
  (void)kernelCollective;
  failUsage(s, "CUDA tensors need a build of torch_ring_backend with CUDA (nvcc was not found "
               "when it was built; rebuild with TORCH_RING_CUDA=1)");
#endif
}

c10::intrusive_ptr<c10d::Work> RingBackend::run(const CheckScope& s, HostCall call) {
  const CallRoute r = route(s, firstCuda(call), call.type, call.timeout, /*kernelCollective=*/false);
  return dispatch(s, r, std::move(call));
}

c10::intrusive_ptr<c10d::Work> RingBackend::dispatch(const CheckScope& s, CallRoute r,
                                                     HostCall call) {
  LogScope logScope(rank_, groupName_);
  switch (r.route) {
    case Route::Priced:
      return estimated(call);
    case Route::Held:
      return coalescer_.hold(rank_, s.collective, std::move(call));
    case Route::Host:
      RING_PHASE(2, "log scope, connection check");
      return push(s.collective, seq_++, std::move(call), nullptr, /*callerMayRun=*/true);
    case Route::Staged:
#ifdef RING_WITH_CUDA
      return runStaged(s, std::move(call));
#else
      break;
#endif
    case Route::CudaKernel:
      break;
  }
  RING_ASSERT(false, s.collective, " on rank ", rank_, ": route ", static_cast<int>(r.route),
              " has no host path");
  return nullptr;  // not reached
}

#ifdef RING_WITH_CUDA
c10::intrusive_ptr<c10d::Work> RingBackend::runStaged(const CheckScope& s, HostCall call) {
  const at::Device device = firstCuda(call)->device();
  const uint64_t seq = seq_++;
  // Copies in queued now on the group's stream (after its earlier calls' GPU work); the copies
  // back queued there once the host part ends, before any later call's GPU work (which waits
  // for that in CudaRoute::beforeCollective).
  auto staged = std::make_shared<StagedCall>(
      s.collective, strCat(s.collective, " (sequence ", seq, ") on rank ", rank_), call.type, seq,
      rank_, cuda_->orderStream(device), call.inputs, call.outputs);
  cuda_->addStaged(staged);
  call.inputs = staged->hostInputs();
  call.outputs = staged->hostOutputs();
  call.detail.note = " (CUDA, staged through host memory)";
  auto hostWork = push(s.collective, seq, std::move(call),
                       [staged](const CallInfo& c) { staged->waitCopiedIn(c.timeout); });
  finishWhenDone(hostWork, staged);
  return started(staged->work());
}
#endif

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
  RING_PHASE(1, "argument checks");
  const CallRoute r = route(s, cudaOne(t), c10d::OpType::ALLREDUCE, opts.timeout, true);
#ifdef RING_WITH_CUDA
  if (r.route == Route::CudaKernel) {
    return started(r.kernels->allReduce(s, t, d, op, factor, deviceFactor, seq_++,
                                        effectiveTimeout(opts.timeout)));
  }
#endif
  factor = hostFactor(factor, deviceFactor);
  return dispatch(s, r, {c10d::OpType::ALLREDUCE, countDetail(t.numel(), d, op), {t}, {t}, opts.timeout,
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
  comm_->run(CollectiveArgs::allReduce(buffer.numel(), k.dtype, k.op, k.factor),
             buffer.data_ptr(), buffer.data_ptr(), c);
  splitInto(buffer, tensors);
}

c10::intrusive_ptr<c10d::Work> RingBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                      const c10d::BroadcastOptions& opts) {
  CheckScope s{"broadcast", rank_, size_};
  const int root = checkRootedTensor(s, tensors, opts.rootRank, opts.rootTensor, "root (src)");
  const at::Tensor t = tensors[0];
  const DType d = toRingDType(s, t.scalar_type());
  const CallRoute r = route(s, cudaOne(t), c10d::OpType::BROADCAST, opts.timeout, true);
#ifdef RING_WITH_CUDA
  if (r.route == Route::CudaKernel) {
    return started(r.kernels->broadcast(s, t, d, root, seq_++, effectiveTimeout(opts.timeout)));
  }
#endif
  return dispatch(s, r, {c10d::OpType::BROADCAST, countDetail(t.numel(), d, root), {t}, {t}, opts.timeout,
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
  const CallRoute r = route(s, cudaOne(input), c10d::OpType::_ALLGATHER_BASE, opts.timeout, true);
#ifdef RING_WITH_CUDA
  if (r.route == Route::CudaKernel) {
    return started(r.kernels->allGather(s, input, output, d, seq_++, effectiveTimeout(opts.timeout)));
  }
#endif
  return dispatch(s, r, {c10d::OpType::_ALLGATHER_BASE, countDetail(input.numel(), d), {input}, {output},
                 opts.timeout, nullptr, std::nullopt, CollectiveArgs::allGather(input.numel(), d)});
}

c10::intrusive_ptr<c10d::Work> RingBackend::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  CheckScope s{"reduce_scatter_tensor", rank_, size_};
  checkBlockPair(s, output, "output", input, "input");
  double factor = 1.0;
  at::Tensor deviceFactor;
  const RedOp op = toRingOp(s, opts.reduceOp, input.scalar_type(), &factor, &deviceFactor);
  const DType d = toRingDType(s, input.scalar_type());
  const CallRoute r =
      route(s, cudaOne(input), c10d::OpType::_REDUCE_SCATTER_BASE, opts.timeout, true);
#ifdef RING_WITH_CUDA
  if (r.route == Route::CudaKernel) {
    return started(r.kernels->reduceScatter(s, input, output, d, op, factor, deviceFactor, seq_++,
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
      comm_->run(CollectiveArgs::reduceScatter(out[0].numel(), d, op, factor), src.data_ptr(),
                 out[0].data_ptr(), c);
    };
  }
  return dispatch(s, r, std::move(call));
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
      comm_->run(CollectiveArgs::barrier(), nullptr, nullptr, c);
    };
  }
  return run(s, std::move(call));
}

}  // namespace ring
