#include "executor/cuda_task.h"

#include "common/errors.h"
#include "executor/cuda_errors.h"
#include "executor/cuda_event.h"

namespace ring {

CudaTask::CudaTask(uint64_t seq, std::string what, cudaEvent_t end,
                   std::chrono::milliseconds timeout, uint64_t recordId,
                   std::shared_ptr<CudaGroupState> state, FinishHook completion,
                   cudaEvent_t start)
    : seq_(seq),
      what_(std::move(what)),
      end_(end),
      start_(start),
      timeout_(timeout),
      recordId_(recordId),
      enqueued_(std::chrono::steady_clock::now()),
      state_(std::move(state)),
      completion_(std::move(completion)) {}

CudaTask::~CudaTask() {
  // Destroying an event whose record is still pending is allowed: the runtime releases it once
  // the work before it completes.
  if (end_ != nullptr) (void)cudaEventDestroy(end_);
  if (start_ != nullptr) (void)cudaEventDestroy(start_);
  (void)cudaGetLastError();
}

float CudaTask::kernelMilliseconds() {
  if (start_ == nullptr || !poll()) return -1.0f;
  float ms = -1.0f;
  cudaError_t e;
  {
    ThreadLocalCaptureMode notForbiddenByOtherThreadsCaptures;  // as in pollLocked
    e = cudaEventElapsedTime(&ms, start_, end_);
  }
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return -1.0f;
  }
  return ms;
}

std::chrono::milliseconds CudaTask::elapsed() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               enqueued_);
}

std::vector<CudaTask::FinishHook> CudaTask::finishOnce(std::exception_ptr error,
                                                      const std::string& text) {
  // Caller holds mutex_.
  if (finished_) return {};
  finished_ = true;
  error_ = error;
  state_->recordEnded(recordId_, text);
  std::vector<FinishHook> hooks;
  if (completion_) hooks.push_back(std::move(completion_));
  if (hook_) {
    hooks.push_back(std::move(hook_));
    workHookRunning_ = true;  // until runHooks has run it (dropFinishHook waits for that)
  }
  completion_ = nullptr;
  hook_ = nullptr;
  return hooks;
}

void CudaTask::runHooks(const std::vector<FinishHook>& hooks, const std::exception_ptr& error) {
  if (hooks.empty()) return;
  for (const FinishHook& hook : hooks) hook(error);
  std::lock_guard<std::mutex> lock(mutex_);
  workHookRunning_ = false;
  hookDone_.notify_all();
}

bool CudaTask::poll() {
  std::vector<FinishHook> hooks;
  std::exception_ptr error;
  bool ended = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ended = pollLocked(&hooks);
    error = error_;
  }
  runHooks(hooks, error);
  return ended;
}

bool CudaTask::pollLocked(std::vector<FinishHook>* hooks) {
  if (kernelEnded_) return true;
  cudaError_t q;
  {
    // Polled by the watchdog and by Work.is_completed() while another thread may be capturing
    // a graph: a query in the default Global mode would fail and break that capture.
    ThreadLocalCaptureMode notForbiddenByOtherThreadsCaptures;
    q = cudaEventQuery(end_);
  }
  if (q == cudaErrorNotReady) {
    (void)cudaGetLastError();  // "not ready" is not an error; leave no trace of it
    return false;
  }
  if (q == cudaErrorStreamCaptureUnsupported) {
    // Refused because this very thread is capturing a graph (Work.is_completed() inside the
    // captured region): CUDA tells the user at the capture's end; the kernel's outcome is
    // simply not known yet.
    (void)cudaGetLastError();
    return false;
  }
  kernelEnded_ = true;
  if (q != cudaSuccess) {
    (void)cudaGetLastError();
    std::string reason = strCat("ring: ", what_, " on rank ", state_->rank(),
                                ": the CUDA ring kernel failed: ", cudaGetErrorString(q), " (",
                                cudaGetErrorName(q), ")");
    state_->breakGroup(reason);
    *hooks = finishOnce(std::make_exception_ptr(CommError(reason)), reason);
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
    *hooks = finishOnce(std::make_exception_ptr(CommError(reason)), reason);
    return true;
  }
  *hooks = finishOnce(nullptr, "");
  return true;
}

void CudaTask::fail(const std::string& reason, bool timedOut) {
  std::vector<FinishHook> hooks;
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    hooks = finishOnce(timedOut ? std::make_exception_ptr(TimeoutError(reason))
                                : std::make_exception_ptr(CommError(reason)),
                       reason);
    error = error_;
  }
  runHooks(hooks, error);
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
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!finished_) {
      hook_ = std::move(hook);
      return;
    }
    error = error_;
  }
  hook(error);
}

void CudaTask::dropFinishHook() {
  std::unique_lock<std::mutex> lock(mutex_);
  hook_ = nullptr;
  hookDone_.wait(lock, [&] { return !workHookRunning_; });
}

}  // namespace ring
