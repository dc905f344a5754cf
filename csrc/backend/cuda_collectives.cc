#include "backend/cuda_collectives.h"

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <map>
#include <set>

#include "common/env.h"
#include "common/errors.h"
#include "common/logging.h"
#include "common/thread_name.h"
#include "transport/cuda_ipc/cuda_check.h"
#include "transport/cuda_ipc/cuda_env.h"
#include "transport/host_identity.h"
#include "transport/setup_keys.h"

namespace ring {
namespace {

// How often the watchdog polls end events, and how often it asks the group for its health.
constexpr std::chrono::milliseconds kPollInterval{2};
constexpr std::chrono::milliseconds kHealthInterval{100};
// How long a shutting-down backend waits for kernels that were told to abort before it gives
// up on them (the inbox is then kept allocated: see CudaRingLinks::keepMemory).
constexpr std::chrono::seconds kAbortGrace{30};
// The kernels' own spin limit lies this far beyond the group timeout: the host watchdog acts
// first; the device limit only matters if the host stopped watching.
constexpr std::chrono::seconds kDeviceSpinMargin{30};
// How long shutdown waits for the other ranks to close their CUDA links before it keeps the
// inbox allocated instead of freeing it (a rank that left without shutting down).
constexpr std::chrono::seconds kCloseWait{30};

RingWaitLimits limitsFor(std::chrono::milliseconds timeout) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(timeout + kDeviceSpinMargin);
  return RingWaitLimits{static_cast<uint64_t>(ns.count())};
}

[[noreturn]] void raiseComm(const std::string& text) { C10_THROW_ERROR(DistBackendError, text); }

std::atomic<uint64_t> gKernelCalls{0};

// Two ranks of one process (threads as ranks) that both call on the legacy default stream can
// deadlock: rank 0's wait() makes the default stream wait for kernel 0, which spins until
// kernel 1 runs; rank 1's next call records its start on that same default stream, so kernel 1
// queues behind the wait for kernel 0. Warned once per group and device.
void noteDefaultStream(const std::string& group, int rank, const at::Device& device) {
  static std::mutex mutex;
  static std::map<std::pair<std::string, int>, std::set<int>> ranksOnDefault;
  std::lock_guard<std::mutex> lock(mutex);
  std::set<int>& ranks = ranksOnDefault[{group, device.index()}];
  const bool had = ranks.size() >= 2;
  ranks.insert(rank);
  if (had || ranks.size() < 2) return;
  RING_LOG(kLogWarn, "ranks ", *ranks.begin(), " and ", *ranks.rbegin(),
           " of this process both call ring collectives on the default stream of ",
           device.str(), ". A wait() on one rank's work then queues the other rank's next "
           "kernel behind it while the first kernel waits for that one: a deadlock until the "
           "timeout. Give each rank thread its own stream (with torch.cuda.stream(torch.cuda."
           "Stream()): ...).");
}

}  // namespace

CudaCollectives::CudaCollectives(Store& store, Communicator& comm,
                                 FlightRecorder& recorder, int rank, int size, at::Device device,
                                 std::chrono::milliseconds timeout)
    : rank_(rank), size_(size), device_(device), groupName_(comm.groupName()), store_(store),
      timeout_(timeout) {
  const CudaKnobs& knobs = cudaKnobs();
  CudaLinkOptions opts;
  opts.device = device.index();
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
  c10::cuda::CUDAGuard guard(device_);
  std::unique_ptr<CudaRingLinks> links;
  try {
    links = std::make_unique<CudaRingLinks>(store, rank, size, opts);
  } catch (const std::exception& e) {
    reportSetupFailure(store, rank, strCat("CUDA links: ", e.what()));
    throw;
  }
  const bool ok = links->usable();
  if (ok) {
    RING_LOG(kLogInfo, "CUDA ring kernels on ",
             device_.str(), ", ", knobs.geometry.channels, " channels x ", knobs.geometry.slots,
             " slots x ", knobs.geometry.slotBytes, " bytes; ", links->describe());
  } else {
    RING_LOG(kLogInfo, "CUDA tensors are staged through host memory: ", links->declineReason());
  }
  state_ = std::make_shared<CudaGroupState>(std::move(links), &comm, &recorder, rank, size);
  if (!ok) return;
  commStream_ = std::make_unique<DedicatedStream>(device_.index());
  watchdog_ = std::thread([this] {
    nameThisThread("ring-cuda-wdog");
    setThreadLogContext(rank_, groupName_);
    watchdogLoop();
  });
}

