#include "executor/cuda_ring_engine.h"

#include <algorithm>
#include <atomic>
#include <limits>

#include "common/env.h"
#include "common/errors.h"
#include "common/logging.h"
#include "executor/cuda_event.h"
#include "transport/cuda_ipc/cuda_env.h"
#include "transport/cuda_ipc/device_scope.h"
#include "transport/host_identity.h"
#include "transport/setup_keys.h"

namespace ring {
namespace {

// The kernels' own spin limit lies this far beyond the call's timeout: the host watchdog acts
// first; the device limit only matters if the host stopped watching.
constexpr std::chrono::seconds kDeviceSpinMargin{30};
// How long shutdown waits for the other ranks to close their CUDA links before it keeps the
// inbox allocated instead of freeing it (a rank that left without shutting down).
constexpr std::chrono::seconds kCloseWait{30};

RingWaitLimits limitsFor(std::chrono::milliseconds timeout) {
  // A timeout past what nanoseconds hold (python's timedelta.max is 2.7e9 years) would wrap
  // around in the conversion, possibly to a tiny limit: it saturates at "never" instead.
  constexpr int64_t kMaxMs =
      std::numeric_limits<int64_t>::max() / 1'000'000 -
      std::chrono::duration_cast<std::chrono::milliseconds>(kDeviceSpinMargin).count();
  if (timeout.count() >= kMaxMs) return RingWaitLimits{std::numeric_limits<uint64_t>::max()};
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::max(timeout, std::chrono::milliseconds(0)) + kDeviceSpinMargin);
  return RingWaitLimits{static_cast<uint64_t>(ns.count())};
}

std::atomic<uint64_t> gKernelCalls{0};

}  // namespace

CudaLinkOptions cudaLinkOptionsFromEnv(int device, std::chrono::milliseconds timeout) {
  const CudaKnobs& knobs = cudaKnobs();
  CudaLinkOptions opts;
  opts.device = device;
  opts.geometry = knobs.geometry;
  opts.enabled = knobs.kernels;
  if (env().transport == "tcp") {
    // Set to try the multi-host path on one host: CUDA tensors then take it too, as they do
    // between hosts (staged through pinned host memory over the TCP links).
    opts.enabled = false;
    opts.disabledBecause = "TORCH_RING_TRANSPORT=tcp (CUDA tensors go over TCP, as between hosts)";
  }
  opts.hostId = hostIdentity();
  opts.timeout = timeout;
  return opts;
}

CudaRingEngine::CudaRingEngine(Store& store, const CudaEngineOptions& opts, CudaGroupHooks hooks)
    : opts_(opts), store_(store) {
  requireCurrentDevice(device(), "setting up the CUDA ring");
  std::unique_ptr<CudaRingLinks> links;
  try {
    links = std::make_unique<CudaRingLinks>(store, opts.rank, opts.size, opts.links);
  } catch (const std::exception& e) {
    reportSetupFailure(store, opts.rank, strCat("CUDA links: ", e.what()));
    throw;
  }
  const bool ok = links->usable();
  const FifoGeometry& g = opts.links.geometry;
  if (ok) {
    RING_LOG(kLogInfo, "CUDA ring kernels on cuda:", device(), ", ", g.channels, " channels x ",
             g.slots, " slots x ", g.slotBytes, " bytes; ", links->describe());
  } else {
    RING_LOG(kLogInfo, "CUDA tensors are staged through host memory: ", links->declineReason());
  }
  state_ = std::make_shared<CudaGroupState>(std::move(links), std::move(hooks), opts.rank,
                                            opts.size);
  if (!ok) return;
  // A stream of this group alone, non-blocking (it never waits implicitly for the legacy
  // default stream). Why not torch's stream pool: the pool hands the same few streams to every
  // caller in the process, so another rank thread of this process, or a Future.then callback,
  // could get the stream a ring kernel spins on and queue work behind it.
  commStream_ = opts.commStream;
  if (commStream_ == nullptr) {
    checkCuda(cudaStreamCreateWithFlags(&commStream_, cudaStreamNonBlocking),
              "cudaStreamCreateWithFlags", "creating the backend's stream");
    ownsCommStream_ = true;
  }
  watchdog_ = std::make_unique<CudaWatchdog>(state_, device(), opts.groupName);
}

