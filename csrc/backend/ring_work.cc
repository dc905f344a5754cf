#include "backend/ring_work.h"

#include <c10/util/Exception.h>

#include "common/errors.h"

namespace ring {

const c10::TypePtr& tensorListType() {
  // Made once: every collective creates a Work, and a new ListType for each would be an
  // allocation per call that says the same thing.
  static const c10::TypePtr type = c10::ListType::create(c10::TensorType::get());
  return type;
}

c10::intrusive_ptr<c10d::Work> completedWork(std::vector<at::Tensor> outputs) {
  auto future = c10::make_intrusive<c10::ivalue::Future>(tensorListType());
  future->markCompleted(c10::IValue(std::move(outputs)));
  return c10d::Work::create_from_future(future);
}

RingWork::RingWork(int rank, c10d::OpType type, uint64_t seq, std::vector<at::Tensor> outputs,
                   const char* profilingTitle,
                   const std::optional<std::vector<at::Tensor>>& inputs)
    : c10d::Work(rank, type, profilingTitle, inputs),
      seq_(seq),
      outputs_(std::move(outputs)) {}

bool RingWork::isCompleted() { return c10d::Work::isCompleted(); }

bool RingWork::wait(std::chrono::milliseconds timeout) {
  if (!c10d::Work::isCompleted()) {
    if (std::shared_ptr<CallRunner> runner = runner_.lock()) runner->waiting(*this, timeout);
  }
  return c10d::Work::wait(timeout);
}
bool RingWork::isSuccess() const { return c10d::Work::isSuccess(); }
std::exception_ptr RingWork::exception() const { return c10d::Work::exception(); }
std::vector<at::Tensor> RingWork::result() { return outputs_; }
c10::intrusive_ptr<c10::ivalue::Future> RingWork::getFuture() {
  std::lock_guard<std::mutex> lock(futureMutex_);
  if (!future_) {
    future_ = c10::make_intrusive<c10::ivalue::Future>(tensorListType());
    // No callback can be on a Future nobody has seen yet, so marking it under the lock runs
    // no user code here.
    if (settled_) settle(*future_, torchError_);
  }
  return future_;
}

c10::intrusive_ptr<c10::ivalue::Future> RingWork::getFutureResult() {
  std::lock_guard<std::mutex> lock(futureMutex_);
  if (!resultFuture_) {
    resultFuture_ = c10::make_intrusive<c10::ivalue::Future>(c10::IntType::get());
    if (settled_) resultFuture_->markCompleted(c10::IValue(workResult_));  // nobody waits yet
  }
  return resultFuture_;
}

void RingWork::settle(c10::ivalue::Future& f, const std::exception_ptr& torchError) {
  if (torchError) {
    f.setError(torchError);
  } else {
    f.markCompleted(c10::IValue(outputs_));
  }
}
uint64_t RingWork::getSequencenumber() const { return seq_; }

float RingWork::getDuration() const {
  const float ms = durationMs_.load(std::memory_order_acquire);
  TORCH_CHECK(ms >= 0.0f, "ring: Work._get_duration on rank ", rank_, ": ",
              c10d::opTypeToString(opType_), " (sequence ", seq_,
              ") has not run to its end yet; its duration is known once it has completed");
  return ms;
}
int RingWork::sourceRank() const {
  int r = sourceRank_.load();
  TORCH_CHECK(r >= 0, "ring: sourceRank() is only defined for a completed recv from any source");
  return r;
}

void RingWork::complete(std::exception_ptr error, int sourceRank) {
  sourceRank_.store(sourceRank);
  std::exception_ptr torchError = error ? toTorchError(error) : nullptr;
  c10::intrusive_ptr<c10::ivalue::Future> future;
  c10::intrusive_ptr<c10::ivalue::Future> resultFuture;
  const int64_t result = workResultOf(error);
  {
    std::lock_guard<std::mutex> lock(futureMutex_);
    settled_ = true;
    torchError_ = torchError;
    workResult_ = result;
    future = future_;  // null if nobody asked: getFuture() makes it completed
    resultFuture = resultFuture_;
  }
  if (resultFuture) resultFuture->markCompleted(c10::IValue(result));
  // The future first: whoever returns from wait() may read the future's value at once. Marked
  // outside the lock: its callbacks run here and may call getFuture() again.
  if (future) settle(*future, torchError);
  finish(torchError);  // wakes wait()
}

std::exception_ptr toTorchError(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const c10::Error&) {
    return std::current_exception();
  } catch (const CommError& e) {
    try {
      C10_THROW_ERROR(DistBackendError, e.what());
    } catch (...) {
      return std::current_exception();
    }
  } catch (const std::exception& e) {
    try {
      TORCH_CHECK(false, e.what());
    } catch (...) {
      return std::current_exception();
    }
  } catch (...) {
    return std::current_exception();
  }
  return error;
}

c10d::ErrorType errorTypeOf(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const TimeoutError&) {
    return c10d::ErrorType::TIMEOUT;
  } catch (const std::exception& e) {
    // The transports word a failure that came from elsewhere this way (shm_transport.cc,
    // tcp_connection_io.cc, the p2p engine): another rank reported it, exited, or left the group.
    const std::string text = e.what();
    for (const char* remote : {" reported: ", " has exited", "has already shut down"}) {
      if (text.find(remote) != std::string::npos) return c10d::ErrorType::REMOTE_ERROR;
    }
    return c10d::ErrorType::COMM_ERROR;
  } catch (...) {
    return c10d::ErrorType::COMM_ERROR;
  }
}

int64_t workResultOf(const std::exception_ptr& error) {
  if (!error) return static_cast<int64_t>(c10d::WorkResult::SUCCESS);
  return static_cast<int64_t>(errorTypeOf(error) == c10d::ErrorType::TIMEOUT
                                  ? c10d::WorkResult::TIMEOUT
                                  : c10d::WorkResult::COMM_ERROR);
}

c10::intrusive_ptr<c10::ivalue::Future> WorkResultFuture::get() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!future_) {
    future_ = c10::make_intrusive<c10::ivalue::Future>(c10::IntType::get());
    if (settled_) future_->markCompleted(c10::IValue(result_));  // nobody waits on it yet
  }
  return future_;
}

void WorkResultFuture::settleResult(int64_t workResult) {
  c10::intrusive_ptr<c10::ivalue::Future> future;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (settled_) return;
    settled_ = true;
    result_ = workResult;
    future = future_;
  }
  // Outside the lock: its callbacks run here.
  if (future) future->markCompleted(c10::IValue(result_));
}

}  // namespace ring
