// RingBackend's point-to-point operations (send, recv, recv from any source), apart from the
// collectives' dispatch in ring_backend.cc: they do not go through the group's worker and its
// sequence numbers but to their own progress engine (executor/p2p_engine.h), created on first
// use. Also here: finishWhenDone, which completes a CUDA call staged through host memory once
// its host part has ended (pointToPoint's staged tensors, and the collectives' run()). Same
// class, same members (ring_backend.h); a file of their own so that each file stays readable.
#include "backend/ring_backend.h"

#include <ATen/record_function.h>

#include <c10/util/Exception.h>

#include "backend/tensor_checks.h"
#include "common/errors.h"
#include "common/logging.h"
#ifdef RING_WITH_CUDA
#include "backend/cuda_route.h"
#include "backend/staging.h"
#endif

namespace ring {

// ---- point to point ----------------------------------------------------------------------------

P2PEngine& RingBackend::p2p() {
  std::lock_guard<std::mutex> lock(p2pMutex_);
  if (!p2p_) {
    std::lock_guard<std::mutex> commLock(commMutex_);
    TORCH_CHECK(comm_ != nullptr, "ring: point-to-point on rank ", rank_,
                " was called after the process group was shut down (destroy_process_group)");
    p2p_ = std::make_unique<P2PEngine>(comm_->transport(), groupName_, comm_->spinMicros());
  }
  return *p2p_;
}

c10::intrusive_ptr<c10d::Work> RingBackend::pointToPoint(bool isSend, at::Tensor tensor, int peer,
                                                         int tag, const char* name) {
  LogScope logScope(rank_, groupName_);
  CheckScope s{name, rank_, size_};
  checkConnected(s);
  if (peer != -1) {
    checkRoot(s, peer, isSend ? "destination rank" : "source rank");
    if (peer == rank_) failUsage(s, strCat("rank ", rank_, " cannot ", name, " itself"));
  }
  if (size_ == 1) failUsage(s, "a group of one rank has no peer to exchange with");
  const c10d::OpType type =
      isSend ? c10d::OpType::SEND : (peer < 0 ? c10d::OpType::RECVANYSOURCE : c10d::OpType::RECV);
  at::Tensor data = tensor;
  c10::intrusive_ptr<c10d::Work> deviceWork;
#ifdef RING_WITH_CUDA
  std::shared_ptr<StagedCall> staged;
  if (tensor.is_cuda()) {
    cuda_->refuseGraphCapture(s, tensor.device());
    staged = std::make_shared<StagedCall>(name, strCat(name, " on rank ", rank_), type, 0, rank_,
                                          cuda_->p2pStream(tensor.device()),
                                          isSend ? Tensors{tensor} : Tensors{},
                                          isSend ? Tensors{} : Tensors{tensor});
    data = isSend ? staged->hostInputs()[0] : staged->hostOutputs()[0];
    // The engine reads a send's bytes as soon as it is posted: they must have landed.
    if (isSend) staged->waitCopiedIn(effectiveTimeout(c10d::kUnsetTimeout));
    deviceWork = staged->work();
  }
#else
  if (tensor.is_cuda()) {
    failUsage(s, "CUDA tensors need a build of torch_ring_backend with CUDA (rebuild with "
                 "TORCH_RING_CUDA=1)");
  }
#endif
  // Only while a profiler records: a profiling title costs an allocation per call.
  const bool profiling = at::hasCallbacks();
  if (profiling) recordPointToPoint(name, profileGroup(), tensor);
  auto work = c10::make_intrusive<RingWork>(
      rank_, type, 0, Tensors{data}, profiling ? (isSend ? "ring:send" : "ring:recv") : nullptr,
      profiling ? std::optional<Tensors>(Tensors{tensor}) : std::nullopt);
  P2POp op;
  op.isSend = isSend;
  op.peer = peer;
  op.tag = tag;
  op.data = data.data_ptr();
  op.bytes = data.numel() * static_cast<int64_t>(data.element_size());
  op.timeout = effectiveTimeout(c10d::kUnsetTimeout);
  // The lambda holds the tensor so its storage outlives the transfer.
  const auto posted = std::chrono::steady_clock::now();
  op.done = [this, work, data, type, posted](std::exception_ptr error, int source) {
    ends_.finished(type, 0, posted, std::chrono::steady_clock::now(), error,
                   work->completionKey(), /*timed=*/false);
    work->complete(error, source);
  };
#ifdef RING_WITH_CUDA
  if (staged) finishWhenDone(work, staged);
#endif
  p2p().post(std::move(op));
  if (deviceWork) return started(deviceWork);
  return started(work);
}

c10::intrusive_ptr<c10d::Work> RingBackend::send(std::vector<at::Tensor>& tensors, int dstRank,
                                                 int tag) {
  CheckScope s{"send", rank_, size_};
  checkSingle(s, tensors, "tensor");
  return pointToPoint(true, tensors[0], dstRank, tag, "send");
}

c10::intrusive_ptr<c10d::Work> RingBackend::recv(std::vector<at::Tensor>& tensors, int srcRank,
                                                 int tag) {
  CheckScope s{"recv", rank_, size_};
  checkSingle(s, tensors, "tensor");
  return pointToPoint(false, tensors[0], srcRank, tag, "recv");
}

c10::intrusive_ptr<c10d::Work> RingBackend::recvAnysource(std::vector<at::Tensor>& tensors,
                                                          int tag) {
  CheckScope s{"recv", rank_, size_};
  checkSingle(s, tensors, "tensor");
  return pointToPoint(false, tensors[0], -1, tag, "recv");
}

// ---- CUDA tensors staged through host memory: their completion ---------------------------------

#ifdef RING_WITH_CUDA
void RingBackend::finishWhenDone(const c10::intrusive_ptr<RingWork>& hostWork,
                                 const std::shared_ptr<StagedCall>& staged) {
  // Runs on the thread that completes the host call, right after it (or here, if it already
  // ended). A raw pointer: the callback lives inside the host work's own future.
  RingWork* host = hostWork.get();
  // The hooks hear of the host call's end: the Work the caller holds answers its key.
  staged->useCompletionKey(host->completionKey());
  hostWork->getFuture()->addCallback([staged, host](c10::ivalue::Future& f) {
    staged->finish(f.hasError() ? f.exception_ptr() : nullptr, host->completedSource(),
                   host->knownDuration());
  });
}
#endif

}  // namespace ring