CudaCollectives::~CudaCollectives() {
  if (watchdog_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(watchMutex_);
      stopping_ = true;
    }
    watchCv_.notify_all();
    watchdog_.join();
  }
  // Every kernel of this rank has ended (or was given up on after an abort, which keeps the
  // memory): the links can close, together with the other ranks'.
  if (state_->brokenReason().empty()) {
    try {
      state_->links().closeCollectively(store_, std::min<std::chrono::milliseconds>(timeout_, kCloseWait));
    } catch (const std::exception& e) {
      state_->links().keepMemory();
      RING_LOG(kLogWarn, "closing the CUDA links failed (", e.what(),
               "); keeping the CUDA inbox allocated");
    }
  }
  // Works the user still holds keep the links (and so the inbox) alive through the state.
  state_->detach();
}

bool CudaCollectives::usable() const { return state_->links().usable(); }

const std::string& CudaCollectives::declineReason() const {
  return state_->links().declineReason();
}

// ---- one collective ------------------------------------------------------------------------------

c10::intrusive_ptr<c10d::Work> CudaCollectives::run(const CheckScope& s, c10d::OpType type,
                                                    const Fingerprint& fp, std::string detail,
                                                    std::chrono::milliseconds timeout,
                                                    const std::vector<at::Tensor>& inputs,
                                                    std::vector<at::Tensor> outputs,
                                                    const Launch& launch) {
  std::lock_guard<std::mutex> lock(enqueueMutex_);
  try {
    state_->checkHealth();
  } catch (const CommError& e) {
    raiseComm(e.what());
  }
  c10::cuda::CUDAGuard guard(device_);
  const c10::cuda::CUDAStream caller = c10::cuda::getCurrentCUDAStream(device_.index());
  const cudaStream_t current = caller.stream();
  if (caller == c10::cuda::getDefaultCUDAStream(device_.index())) {
    noteDefaultStream(groupName_, rank_, device_);
  }
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(current, &capture) != cudaSuccess) (void)cudaGetLastError();
  if (capture != cudaStreamCaptureStatusNone) {
    failUsage(s, "CUDA graph capture is not supported by the ring backend: each kernel's FIFO "
                 "counters are set on the host when it is enqueued, so a replayed graph would "
                 "run with stale counters. Run this collective outside the captured region.");
  }
  const c10::cuda::CUDAStream commStream = commStream_->stream();
  const cudaStream_t comm = commStream.stream();
  // The comm stream starts after everything the caller queued before this call (e.g. the
  // kernel that produced the input).
  ready_.record(caller, "recording the caller's stream");
  ready_.block(commStream, "ordering the comm stream after the caller's");
  auto keepAlive = [&](const at::Tensor& t) {
    c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), commStream);
  };
  for (const at::Tensor& t : inputs) keepAlive(t);
  for (const at::Tensor& t : outputs) keepAlive(t);
  std::string error = launch(comm);
  cudaEvent_t end = nullptr;
  if (error.empty()) {
    cudaError_t e = cudaEventCreateWithFlags(&end, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventRecord(end, comm);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      error = strCat("recording the end event: ", cudaGetErrorString(e));
    }
  }
  if (!error.empty()) {
    // The peers now wait for messages this rank will never send: break the group so that they
    // stop at once rather than at their timeout.
    if (end != nullptr) (void)cudaEventDestroy(end);
    std::string reason = strCat("ring: ", describe(fp), " on rank ", rank_, " of ", size_,
                                " in group '", groupName_, "': ", error);
    state_->breakGroup(reason);
    raiseComm(reason);
  }
  const uint64_t recordId = state_->recordQueued(fp.seq, s.collective, detail);
  auto work = c10::make_intrusive<CudaRingWork>(rank_, type, fp.seq, describe(fp),
                                                std::move(outputs), device_, end, timeout,
                                                cudaKnobs().blockingWait, recordId, state_);
  {
    // On this (enqueuing) thread, with the comm stream current: the Future's events are
    // recorded after the kernel.
    c10::cuda::CUDAStreamGuard streamGuard(commStream);
    work->markFutureCompleted();
  }
  {
    std::lock_guard<std::mutex> watch(watchMutex_);
    pending_.push_back(work);
  }
  watchCv_.notify_all();
  ++gKernelCalls;
  return work;
}

