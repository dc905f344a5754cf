#include "backend/cuda_work.h"

#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>

#include <thread>

#include "backend/ring_work.h"
#include "common/errors.h"
#include "common/logging.h"
#include "executor/cuda_errors.h"

namespace ring {

// ---- group state ---------------------------------------------------------------------------------

CudaGroupState::CudaGroupState(std::unique_ptr<CudaRingLinks> links, Communicator* comm,
                               FlightRecorder* recorder, int rank, int size)
    : links_(std::move(links)), rank_(rank), size_(size), comm_(comm), recorder_(recorder) {}

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
  if (comm_ != nullptr) comm_->transport().markBroken(reason);
  RING_LOG(kLogWarn, "CUDA ring kernels stopped: ", reason);
}

std::string CudaGroupState::brokenReason() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return broken_;
}

void CudaGroupState::checkHealth() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!broken_.empty()) throw CommError(broken_);
  if (comm_ != nullptr) comm_->checkHealth();
}

uint64_t CudaGroupState::recordQueued(uint64_t seq, const std::string& name,
                                      const std::string& detail) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (recorder_ == nullptr) return 0;
  uint64_t id = recorder_->recordQueued(seq, name, detail);
  // The host cannot see when the kernel starts; "running" = handed to the GPU.
  recorder_->markStarted(id);
  return id;
}

void CudaGroupState::recordEnded(uint64_t id, const std::string& error) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (recorder_ != nullptr) recorder_->markEnded(id, error);
}

void CudaGroupState::detach() {
  std::lock_guard<std::mutex> lock(mutex_);
  comm_ = nullptr;
  recorder_ = nullptr;
}

// ---- work ----------------------------------------------------------------------------------------

CudaRingWork::CudaRingWork(int rank, c10d::OpType type, uint64_t seq, std::string what,
                           std::vector<at::Tensor> outputs, at::Device device, cudaEvent_t end,
                           std::chrono::milliseconds timeout, bool blockingWait,
                           uint64_t recordId, std::shared_ptr<CudaGroupState> state)
    : c10d::Work(rank, type),
      seq_(seq),
      what_(std::move(what)),
      outputs_(std::move(outputs)),
      device_(device),
      end_(end),
      timeout_(timeout),
      blockingWait_(blockingWait),
      recordId_(recordId),
      enqueued_(std::chrono::steady_clock::now()),
      state_(std::move(state)),
      // With the device list: a Future without devices does no stream synchronization at all
      // for CUDA tensors.
      future_(c10::make_intrusive<c10::ivalue::Future>(
          tensorListType(), std::vector<c10::Device>{device})) {}

CudaRingWork::~CudaRingWork() {
  // Destroying an event whose record is still pending is allowed: the runtime releases it once
  // the work before it completes.
  if (end_ != nullptr) (void)cudaEventDestroy(end_);
  (void)cudaGetLastError();
}

void CudaRingWork::markFutureCompleted() {
  // Records, on the current (= comm) stream, the events that future.wait() and .then()
  // callbacks make their streams wait on.
  future_->markCompleted(c10::IValue(outputs_));
}

std::chrono::milliseconds CudaRingWork::elapsed() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               enqueued_);
}

void CudaRingWork::finishOnce(std::exception_ptr error, const std::string& text) {
  // Caller holds pollMutex_.
  if (finished_) return;
  finished_ = true;
  state_->recordEnded(recordId_, text);
  finish(error ? toTorchError(error) : nullptr);
}

bool CudaRingWork::poll() {
  std::lock_guard<std::mutex> lock(pollMutex_);
  if (kernelEnded_) return true;
  cudaError_t q = cudaEventQuery(end_);
  if (q == cudaErrorNotReady) {
    (void)cudaGetLastError();  // "not ready" is not an error; leave no trace of it
    return false;
  }
  kernelEnded_ = true;
  if (q != cudaSuccess) {
    (void)cudaGetLastError();
    std::string reason = strCat("ring: ", what_, " on rank ", state_->rank(),
                                ": the CUDA ring kernel failed: ", cudaGetErrorString(q), " (",
                                cudaGetErrorName(q), ")");
    state_->breakGroup(reason);
    finishOnce(std::make_exception_ptr(CommError(reason)), reason);
    return true;
  }
  // A record left by this kernel or an earlier one (kernels of the group run in order on the
  // comm stream) means this collective did not complete; one from a later kernel does not.
  const DeviceErrorRecord r = state_->links().errorRecord();
  if (r.status != kDeviceOk && r.expected.seq <= seq_) {
    std::string reason = explainDeviceStop(r, state_->rank());
    if (r.expected.seq < seq_) {
      reason = strCat("ring: ", what_, " on rank ", state_->rank(),
                      " did not run: an earlier collective failed: ", reason);
    }
    state_->breakGroup(reason);
    finishOnce(std::make_exception_ptr(CommError(reason)), reason);
    return true;
  }
  finishOnce(nullptr, "");
  return true;
}

void CudaRingWork::fail(const std::string& reason) {
  std::lock_guard<std::mutex> lock(pollMutex_);
  finishOnce(std::make_exception_ptr(CommError(reason)), reason);
}

bool CudaRingWork::finished() {
  std::lock_guard<std::mutex> lock(pollMutex_);
  return finished_;
}

bool CudaRingWork::isCompleted() {
  poll();
  return finished();
}

std::vector<at::Tensor> CudaRingWork::result() { return outputs_; }

void CudaRingWork::streamWait() {
  // The caller's current stream on the work's device waits for the kernel: later work on that
  // stream sees the outputs; the CPU does not block.
  cudaStream_t current = c10::cuda::getCurrentCUDAStream(device_.index()).stream();
  cudaError_t e = cudaStreamWaitEvent(current, end_, 0);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    C10_THROW_ERROR(DistBackendError, strCat("ring: ", what_, " on rank ", state_->rank(),
                                             ": cudaStreamWaitEvent failed: ",
                                             cudaGetErrorString(e)));
  }
}

bool CudaRingWork::wait(std::chrono::milliseconds /*timeout*/) {
  poll();
  if (blockingWait_) {
    // Bounded: the watchdog fails the work (and aborts the kernel) at the group timeout.
    while (!finished()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      poll();
    }
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);  // c10d::Work's state
    if (exception_) std::rethrow_exception(exception_);
  }
  streamWait();
  return true;
}

void CudaRingWork::synchronize() { streamWait(); }

c10::intrusive_ptr<c10::ivalue::Future> CudaRingWork::getFuture() { return future_; }

uint64_t CudaRingWork::getSequencenumber() const { return seq_; }

}  // namespace ring
