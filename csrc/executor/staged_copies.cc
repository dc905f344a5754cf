#include "executor/staged_copies.h"

#include "common/errors.h"

namespace ring {

StagedCopies::StagedCopies(std::string what, cudaStream_t copies)
    : what_(std::move(what)), copies_(copies) {}

void StagedCopies::copyIn(cudaStream_t caller, const std::vector<HostCopy>& in) {
  {
    // The copies start after everything the caller queued before this call (e.g. the kernel
    // that produced the input), and not after anything it queues later.
    CudaEvent callerReady;
    callerReady.record(caller, what_.c_str());
    callerReady.block(copies_, what_.c_str());
  }
  for (const HostCopy& c : in) {
    if (c.bytes == 0) continue;
    checkCuda(cudaMemcpyAsync(c.host, c.device, c.bytes, cudaMemcpyDeviceToHost, copies_),
              "cudaMemcpyAsync (device to host)", what_.c_str());
  }
  copiedIn_.record(copies_, what_.c_str());
}

void StagedCopies::waitCopiedIn(std::chrono::milliseconds timeout) const {
  if (copiedIn_.waitFor(timeout, what_.c_str())) return;
  throw TimeoutError(strCat("ring: ", what_, ": the copy of its CUDA inputs into host memory "
                            "did not finish within ", timeout.count(),
                            " ms (the timeout): the GPU work queued before the call on the "
                            "caller's stream did not finish"));
}

std::exception_ptr StagedCopies::queueCopiesBack(const std::vector<HostCopy>& out) {
  try {
    for (const HostCopy& c : out) {
      if (c.bytes == 0) continue;
      checkCuda(cudaMemcpyAsync(c.device, c.host, c.bytes, cudaMemcpyHostToDevice, copies_),
                "cudaMemcpyAsync (host to device)", what_.c_str());
    }
    copiedBack_.record(copies_, what_.c_str());
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

void StagedCopies::finish(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    hostDone_ = true;
    error_ = std::move(error);
  }
  finished_.notify_all();
}

void StagedCopies::wait(cudaStream_t caller) {
  std::unique_lock<std::mutex> lock(mutex_);
  finished_.wait(lock, [&] { return hostDone_; });
  if (error_) std::rethrow_exception(error_);
  lock.unlock();
  blockStream(caller);
}

bool StagedCopies::waitFinished(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  return finished_.wait_for(lock, timeout, [&] { return hostDone_; });
}

void StagedCopies::blockStream(cudaStream_t caller) {
  // Under the lock: copiedBack_ is recorded by finish before hostDone_ is set.
  std::lock_guard<std::mutex> lock(mutex_);
  if (hostDone_) copiedBack_.block(caller, what_.c_str());
}

bool StagedCopies::isCompleted() {
  std::lock_guard<std::mutex> lock(mutex_);
  return hostDone_ && (error_ || copiedBack_.query(what_.c_str()));
}

std::exception_ptr StagedCopies::error() {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

}  // namespace ring