CudaRingEngine::~CudaRingEngine() {
  shutdown();
  // Errors ignored: this may run at interpreter exit, after the CUDA runtime began unloading.
  // Work still queued on the stream completes; the runtime frees it afterwards. Destroying an
  // event whose record is pending is allowed too.
  if (ready_ != nullptr) (void)cudaEventDestroy(ready_);
  if (ownsCommStream_) (void)cudaStreamDestroy(commStream_);
  (void)cudaGetLastError();
}

void CudaRingEngine::shutdown() {
  {
    std::lock_guard<std::mutex> lock(enqueueMutex_);
    if (shutDown_) return;
    shutDown_ = true;
  }
  if (watchdog_) watchdog_->stop();
  // A group that failed anywhere (a peer's failure, a dead rank, an abort of this rank or
  // another) is broken here now too: its ranks do not close the links together, since the one
  // that failed never will.
  try {
    state_->checkHealth();
  } catch (const CommError&) {
  }
  // Every kernel of this rank has ended (or was given up on after an abort, which keeps the
  // memory): the links can close, together with the other ranks'.
  if (state_->brokenReason().empty()) {
    try {
      state_->links().closeCollectively(
          store_, std::min<std::chrono::milliseconds>(opts_.timeout, kCloseWait));
    } catch (const std::exception& e) {
      state_->links().keepMemory();
      RING_LOG(kLogWarn, "closing the CUDA links failed (", e.what(),
               "); keeping the CUDA inbox allocated");
    }
  }
  // Tasks the user still holds keep the links (and so the inbox) alive through the state.
  state_->detach();
}

bool CudaRingEngine::usable() const { return state_->links().usable(); }

const std::string& CudaRingEngine::declineReason() const {
  return state_->links().declineReason();
}

void CudaRingEngine::checkHealth() { state_->checkHealth(); }

uint64_t CudaRingEngine::kernelCallCount() { return gKernelCalls.load(); }

// ---- one collective ------------------------------------------------------------------------------

std::shared_ptr<CudaTask> CudaRingEngine::enqueue(const CudaCall& c, const Fingerprint& fp,
                                                  const std::string& detail,
                                                  const Launch& launch) {
  std::lock_guard<std::mutex> lock(enqueueMutex_);
  RING_ASSERT(usable() && watchdog_ != nullptr && !shutDown_, "CUDA ring engine of rank ",
              opts_.rank, ": ", describe(fp), " enqueued on an engine that is not running");
  state_->checkHealth();
  requireCurrentDevice(device(), "enqueueing a CUDA collective");
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(c.caller, &capture) != cudaSuccess) (void)cudaGetLastError();
  if (capture != cudaStreamCaptureStatusNone) {
    throw UsageError("CUDA graph capture is not supported by the ring backend: each kernel's FIFO "
                     "counters are set on the host when it is enqueued, so a replayed graph would "
                     "run with stale counters. Run this collective outside the captured region.");
  }
  // The comm stream starts after everything the caller queued before this call (e.g. the
  // kernel that produced the input).
  if (ready_ == nullptr) {
    checkCuda(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming),
              "cudaEventCreateWithFlags", "recording the caller's stream");
  }
  checkCuda(cudaEventRecord(ready_, c.caller), "cudaEventRecord", "recording the caller's stream");
  checkCuda(cudaStreamWaitEvent(commStream_, ready_, 0), "cudaStreamWaitEvent",
            "ordering the comm stream after the caller's");
  // Timed (torch's collective timing on), as NCCL times its kernels: an event right before the
  // kernel and an end event that keeps time. Untimed, the end event is made without timing,
  // which costs each launch less.
  cudaEvent_t start = nullptr;
  if (c.timed) {
    cudaError_t e = cudaEventCreate(&start);
    if (e == cudaSuccess) e = cudaEventRecord(start, commStream_);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      if (start != nullptr) (void)cudaEventDestroy(start);
      throw CommError(strCat("ring: ", describe(fp), " on rank ", opts_.rank,
                             ": recording the start event: ", cudaGetErrorString(e)));
    }
  }
  std::string error = launch(commStream_);
  cudaEvent_t end = nullptr;
  if (error.empty()) {
    cudaError_t e =
        cudaEventCreateWithFlags(&end, c.timed ? cudaEventDefault : cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventRecord(end, commStream_);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      error = strCat("recording the end event: ", cudaGetErrorString(e));
    }
  }
  if (!error.empty()) {
    // The peers now wait for messages this rank will never send: break the group so that they
    // stop at once rather than at their timeout.
    if (end != nullptr) (void)cudaEventDestroy(end);
    if (start != nullptr) (void)cudaEventDestroy(start);
    std::string reason = strCat("ring: ", describe(fp), " on rank ", opts_.rank, " of ",
                                opts_.size, " in group '", opts_.groupName, "': ", error);
    state_->breakGroup(reason);
    throw CommError(reason);
  }
  const uint64_t recordId = state_->recordQueued(fp.seq, c.collective, detail);
  auto task = std::make_shared<CudaTask>(fp.seq, describe(fp), end, c.timeout, recordId, state_,
                                         c.onFinished, start);
  watchdog_->watch(task);
  ++gKernelCalls;
  if (c.afterLaunch) c.afterLaunch(commStream_);
  return task;
}

