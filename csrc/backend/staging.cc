#include "backend/staging.h"

#include <ATen/core/ivalue.h>
#include <ATen/cuda/CachingHostAllocator.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/util/Exception.h>

#include <mutex>

#include "backend/ring_options.h"
#include "backend/work_outcome.h"
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

HostCopy hostCopyOf(const at::Tensor& deviceTensor, const at::Tensor& host) {
  return HostCopy{deviceTensor.data_ptr(), host.data_ptr(),
                  static_cast<size_t>(deviceTensor.numel()) * deviceTensor.element_size()};
}

// Torch's pinned-memory allocator hands a block out again once its tensor is freed unless a
// stream still using it was recorded (what a non-blocking copy_ does for its own copies).
void keepPinnedUntilDone(const at::Tensor& host, const c10::cuda::CUDAStream& stream) {
  const c10::DataPtr& ptr = host.storage().data_ptr();
  at::getHostAllocator(at::kCUDA)->record_event(ptr.get(), ptr.get_context(), stream.unwrap());
}

}  // namespace

std::map<std::string, uint64_t> stagedCalls() {
  std::lock_guard<std::mutex> lock(gStagedMutex);
  return gStagedCalls;
}

// The device-side Work of a staged call: its ordering and completion are StagedCopies' (see
// executor/staged_copies.h); this adds torch's Future and the Work interface.
class StagedWork : public c10d::Work {
 public:
  StagedWork(int rank, c10d::OpType type, uint64_t seq, std::shared_ptr<StagedCopies> copies,
             std::vector<at::Tensor> outputs, at::Device device)
      : c10d::Work(rank, type),
        seq_(seq),
        copies_(std::move(copies)),
        outputs_(std::move(outputs)),
        device_(device),
        // With the device list: a Future without devices does no stream synchronization at
        // all for CUDA tensors.
        future_(c10::make_intrusive<c10::ivalue::Future>(
            tensorListType(), std::vector<c10::Device>{device})) {}

  // On the thread that ran the host call, once the copies back are queued (no error) or with
  // the error, the copy stream current and the device guarded. Once.
  void complete(std::exception_ptr error) {
    std::exception_ptr torchError = error ? toTorchError(error) : nullptr;
    if (torchError) {
      future_->setError(torchError);
    } else {
      // Records, on the current (= copy) stream, the events that future.wait() and .then()
      // callbacks make their streams wait on: after the copies back.
      future_->markCompleted(c10::IValue(outputs_));
    }
    // The future first: whoever returns from wait() may read the future's value at once.
    // Then the Work's exception_, before the copies say finished: isCompleted() is theirs, and
    // a caller who saw it true must find the error in exception().
    finish(torchError);
    result_.settle(error);
    copies_->finish(torchError);
  }

  void setSource(int source) { source_.store(source); }
  // The host call's key (StagedCall::useCompletionKey), set before the Work is handed out.
  void setCompletionKey(uint64_t key) { completionKey_ = key; }
#if RING_TORCH_AT_LEAST(2, 15)
  uint64_t getCompletionKey() const override { return completionKey_; }
#endif
  void setHostMilliseconds(float ms) { hostMs_.store(ms, std::memory_order_relaxed); }
  // The host part's time (RingWork::getDuration): the ring collective between the copies. The
  // copies in and back run on the copy stream and are not counted, as NCCL counts its kernel
  // only. Set before complete(), so known to whoever saw the Work completed.
  float getDuration() const override {
    const float ms = hostMs_.load(std::memory_order_relaxed);
    TORCH_CHECK(ms >= 0.0f && c10d::Work::isSuccess() && future_->completed(),
                "ring: Work._get_duration on rank ", rank_, ": ", c10d::opTypeToString(opType_),
                " (sequence ", seq_, ", staged through host memory) has not completed "
                "successfully; its duration is known once it has");
    return ms;
  }
  int sourceRank() const override {
    const int r = source_.load();
    TORCH_CHECK(r >= 0, "ring: sourceRank() is only defined for a completed recv from any source");
    return r;
  }

  ~StagedWork() override {
    // The copies' events may go with this Work, on whichever thread drops it.
    c10::cuda::CUDAGuard guard(device_.index());
    copies_.reset();
  }

  bool isCompleted() override {
    c10::cuda::CUDAGuard guard(device_.index());
    return copies_->isCompleted();
  }
  bool isSuccess() const override { return c10d::Work::isSuccess(); }
  std::exception_ptr exception() const override { return c10d::Work::exception(); }
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFutureResult() override { return result_.get(); }
  uint64_t getSequencenumber() const override { return seq_; }

