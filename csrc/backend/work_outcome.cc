#include "backend/work_outcome.h"

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

int64_t failedWorkResultOf(const std::exception_ptr& error) {
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
