#include "backend/staging.h"

#include <ATen/core/ivalue.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/util/Exception.h>

#include <condition_variable>
#include <mutex>

#include "backend/ring_work.h"
#include "common/errors.h"
#include "common/logging.h"

namespace ring {
namespace {

std::mutex gStagedMutex;
std::map<std::string, uint64_t> gStagedCalls;

void noteStaging() {
  static std::once_flag once;
  std::call_once(once, [] {
    RING_LOG(kLogInfo, "some CUDA calls of this process are staged through pinned host memory "
                       "(the CUDA ring kernels cover all_reduce, reduce_scatter_tensor, "
                       "all_gather_into_tensor and broadcast on groups whose links all have a "
                       "peer-memory path)");
  });
}

bool sameBytes(const at::Tensor& a, const at::Tensor& b) {
  return a.data_ptr() == b.data_ptr() && a.numel() == b.numel() &&
         a.element_size() == b.element_size();
}

// Byte offset of `inner` inside `outer`, or -1 if it does not lie wholly inside.
int64_t offsetInside(const at::Tensor& inner, const at::Tensor& outer) {
  if (inner.numel() == 0 || outer.numel() == 0) return -1;
  const char* i = static_cast<const char*>(inner.data_ptr());
  const char* o = static_cast<const char*>(outer.data_ptr());
  const int64_t ib = inner.numel() * static_cast<int64_t>(inner.element_size());
  const int64_t ob = outer.numel() * static_cast<int64_t>(outer.element_size());
  if (i < o || i + ib > o + ob) return -1;
  return i - o;
}

at::Tensor pinnedLike(const at::Tensor& t) {
  return at::empty(t.sizes(), t.options().device(at::kCPU).pinned_memory(true));
}

}  // namespace

std::map<std::string, uint64_t> stagedCalls() {
  std::lock_guard<std::mutex> lock(gStagedMutex);
  return gStagedCalls;
}

// The device-side Work of a staged call (see staging.h for its semantics).
class StagedWork : public c10d::Work {
 public:
  StagedWork(int rank, c10d::OpType type, uint64_t seq, std::string what,
             std::vector<at::Tensor> outputs, at::Device device)
      : c10d::Work(rank, type),
        seq_(seq),
        what_(std::move(what)),
        outputs_(std::move(outputs)),
        device_(device),
        // With the device list: a Future without devices does no stream synchronization at
        // all for CUDA tensors.
        future_(c10::make_intrusive<c10::ivalue::Future>(
            tensorListType(), std::vector<c10::Device>{device})) {}

  // On the thread that ran the host call, with the dedicated stream current and the copies
  // back queued on it (success), or with the error.
  void complete(std::exception_ptr error) {
    std::exception_ptr torchError = error ? toTorchError(error) : nullptr;
    if (torchError) {
      future_->setError(torchError);
    } else {
      // Records, on the current (= dedicated) stream, the events that future.wait() and
      // .then() callbacks make their streams wait on: after the copies back.
      future_->markCompleted(c10::IValue(outputs_));
    }
    {
      std::lock_guard<std::mutex> lock(doneMutex_);
      hostDone_ = true;
      hostError_ = torchError;
    }
    doneCv_.notify_all();
    finish(torchError);
  }

  StreamEvent& copiedBack() { return copiedBack_; }
  void setSource(int source) { source_.store(source); }
  int sourceRank() const override {
    const int r = source_.load();
    TORCH_CHECK(r >= 0, "ring: sourceRank() is only defined for a completed recv from any source");
    return r;
  }

  bool isCompleted() override {
    std::lock_guard<std::mutex> lock(doneMutex_);
    return hostDone_ && (hostError_ || copiedBack_.query());
  }
  bool isSuccess() const override { return c10d::Work::isSuccess(); }
  std::exception_ptr exception() const override { return c10d::Work::exception(); }
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  uint64_t getSequencenumber() const override { return seq_; }

  bool wait(std::chrono::milliseconds /*timeout*/) override {
    // Bounded: the host part ends within its own timeout (or at abort()).
    std::unique_lock<std::mutex> lock(doneMutex_);
    doneCv_.wait(lock, [&] { return hostDone_; });
    if (hostError_) std::rethrow_exception(hostError_);
    lock.unlock();
    synchronize();
    return true;
  }
  void synchronize() override {
    // The caller's current stream waits for the copies back; the CPU does not block.
    copiedBack_.block(c10::cuda::getCurrentCUDAStream(device_.index()), what_.c_str());
  }

