#include "backend/cuda_work.h"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>

#include <thread>

#include "backend/work_outcome.h"
#include "common/errors.h"

namespace ring {

c10::intrusive_ptr<c10::ivalue::Future> cudaFuture(at::Device device) {
  return c10::make_intrusive<c10::ivalue::Future>(tensorListType(),
                                                  std::vector<c10::Device>{device});
}

CudaRingWork::CudaRingWork(c10d::OpType type, std::shared_ptr<CudaTask> task,
                           std::vector<at::Tensor> outputs, at::Device device, bool blockingWait,
                           c10::intrusive_ptr<c10::ivalue::Future> future,
                           uint64_t completionKey)
    : c10d::Work(task->rank(), type),
      task_(std::move(task)),
      outputs_(std::move(outputs)),
      device_(device),
      blockingWait_(blockingWait),
      future_(std::move(future)),
      completionKey_(completionKey) {
  // The task finishes on whichever thread learns the outcome first (the watchdog, or a caller
  // of isCompleted/wait); the Work's own state (wait, exception, isSuccess) follows it. Raw
  // `this`: the destructor drops the hook before the Work goes.
  task_->onFinish([this](std::exception_ptr error) {
    finish(error ? toTorchError(error) : nullptr);
    result_.settle(error);
  });
}

CudaRingWork::~CudaRingWork() {
  task_->dropFinishHook();
  // The task's end event may go with this Work, on whichever thread drops it: destroyed with
  // the work's device current (else the runtime makes a context on the thread's device).
  c10::cuda::CUDAGuard guard(device_);
  task_.reset();
}

bool CudaRingWork::isCompleted() {
  {
    c10::cuda::CUDAGuard guard(device_);  // the query is the device's (see streamWait)
    task_->poll();
  }
  // The Work's own state, not the task's: the task is marked finished under its lock a moment
  // before its hooks run on the finishing thread (the watchdog's, after it stopped the kernel),
  // and only the hook sets exception_. Reading the task's flag let a caller see "completed",
  // call wait() and get no error in that window.
  std::lock_guard<std::mutex> lock(mutex_);  // c10d::Work's state
  return completed_;
}

std::vector<at::Tensor> CudaRingWork::result() { return outputs_; }

void CudaRingWork::streamWait() {
  // The caller's current stream on the work's device waits for the kernel: later work on that
  // stream sees the outputs; the CPU does not block. With that device current: the default
  // stream's handle is null, which names the legacy stream of whichever device is current.
  c10::cuda::CUDAGuard guard(device_);
  cudaStream_t current = c10::cuda::getCurrentCUDAStream(device_.index()).stream();
  cudaError_t e = cudaStreamWaitEvent(current, task_->endEvent(), 0);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    C10_THROW_ERROR(DistBackendError, strCat("ring: ", task_->what(), " on rank ", task_->rank(),
                                             ": cudaStreamWaitEvent failed: ",
                                             cudaGetErrorString(e)));
  }
}

bool CudaRingWork::wait(std::chrono::milliseconds /*timeout*/) {
  {
    c10::cuda::CUDAGuard guard(device_);  // the query is the device's (see streamWait)
    task_->poll();
    if (blockingWait_) {
      // Bounded: the watchdog fails the task (and aborts the kernel) at the group timeout.
      while (!task_->finished()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        task_->poll();
      }
    }
  }
  // The task's error, not the Work's exception_: the finishing thread may not have run the
  // Work's hook yet (see isCompleted).
  if (std::exception_ptr error = task_->error()) std::rethrow_exception(toTorchError(error));
  streamWait();
  return true;
}

void CudaRingWork::synchronize() { streamWait(); }

c10::intrusive_ptr<c10::ivalue::Future> CudaRingWork::getFuture() { return future_; }

c10::intrusive_ptr<c10::ivalue::Future> CudaRingWork::getFutureResult() { return result_.get(); }

uint64_t CudaRingWork::getSequencenumber() const { return task_->seq(); }

float CudaRingWork::getDuration() const {
  TORCH_CHECK(task_->timed(), "ring: Work._get_duration on rank ", task_->rank(), ": ",
              task_->what(), " ran as a CUDA kernel with collective timing off; turn it on "
              "before the call (ProcessGroup._enable_collectives_timing(), as for NCCL)");
  const float ms = task_->kernelMilliseconds();
  TORCH_CHECK(ms >= 0.0f && task_->finished() && !task_->error(), "ring: Work._get_duration on "
              "rank ", task_->rank(), ": ", task_->what(), " has not completed successfully; its "
              "duration is known once its kernel has ended without an error");
  return ms;
}

}  // namespace ring