uint64_t CudaCollectives::kernelCallCount() { return gKernelCalls.load(); }

c10::intrusive_ptr<c10d::Work> CudaCollectives::allReduce(const CheckScope& s, const at::Tensor& t,
                                                          DType d, RedOp op, double factor,
                                                          uint64_t seq,
                                                          std::chrono::milliseconds timeout) {
  const Fingerprint fp = makeFingerprint(Collective::AllReduce, seq, t.numel(), d, op, -1);
  void* data = t.data_ptr();
  const int64_t count = t.numel();
  const RingWaitLimits limits = limitsFor(timeout);
  return run(s, c10d::OpType::ALLREDUCE, fp, strCat(count, " x ", dtypeName(d), ", op ",
             redOpName(op), " (CUDA)"), timeout, {t}, {t}, [&](void* stream) {
               return launchAllReduce(state_->links().peers(), &counters_, data, count, d, op,
                                      factor, fp, limits, stream);
             });
}

c10::intrusive_ptr<c10d::Work> CudaCollectives::reduceScatter(const CheckScope& s,
                                                              const at::Tensor& input,
                                                              const at::Tensor& output, DType d,
                                                              RedOp op, double factor,
                                                              uint64_t seq,
                                                              std::chrono::milliseconds timeout) {
  // Blocks of the input are read until the last step: an output inside the input would be
  // overwritten first. Stage through a copy (on the caller's stream, so it is ordered).
  at::Tensor in = overlaps(input, output) ? input.clone() : input;
  const int64_t count = output.numel();
  const Fingerprint fp = makeFingerprint(Collective::ReduceScatter, seq, count, d, op, -1);
  const void* src = in.data_ptr();
  void* dst = output.data_ptr();
  const RingWaitLimits limits = limitsFor(timeout);
  return run(s, c10d::OpType::_REDUCE_SCATTER_BASE, fp, strCat(count, " x ", dtypeName(d),
             ", op ", redOpName(op), " (CUDA)"), timeout, {in}, {output}, [&](void* stream) {
               return launchReduceScatter(state_->links().peers(), &counters_, src, dst, count, d,
                                          op, factor, fp, limits, stream);
             });
}

c10::intrusive_ptr<c10d::Work> CudaCollectives::allGather(const CheckScope& s,
                                                          const at::Tensor& input,
                                                          const at::Tensor& output, DType d,
                                                          uint64_t seq,
                                                          std::chrono::milliseconds timeout) {
  // An input inside the output is this rank's block (checked by the caller: FSDP's case).
  const int64_t count = input.numel();
  const Fingerprint fp = makeFingerprint(Collective::AllGather, seq, count, d, RedOp::Sum, -1);
  const void* src = input.data_ptr();
  void* dst = output.data_ptr();
  const RingWaitLimits limits = limitsFor(timeout);
  return run(s, c10d::OpType::_ALLGATHER_BASE, fp, strCat(count, " x ", dtypeName(d), " (CUDA)"),
             timeout, {input}, {output}, [&](void* stream) {
               return launchAllGather(state_->links().peers(), &counters_, src, dst, count, d, fp,
                                      limits, stream);
             });
}

