#include "executor/cuda_group_state.h"

#include "common/errors.h"
#include "common/logging.h"
#include "executor/communicator.h"
#include "executor/flight_recorder.h"

namespace ring {

CudaGroupHooks communicatorHooks(Communicator& comm, FlightRecorder& recorder) {
  CudaGroupHooks h;
  h.checkHealth = [&comm] { comm.checkHealth(); };
  h.markBroken = [&comm](const std::string& reason) { comm.transport().markBroken(reason); };
  h.recordQueued = [&recorder](uint64_t seq, const std::string& name, const std::string& detail) {
    const uint64_t id = recorder.recordQueued(seq, name, detail);
    // The host cannot see when the kernel starts; "running" = handed to the GPU.
    recorder.markStarted(id);
    return id;
  };
  h.recordEnded = [&recorder](uint64_t id, const std::string& error) {
    // Every kernel collective runs the ring over the CUDA links (kernels/ring_kernels.cuh).
    recorder.markEnded(id, error, std::chrono::steady_clock::now(), "cuda_ring");
  };
  return h;
}

CudaGroupState::CudaGroupState(std::unique_ptr<CudaRingLinks> links, CudaGroupHooks hooks,
                               int rank, int size)
    : links_(std::move(links)), rank_(rank), size_(size), hooks_(std::move(hooks)) {}

void CudaGroupState::breakGroup(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!broken_.empty()) return;
  broken_ = reason;
  // Kernels of this rank leave their waits at the next check (within about a millisecond).
  links_->requestAbort();
  // A peer's kernel may still be writing into this rank's inbox until its own abort lands.
  links_->keepMemory();
  // Tells the other ranks (their watchdogs poll the group's health and abort their kernels),
  // and fails this rank's next CPU or CUDA collective with the same reason.
  if (hooks_.markBroken) hooks_.markBroken(reason);
  RING_LOG(kLogWarn, "CUDA ring kernels stopped: ", reason);
}

std::string CudaGroupState::brokenReason() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return broken_;
}

void CudaGroupState::checkHealth() {
  std::string failure;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!broken_.empty()) throw CommError(broken_);
    if (!hooks_.checkHealth) return;
    try {
      hooks_.checkHealth();
      return;
    } catch (const CommError& e) {
      failure = e.what();
    }
  }
  // A peer's failure, a dead rank or this rank's abort ends the group for this rank too, here
  // as when the watchdog finds it: its kernels stop, and its shutdown does not wait for the
  // peers to close the links with it (they never will).
  breakGroup(failure);
  throw CommError(failure);
}

uint64_t CudaGroupState::recordQueued(uint64_t seq, const std::string& name,
                                      const std::string& detail) {
  std::lock_guard<std::mutex> lock(mutex_);
  return hooks_.recordQueued ? hooks_.recordQueued(seq, name, detail) : 0;
}

void CudaGroupState::recordEnded(uint64_t id, const std::string& error) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (hooks_.recordEnded) hooks_.recordEnded(id, error);
}

void CudaGroupState::detach() {
  std::lock_guard<std::mutex> lock(mutex_);
  hooks_ = CudaGroupHooks{};
}

}  // namespace ring
