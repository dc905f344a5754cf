#include "backend/cuda_route.h"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>

#include <algorithm>

#include "backend/cuda_collectives.h"
#include "backend/cuda_sync.h"
#include "backend/staging.h"
#include "backend/tensor_checks.h"
#include "common/errors.h"

namespace ring {

CudaRoute::CudaRoute(MakeKernels makeKernels) : makeKernels_(std::move(makeKernels)) {}

CudaRoute::~CudaRoute() = default;

void CudaRoute::setUpLocked(const CheckScope& s, const at::Device& device) {
  if (tried_) return;
  // Collective: every rank reaches its first CUDA call of the kernel collectives (or
  // init_process_group's eager connect) at the same point. Tried once, failed or not.
  tried_ = true;
  // The set-up calls the runtime on this thread: on the group's device (torch's guard gives
  // the thread's device back without making a context where none was).
  c10::cuda::CUDAGuard guard(device);
  kernels_ = makeKernels_(s, device, streamOf(orderStreams_, device));
  if (kernels_ && timed_) kernels_->timeKernels();
}

void CudaRoute::setUp(const CheckScope& s, const at::Device& device) {
  std::lock_guard<std::mutex> lock(mutex_);
  setUpLocked(s, device);
}

CudaCollectives* CudaRoute::kernelsFor(const CheckScope& s, const at::Tensor& t,
                                       std::optional<at::Device> bound) {
  std::lock_guard<std::mutex> lock(mutex_);
  setUpLocked(s, bound && bound->is_cuda() && bound->has_index() ? *bound : t.device());
  if (!kernels_) return nullptr;
  if (t.device() != kernels_->device()) {
    failUsage(s, strCat("the tensor is on ", t.device().str(), " but this rank's group is bound to ",
                        kernels_->device().str(), " (its first CUDA collective, or "
                        "init_process_group's device_id); use one device per rank, e.g. "
                        "torch.cuda.set_device(local_rank)"));
  }
  return kernels_->usable() ? kernels_.get() : nullptr;
}

bool CudaRoute::setUpDone() {
  std::lock_guard<std::mutex> lock(mutex_);
  return kernels_ != nullptr;
}

void CudaRoute::refuseGraphCapture(const CheckScope& s, const at::Device& device) {
  c10::cuda::CUDAGuard guard(device);
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(c10::cuda::getCurrentCUDAStream(device.index()).stream(),
                            &capture) != cudaSuccess) {
    (void)cudaGetLastError();
  }
  if (capture == cudaStreamCaptureStatusNone) return;
  failUsage(s, "CUDA graph capture is not supported by the ring backend: a CUDA collective is "
               "set up on the host when it is issued (its ring kernel's FIFO counters; the host "
               "part of a call staged through host memory), so a replayed graph would run it "
               "with stale counters or without its host part. Run this call outside the "
               "captured region.");
}

void CudaRoute::beforeCollective(const CheckScope& s, const at::Device& device,
                                 std::chrono::milliseconds timeout) {
  refuseGraphCapture(s, device);
  std::vector<std::shared_ptr<StagedCall>> earlier;
  {
    std::lock_guard<std::mutex> lock(stagedMutex_);
    earlier = stagedInFlight_;
  }
  if (earlier.empty()) return;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (const auto& call : earlier) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    // Bounded: the earlier call's host part ends within its own timeout, or at abort.
    if (!call->waitCopiesBackQueued(std::max(left, std::chrono::milliseconds(0)))) {
      C10_THROW_ERROR(DistBackendError,
                      strCat("ring: ", s.collective, " on rank ", s.rank, " waited ",
                             timeout.count(), " ms (the timeout) for the earlier call ",
                             call->what(), " to finish its host part: this call reads what "
                             "that one writes, in issue order"));
    }
  }
  std::lock_guard<std::mutex> lock(stagedMutex_);
  std::vector<std::shared_ptr<StagedCall>> still;
  for (auto& call : stagedInFlight_) {
    if (!call->waitCopiesBackQueued(std::chrono::milliseconds(0))) still.push_back(std::move(call));
  }
  stagedInFlight_.swap(still);
}

void CudaRoute::addStaged(std::shared_ptr<StagedCall> call) {
  std::lock_guard<std::mutex> lock(stagedMutex_);
  stagedInFlight_.push_back(std::move(call));
}

DedicatedStream& CudaRoute::streamOf(DeviceStreams& streams, const at::Device& device) {
  std::unique_ptr<DedicatedStream>& slot = streams[device.index()];
  if (!slot) slot = std::make_unique<DedicatedStream>(device.index());
  return *slot;
}

DedicatedStream& CudaRoute::orderStream(const at::Device& device) {
  std::lock_guard<std::mutex> lock(mutex_);
  return streamOf(orderStreams_, device);
}

DedicatedStream& CudaRoute::p2pStream(const at::Device& device) {
  std::lock_guard<std::mutex> lock(mutex_);
  return streamOf(p2pStreams_, device);
}

void CudaRoute::waitIdle() {
  CudaCollectives* kernels = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    kernels = kernels_ && kernels_->usable() ? kernels_.get() : nullptr;
  }
  if (kernels != nullptr) kernels->waitIdle();
}

void CudaRoute::timeKernels() {
  std::lock_guard<std::mutex> lock(mutex_);
  timed_ = true;
  if (kernels_) kernels_->timeKernels();
}

void CudaRoute::shutdown() {
  // Waits for kernels in flight (each bounded by its timeout), then frees the CUDA state.
  std::lock_guard<std::mutex> lock(mutex_);
  kernels_.reset();
  tried_ = true;  // no CUDA set-up after shutdown: calls now fail in the queue
  {
    std::lock_guard<std::mutex> stagedLock(stagedMutex_);
    stagedInFlight_.clear();  // the queue has run them all
  }
  orderStreams_.clear();
  p2pStreams_.clear();
}

void CudaRoute::allowSetUpAgain() {
  std::lock_guard<std::mutex> lock(mutex_);
  tried_ = false;
}

}  // namespace ring
