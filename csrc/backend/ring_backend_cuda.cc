// RingBackend's CUDA path: the kernel path (set up on the first CUDA collective), the streams
// the group's CUDA calls run their GPU work on, what every CUDA collective does before it is
// issued (graph capture refused, earlier staged calls awaited), and waiting for the kernels'
// work (the route and the collectives are in ring_backend.cc and ring_backend_lists.cc).
#include "backend/ring_backend.h"

#include <c10/util/Exception.h>

#include "common/errors.h"
#ifdef RING_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "backend/cuda_collectives.h"
#include "backend/staging.h"
#include "backend/tensor_checks.h"
#endif

namespace ring {

#ifdef RING_WITH_CUDA
void RingBackend::setUpCudaLocked(const CheckScope& s, const at::Device& device) {
  if (cudaTried_) return;
  // Collective: every rank reaches its first CUDA call of the four kernel collectives (or
  // init_process_group's eager connect) at the same point.
  cudaTried_ = true;
  std::lock_guard<std::mutex> commLock(commMutex_);
  TORCH_CHECK(comm_ != nullptr, "ring: ", s.collective, " on rank ", rank_,
              " was called after the process group was shut down (destroy_process_group)");
  // The set-up calls the runtime on this thread: on the group's device (torch's guard gives
  // the thread's device back without making a context where none was).
  c10::cuda::CUDAGuard guard(device);
  DedicatedStream& stream = streamOf(orderStreams_, device);
  try {
    cuda_ = std::make_unique<CudaCollectives>(*setupKeys_, *comm_, recorder_, rank_, size_, device,
                                              effectiveTimeout(c10d::kUnsetTimeout), stream,
                                              [this](c10d::OpType type, uint64_t seq,
                                                     std::chrono::steady_clock::time_point start,
                                                     std::chrono::steady_clock::time_point end,
                                                     const std::exception_ptr& error,
                                                     uint64_t key) {
                                                ends_.finished(type, seq, start, end, error, key,
                                                               /*timed=*/false);
                                              });
    if (timeKernels_.load()) cuda_->timeKernels();
  } catch (const CommError& e) {
    C10_THROW_ERROR(DistBackendError, strCat("ring: ", s.collective, " on rank ", rank_,
                                             ": setting up the CUDA ring failed: ", e.what()));
  } catch (const RingError& e) {
    TORCH_CHECK(false, "ring: ", s.collective, " on rank ", rank_,
                ": setting up the CUDA ring failed: ", e.what());
  }
}

CudaCollectives* RingBackend::kernelsFor(const CheckScope& s, const at::Tensor& t) {
  std::lock_guard<std::mutex> lock(cudaMutex_);
  std::optional<at::Device> bound = getBoundDeviceId();
  setUpCudaLocked(s, bound && bound->is_cuda() && bound->has_index() ? *bound : t.device());
  if (!cuda_) return nullptr;
  if (t.device() != cuda_->device()) {
    failUsage(s, strCat("the tensor is on ", t.device().str(), " but this rank's group is bound to ",
                        cuda_->device().str(), " (its first CUDA collective, or init_process_group's "
                        "device_id); use one device per rank, e.g. torch.cuda.set_device(local_rank)"));
  }
  return cuda_->usable() ? cuda_.get() : nullptr;
}

void RingBackend::refuseGraphCapture(const CheckScope& s, const at::Device& device) {
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

void RingBackend::beforeCudaCollective(const CheckScope& s, const at::Device& device,
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
                      strCat("ring: ", s.collective, " on rank ", rank_, " waited ",
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

DedicatedStream& RingBackend::streamOf(DeviceStreams& streams, const at::Device& device) {
  std::unique_ptr<DedicatedStream>& slot = streams[device.index()];
  if (!slot) slot = std::make_unique<DedicatedStream>(device.index());
  return *slot;
}

DedicatedStream& RingBackend::orderStream(const at::Device& device) {
  std::lock_guard<std::mutex> lock(cudaMutex_);
  return streamOf(orderStreams_, device);
}

DedicatedStream& RingBackend::p2pStream(const at::Device& device) {
  std::lock_guard<std::mutex> lock(cudaMutex_);
  return streamOf(p2pStreams_, device);
}
#endif

bool RingBackend::cudaPathSetUp() {
#ifdef RING_WITH_CUDA
  std::lock_guard<std::mutex> lock(cudaMutex_);
  return cuda_ != nullptr;
#else
  return false;
#endif
}

void RingBackend::waitCudaWork() {
#ifdef RING_WITH_CUDA
  CudaCollectives* cuda = nullptr;
  {
    std::lock_guard<std::mutex> lock(cudaMutex_);
    cuda = cuda_ && cuda_->usable() ? cuda_.get() : nullptr;
  }
  // Bounded: the watchdog stops every kernel at its timeout. A failure raises CommError, which
  // fails the barrier.
  if (cuda != nullptr) cuda->waitIdle();
#endif
}

}  // namespace ring
