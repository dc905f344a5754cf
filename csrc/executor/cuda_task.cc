#include "executor/cuda_task.h"

#include "common/errors.h"
#include "executor/cuda_errors.h"

namespace ring {

CudaTask::CudaTask(uint64_t seq, std::string what, cudaEvent_t end,
                   std::chrono::milliseconds timeout, uint64_t recordId,
                   std::shared_ptr<CudaGroupState> state)
    : seq_(seq),
      what_(std::move(what)),
      end_(end),
      timeout_(timeout),
      recordId_(recordId),
      enqueued_(std::chrono::steady_clock::now()),
      state_(std::move(state)) {}

CudaTask::~CudaTask() {
  // Destroying an event whose record is still pending is allowed: the runtime releases it once
  // the work before it completes.
  if (end_ != nullptr) (void)cudaEventDestroy(end_);
  (void)cudaGetLastError();
}

std::chrono::milliseconds CudaTask::elapsed() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               enqueued_);
}

void CudaTask::finishOnce(std::exception_ptr error, const std::string& text) {
  // Caller holds mutex_.
  if (finished_) return;
  finished_ = true;
  error_ = error;
  state_->recordEnded(recordId_, text);
  if (hook_) {
    FinishHook hook = std::move(hook_);
    hook_ = nullptr;
    hook(error);
  }
}

bool CudaTask::poll() {
  std::lock_guard<std::mutex> lock(mutex_);
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
  // Only now, with the end event completed, is the record complete. A record left by this
  // kernel or an earlier one (kernels of the group run in order on the comm stream) means this
  // collective did not complete; one from a later kernel does not.
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

void CudaTask::fail(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  finishOnce(std::make_exception_ptr(CommError(reason)), reason);
}

bool CudaTask::finished() {
  std::lock_guard<std::mutex> lock(mutex_);
  return finished_;
}

std::exception_ptr CudaTask::error() {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

void CudaTask::onFinish(FinishHook hook) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (finished_) {
    hook(error_);
    return;
  }
  hook_ = std::move(hook);
}

void CudaTask::dropFinishHook() {
  std::lock_guard<std::mutex> lock(mutex_);
  hook_ = nullptr;
}

}  // namespace ring
