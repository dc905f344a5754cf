// RingBackend's CUDA path: the kernel path (set up on the first CUDA collective), the staging
// streams of CUDA tensors staged through host memory, and waiting for the kernels' work (the
// collectives themselves are in ring_backend.cc).
#include "backend/ring_backend.h"

#include <c10/util/Exception.h>

#include "common/errors.h"
#ifdef RING_WITH_CUDA
#include "backend/cuda_collectives.h"
#include "backend/staging.h"
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
  try {
    cuda_ = std::make_unique<CudaCollectives>(*setupKeys_, *comm_, recorder_, rank_, size_, device,
                                              effectiveTimeout(c10d::kUnsetTimeout));
  } catch (const CommError& e) {
    C10_THROW_ERROR(DistBackendError, strCat("ring: ", s.collective, " on rank ", rank_,
                                             ": setting up the CUDA ring failed: ", e.what()));
  } catch (const RingError& e) {
    TORCH_CHECK(false, "ring: ", s.collective, " on rank ", rank_,
                ": setting up the CUDA ring failed: ", e.what());
  }
}

CudaCollectives* RingBackend::kernelPath(const CheckScope& s, const at::Tensor& t) {
  if (!t.is_cuda()) return nullptr;
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

DedicatedStream& RingBackend::stagingStream(const at::Device& device) {
  std::lock_guard<std::mutex> lock(cudaMutex_);
  auto& slot = stagingStreams_[device.index()];
  if (!slot) slot = std::make_unique<DedicatedStream>(device.index());
  return *slot;
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