c10::intrusive_ptr<c10d::Work> CudaCollectives::broadcast(const CheckScope& s, const at::Tensor& t,
                                                          DType d, int root, uint64_t seq,
                                                          std::chrono::milliseconds timeout) {
  const Fingerprint fp = makeFingerprint(Collective::Broadcast, seq, t.numel(), d, RedOp::Sum, root);
  void* data = t.data_ptr();
  const int64_t count = t.numel();
  const RingWaitLimits limits = limitsFor(timeout);
  return run(s, c10d::OpType::BROADCAST, fp, strCat(count, " x ", dtypeName(d), ", root ", root,
             " (CUDA)"), timeout, {t}, {t}, [&](void* stream) {
               return launchBroadcast(state_->links().peers(), &counters_, data, count, d, root, fp,
                                      limits, stream);
             });
}

// ---- waiting and the watchdog ----------------------------------------------------------------------

void CudaCollectives::waitIdle() {
  std::unique_lock<std::mutex> lock(watchMutex_);
  // The watchdog removes each work once its kernel ended, and fails it at its timeout first.
  watchCv_.wait(lock, [&] { return pending_.empty(); });
  lock.unlock();
  std::string broken = state_->brokenReason();
  if (!broken.empty()) throw CommError(broken);
}

void CudaCollectives::failAll(const std::vector<c10::intrusive_ptr<CudaRingWork>>& works,
                              const std::string& reason) {
  state_->breakGroup(reason);
  for (const auto& w : works) {
    // A kernel that has ended already keeps its own outcome (poll reads it first).
    w->poll();
    w->fail(strCat("ring: ", w->what(), " on rank ", rank_, " was stopped: ", reason));
  }
}

void CudaCollectives::watchdogLoop() {
  auto lastHealth = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point stopSince{};
  std::unique_lock<std::mutex> lock(watchMutex_);
  while (true) {
    if (pending_.empty()) {
      if (stopping_) return;
      // Nothing in flight: sleep until a collective is enqueued (or the backend goes).
      watchCv_.wait(lock, [&] { return stopping_ || !pending_.empty(); });
      continue;
    }
    // Kernels in flight: poll their end events every kPollInterval (a notify, e.g. a new
    // collective, only shortens one interval).
    watchCv_.wait_for(lock, kPollInterval);
    if (stopping_) {
      const auto now = std::chrono::steady_clock::now();
      if (stopSince == std::chrono::steady_clock::time_point{}) stopSince = now;
      if (!state_->brokenReason().empty() && now - stopSince > kAbortGrace) {
        RING_LOG(kLogWarn, pending_.size(), " CUDA ring kernel(s) did not "
                 "stop within ", kAbortGrace.count(), " s of being aborted; giving up on them");
        return;
      }
    }
    std::vector<c10::intrusive_ptr<CudaRingWork>> works = pending_;
    lock.unlock();

    const auto now = std::chrono::steady_clock::now();
    if (now - lastHealth >= kHealthInterval) {
      lastHealth = now;
      try {
        state_->checkHealth();
      } catch (const std::exception& e) {
        // A peer failed, died or aborted, or this rank's abort() was called: stop our kernels.
        failAll(works, e.what());
      }
    }
    for (const auto& w : works) {
      if (w->poll() || w->finished()) continue;
      if (w->elapsed() > w->timeout()) {
        const std::string reason = strCat(
            "ring: ", w->what(), " on rank ", rank_, " of ", size_, " in group '", groupName_,
            "' timed out after ", w->elapsed().count(), " ms (the timeout is ", w->timeout().count(),
            " ms): its CUDA ring kernel did not finish. A peer may be stuck, slower, or running "
            "a different collective; TORCH_RING_DEBUG=INFO and the flight recorder show each "
            "rank's last collectives. The kernel was stopped and the group is broken.");
        w->fail(reason);
        failAll(works, reason);
        break;
      }
    }

    lock.lock();
    const size_t before = pending_.size();
    std::vector<c10::intrusive_ptr<CudaRingWork>> still;
    for (auto& w : pending_) {
      if (!w->poll()) still.push_back(std::move(w));
    }
    pending_.swap(still);
    if (pending_.size() != before) watchCv_.notify_all();  // waitIdle()
  }
}

}  // namespace ring
