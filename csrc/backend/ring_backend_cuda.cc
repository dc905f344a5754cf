// RingBackend's side of its CUDA route (backend/cuda_route.h holds the route itself): how the
// group's kernels are made over its communicator, store and flight recorder, and the two
// questions a barrier and waitForPendingWorks ask of the CUDA path (the route and the
// collectives are in ring_backend.cc and ring_backend_lists.cc).
#include "backend/ring_backend.h"

#include <c10/util/Exception.h>

#include "common/errors.h"
#ifdef RING_WITH_CUDA
#include "backend/cuda_collectives.h"
#include "backend/cuda_route.h"
#include "backend/tensor_checks.h"
#endif

namespace ring {

#ifdef RING_WITH_CUDA
std::unique_ptr<CudaCollectives> RingBackend::makeCudaKernels(const CheckScope& s,
                                                              const at::Device& device,
                                                              DedicatedStream& stream) {
  std::lock_guard<std::mutex> commLock(commMutex_);
  TORCH_CHECK(comm_ != nullptr, "ring: ", s.collective, " on rank ", rank_,
              " was called after the process group was shut down (destroy_process_group)");
  try {
    return std::make_unique<CudaCollectives>(
        *setupKeys_, *comm_, recorder_, rank_, size_, device,
        effectiveTimeout(c10d::kUnsetTimeout), stream,
        [this](c10d::OpType type, uint64_t seq, std::chrono::steady_clock::time_point start,
               std::chrono::steady_clock::time_point end, const std::exception_ptr& error,
               uint64_t key) {
          ends_.finished(type, seq, start, end, error, key, /*timed=*/false);
        });
  } catch (const CommError& e) {
    C10_THROW_ERROR(DistBackendError, strCat("ring: ", s.collective, " on rank ", rank_,
                                             ": setting up the CUDA ring failed: ", e.what()));
  } catch (const RingError& e) {
    TORCH_CHECK(false, "ring: ", s.collective, " on rank ", rank_,
                ": setting up the CUDA ring failed: ", e.what());
  }
}
#endif

bool RingBackend::cudaPathSetUp() {
#ifdef RING_WITH_CUDA
  return cuda_->setUpDone();
#else
  return false;
#endif
}

void RingBackend::waitCudaWork() {
#ifdef RING_WITH_CUDA
  cuda_->waitIdle();
#endif
}

}  // namespace ring