std::shared_ptr<CudaTask> CudaRingEngine::allReduce(const CudaCall& c, void* data, int64_t count,
                                                    DType d, RedOp op, ScaleFactor factor) {
  const Fingerprint fp = makeFingerprint(Collective::AllReduce, c.seq, count, d, op, -1);
  const RingWaitLimits limits = limitsFor(c.timeout);
  return enqueue(c, fp, strCat(count, " x ", dtypeName(d), ", op ", redOpName(op), " (CUDA)"),
                 [&](cudaStream_t comm) {
                   return launchAllReduce(state_->links().peers(), &counters_, data, count, d, op,
                                          factor, fp, limits, comm);
                 });
}

std::shared_ptr<CudaTask> CudaRingEngine::reduceScatter(const CudaCall& c, const void* input,
                                                        void* output, int64_t countPerRank,
                                                        DType d, RedOp op,
                                                        ScaleFactor factor) {
  const Fingerprint fp =
      makeFingerprint(Collective::ReduceScatter, c.seq, countPerRank, d, op, -1);
  const RingWaitLimits limits = limitsFor(c.timeout);
  return enqueue(c, fp, strCat(countPerRank, " x ", dtypeName(d), ", op ", redOpName(op),
                               " (CUDA)"),
                 [&](cudaStream_t comm) {
                   return launchReduceScatter(state_->links().peers(), &counters_, input, output,
                                              countPerRank, d, op, factor, fp, limits, comm);
                 });
}

std::shared_ptr<CudaTask> CudaRingEngine::allGather(const CudaCall& c, const void* input,
                                                    void* output, int64_t countPerRank, DType d) {
  const Fingerprint fp =
      makeFingerprint(Collective::AllGather, c.seq, countPerRank, d, RedOp::Sum, -1);
  const RingWaitLimits limits = limitsFor(c.timeout);
  return enqueue(c, fp, strCat(countPerRank, " x ", dtypeName(d), " (CUDA)"),
                 [&](cudaStream_t comm) {
                   return launchAllGather(state_->links().peers(), &counters_, input, output,
                                          countPerRank, d, fp, limits, comm);
                 });
}

std::shared_ptr<CudaTask> CudaRingEngine::broadcast(const CudaCall& c, void* data, int64_t count,
                                                    DType d, int root) {
  const Fingerprint fp =
      makeFingerprint(Collective::Broadcast, c.seq, count, d, RedOp::Sum, root);
  const RingWaitLimits limits = limitsFor(c.timeout);
  return enqueue(c, fp, strCat(count, " x ", dtypeName(d), ", root ", root, " (CUDA)"),
                 [&](cudaStream_t comm) {
                   return launchBroadcast(state_->links().peers(), &counters_, data, count, d,
                                          root, fp, limits, comm);
                 });
}

// ---- waiting -------------------------------------------------------------------------------------

void CudaRingEngine::waitIdle() {
  if (watchdog_) watchdog_->waitIdle();
  std::string broken = state_->brokenReason();
  if (!broken.empty()) throw CommError(broken);
}

}  // namespace ring