 private:
  const uint64_t seq_;
  const std::string what_;
  std::vector<at::Tensor> outputs_;
  const at::Device device_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  StreamEvent copiedBack_;
  std::mutex doneMutex_;
  std::condition_variable doneCv_;
  bool hostDone_ = false;
  std::exception_ptr hostError_;
  std::atomic<int> source_{-1};
};

StagedCall::StagedCall(const char* collective, std::string what, c10d::OpType type, uint64_t seq,
                       int rank, DedicatedStream& stream, std::vector<at::Tensor> inputs,
                       std::vector<at::Tensor> outputs)
    : what_(std::move(what)), stream_(stream), outputs_(std::move(outputs)), inputs_(std::move(inputs)) {
  {
    std::lock_guard<std::mutex> lock(gStagedMutex);
    ++gStagedCalls[collective];
  }
  noteStaging();
  const c10::DeviceIndex device = stream.device();
  c10::cuda::CUDAGuard guard(device);
  const c10::cuda::CUDAStream copies = stream.stream();
  {
    // The copies start after everything the caller queued before this call (e.g. the kernel
    // that produced the input).
    StreamEvent callerReady;
    callerReady.record(c10::cuda::getCurrentCUDAStream(device), what_.c_str());
    callerReady.block(copies, what_.c_str());
  }
  c10::cuda::CUDAStreamGuard onCopies(copies);
  // Outputs first: an input that is (a view into) an output becomes the same view of the
  // output's host copy, and that output's contents are copied in.
  std::vector<bool> outputIsRead(outputs_.size(), false);
  std::vector<int> aliasOf(inputs_.size(), -1);
  std::vector<int64_t> aliasOffset(inputs_.size(), 0);
  for (size_t i = 0; i < inputs_.size(); ++i) {
    for (size_t o = 0; o < outputs_.size(); ++o) {
      const int64_t off = sameBytes(inputs_[i], outputs_[o]) ? 0 : offsetInside(inputs_[i], outputs_[o]);
      if (off < 0) continue;
      aliasOf[i] = static_cast<int>(o);
      aliasOffset[i] = off;
      outputIsRead[o] = true;
      break;
    }
  }
  for (size_t o = 0; o < outputs_.size(); ++o) {
    at::Tensor host = pinnedLike(outputs_[o]);
    // Non-blocking from/to pinned memory: torch's host allocator keeps the block until the copy
    // is done, even if the tensor is dropped earlier.
    if (outputIsRead[o]) host.copy_(outputs_[o], /*non_blocking=*/true);
    hostOutputs_.push_back(host);
  }
  for (size_t i = 0; i < inputs_.size(); ++i) {
    if (aliasOf[i] >= 0) {
      const at::Tensor& host = hostOutputs_[static_cast<size_t>(aliasOf[i])];
      const int64_t es = static_cast<int64_t>(host.element_size());
      hostInputs_.push_back(host.view({-1})
                                .narrow(0, aliasOffset[i] / es, inputs_[i].numel())
                                .view(inputs_[i].sizes()));
      continue;
    }
    at::Tensor host = pinnedLike(inputs_[i]);
    host.copy_(inputs_[i], /*non_blocking=*/true);
    hostInputs_.push_back(host);
  }
  copiedIn_.record(copies, what_.c_str());
  // The caller may drop its tensors now: their memory is not reused before the copies on the
  // dedicated stream are done.
  for (const at::Tensor& t : inputs_) {
    c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), copies);
  }
  work_ = c10::make_intrusive<StagedWork>(rank, type, seq, what_, outputs_,
                                          at::Device(at::kCUDA, device));
}

StagedCall::~StagedCall() = default;

void StagedCall::waitCopiedIn(std::chrono::milliseconds timeout) const {
  if (copiedIn_.waitFor(timeout)) return;
  throw TimeoutError(strCat("ring: ", what_, ": the copy of its CUDA inputs into host memory "
                            "did not finish within ", timeout.count(),
                            " ms (the timeout): the GPU work queued before the call on the "
                            "caller's stream did not finish"));
}

void StagedCall::finish(std::exception_ptr error, int source) {
  work_->setSource(source);
  if (!error) {
    try {
      c10::cuda::CUDAGuard guard(stream_.device());
      c10::cuda::CUDAStreamGuard onCopies(stream_.stream());
      for (size_t o = 0; o < outputs_.size(); ++o) {
        outputs_[o].copy_(hostOutputs_[o], /*non_blocking=*/true);
        // The caller may drop the output before the copy lands: keep its memory until then.
        c10::cuda::CUDACachingAllocator::recordStream(outputs_[o].storage().data_ptr(),
                                                      stream_.stream());
      }
      work_->copiedBack().record(stream_.stream(), what_.c_str());
      work_->complete(nullptr);
    } catch (...) {
      work_->complete(std::current_exception());
    }
  } else {
    work_->complete(error);
  }
  // Nothing here is needed any more (the Work keeps the outputs for result()).
  inputs_.clear();
  outputs_.clear();
  hostInputs_.clear();
  hostOutputs_.clear();
}

c10::intrusive_ptr<c10d::Work> StagedCall::work() const { return work_; }

}  // namespace ring
