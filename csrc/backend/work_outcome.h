// How a call's outcome reaches torch, for every Work of this backend (the host calls' RingWork,
// the CUDA and staged Works): core-library errors as torch's exception types, the kind of a
// failure (Backend::getError, Work.get_future_result), and the futures' value type.
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <vector>

namespace ring {

// List[Tensor]: the value type of every future this backend completes.
const c10::TypePtr& tensorListType();

// A Work that has already succeeded with `outputs`: the answer of a call that runs nothing
// (a reconfigure, which completes before it returns; a call priced by the time estimator).
c10::intrusive_ptr<c10d::Work> completedWork(std::vector<at::Tensor> outputs);

// Converts a core-library error into the exception type torch users know: communication
// failures become DistBackendError, everything else RuntimeError.
std::exception_ptr toTorchError(std::exception_ptr error);

// What Backend::getError reports for a failure: TIMEOUT for a wait that ran out, REMOTE_ERROR
// when another rank's failure or exit broke the group, COMM_ERROR otherwise.
c10d::ErrorType errorTypeOf(const std::exception_ptr& error);

// What Work.get_future_result() holds for a call that ended with `error` (a core-library error,
// or null): c10d::WorkResult SUCCESS, TIMEOUT or COMM_ERROR, as an int.
// Inline: every call asks, and a success needs no look at the error.
int64_t failedWorkResultOf(const std::exception_ptr& error);
inline int64_t workResultOf(const std::exception_ptr& error) {
  return error ? failedWorkResultOf(error) : static_cast<int64_t>(c10d::WorkResult::SUCCESS);
}

// The get_future_result() Future of a Work that has no lock of its own to share (the CUDA and
// staged Works): made on the first ask, completed once the outcome is known, whichever first.
class WorkResultFuture {
 public:
  c10::intrusive_ptr<c10::ivalue::Future> get();
  // Once: the first call decides, later ones are ignored.
  void settle(const std::exception_ptr& error) { settleResult(workResultOf(error)); }
  void settleResult(int64_t workResult);

 private:
  std::mutex mutex_;
  bool settled_ = false;
  int64_t result_ = 0;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// A key no other Work of this process has had: what getCompletionKey answers (torch 2.15) and
// the completion hooks report. Not the Work's address: a hook may learn of a call after its
// Work is gone, when the address may already belong to a new one. Inline: every Work takes one.
inline uint64_t nextCompletionKey() {
  // Relaxed: a key only has to differ from every other, not to order anything. One counter in
  // the process: an inline function's static is one object however many files call it.
  static std::atomic<uint64_t> last{0};
  return last.fetch_add(1, std::memory_order_relaxed) + 1;
}

}  // namespace ring