  bool wait(std::chrono::milliseconds /*timeout*/) override {
    // Bounded: the host part ends within its own timeout (or at abort()).
    c10::cuda::CUDAGuard guard(device_.index());
    try {
      copies_->wait(c10::cuda::getCurrentCUDAStream(device_.index()).stream());
    } catch (...) {
      std::rethrow_exception(toTorchError(std::current_exception()));
    }
    return true;
  }
  void synchronize() override {
    // The caller's current stream waits for the copies back; the CPU does not block.
    c10::cuda::CUDAGuard guard(device_.index());
    copies_->blockStream(c10::cuda::getCurrentCUDAStream(device_.index()).stream());
  }

 private:
  const uint64_t seq_;
  std::shared_ptr<StagedCopies> copies_;
  std::vector<at::Tensor> outputs_;
  const at::Device device_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  WorkResultFuture result_;
  std::atomic<int> source_{-1};
  std::atomic<float> hostMs_{-1.0f};  // -1: the host part has not ended (or failed)
  uint64_t completionKey_ = 0;  // set once, before the Work is handed out
};

StagedCall::StagedCall(const char* collective, std::string what, c10d::OpType type, uint64_t seq,
                       int rank, DedicatedStream& stream, std::vector<at::Tensor> inputs,
                       std::vector<at::Tensor> outputs)
    : stream_(stream),
      device_(stream.device()),
      what_(what),
      copies_(std::make_shared<StagedCopies>(std::move(what), stream.raw())),
      outputs_(std::move(outputs)),
      inputs_(std::move(inputs)) {
  {
    std::lock_guard<std::mutex> lock(gStagedMutex);
    ++gStagedCalls[collective];
  }
  noteStaging();
  const c10::DeviceIndex device = stream.device();
  c10::cuda::CUDAGuard guard(device);
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
  std::vector<HostCopy> copiesIn;
  for (size_t o = 0; o < outputs_.size(); ++o) {
    at::Tensor host = pinnedLike(outputs_[o]);
    if (outputIsRead[o]) copiesIn.push_back(hostCopyOf(outputs_[o], host));
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
    copiesIn.push_back(hostCopyOf(inputs_[i], host));
    hostInputs_.push_back(host);
  }
  const c10::cuda::CUDAStream copyStream = stream.stream();
  try {
    copies_->copyIn(c10::cuda::getCurrentCUDAStream(device).stream(), copiesIn);
  } catch (...) {
    std::rethrow_exception(toTorchError(std::current_exception()));
  }
  // The caller may drop its tensors now: their memory is not reused before the copies on the
  // copy stream are done; nor is a pinned block, which torch's host allocator would otherwise
  // hand out again as soon as its tensor goes.
  for (const at::Tensor& t : inputs_) {
    c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), copyStream);
  }
  for (const at::Tensor& t : hostOutputs_) keepPinnedUntilDone(t, copyStream);
  for (const at::Tensor& t : hostInputs_) keepPinnedUntilDone(t, copyStream);
  work_ = c10::make_intrusive<StagedWork>(rank, type, seq, copies_, outputs_,
                                          at::Device(at::kCUDA, device));
}

StagedCall::~StagedCall() {
  // The last owner of the copies' events may be this call, on the thread that ran it.
  c10::cuda::CUDAGuard guard(device_);
  copies_.reset();
}

void StagedCall::waitCopiedIn(std::chrono::milliseconds timeout) const {
  // Run on whichever thread runs the host call: the events belong to the stream's device.
  c10::cuda::CUDAGuard guard(device_);
  copies_->waitCopiedIn(timeout);
}

bool StagedCall::waitCopiesBackQueued(std::chrono::milliseconds timeout) const {
  return copies_->waitFinished(timeout);
}

void StagedCall::finish(std::exception_ptr error, int source, float hostMs) {
  work_->setSource(source);
  if (!error) work_->setHostMilliseconds(hostMs);
  c10::cuda::CUDAGuard guard(device_);
  c10::cuda::CUDAStreamGuard onCopies(stream_.stream());
  std::vector<HostCopy> copiesBack;
  if (!error) {
    try {
      for (size_t o = 0; o < outputs_.size(); ++o) {
        copiesBack.push_back(hostCopyOf(outputs_[o], hostOutputs_[o]));
        // The caller may drop the output before the copy lands: keep its memory until then.
        c10::cuda::CUDACachingAllocator::recordStream(outputs_[o].storage().data_ptr(),
                                                      stream_.stream());
        keepPinnedUntilDone(hostOutputs_[o], stream_.stream());
      }
    } catch (...) {
      error = std::current_exception();
    }
  }
  if (!error) error = copies_->queueCopiesBack(copiesBack);
  work_->complete(error);
  // Nothing here is needed any more (the Work keeps the outputs for result()).
  inputs_.clear();
  outputs_.clear();
  hostInputs_.clear();
  hostOutputs_.clear();
}

c10::intrusive_ptr<c10d::Work> StagedCall::work() const { return work_; }

void StagedCall::useCompletionKey(uint64_t key) { work_->setCompletionKey(key); }

}  // namespace ring
