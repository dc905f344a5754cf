#include "executor/cuda_watchdog.h"

#include <chrono>

#include "common/errors.h"
#include "common/logging.h"
#include "common/thread_name.h"

namespace ring {
namespace {

// How often the watchdog polls end events, and how often it asks the group for its health.
constexpr std::chrono::milliseconds kPollInterval{2};
constexpr std::chrono::milliseconds kHealthInterval{100};
// How long a stopping watchdog waits for kernels that were told to abort before it gives up on
// them (the inbox is then kept allocated: see CudaRingLinks::keepMemory).
constexpr std::chrono::seconds kAbortGrace{30};

}  // namespace

CudaWatchdog::CudaWatchdog(std::shared_ptr<CudaGroupState> state, int device,
                           std::string groupName)
    : state_(std::move(state)), device_(device), groupName_(std::move(groupName)) {
  thread_ = std::thread([this] {
    nameThisThread("ring-cuda-wdog");
    setThreadLogContext(state_->rank(), groupName_);
    // For the thread's whole life: every event query below then uses the group's device. This
    // thread is the group's alone, so there is nothing to give back (giving back the thread's
    // default device 0 at its end would itself make a context there: cudaSetDevice
    // initialises its device's primary context since CUDA 12.0; transport/cuda_ipc/
    // device_scope.h).
    const cudaError_t e = cudaSetDevice(device_);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      RING_LOG(kLogWarn, "the CUDA watchdog could not make cuda:", device_, " current (",
               cudaGetErrorString(e), "); it polls on the thread's default device");
    }
    loop();
  });
}

CudaWatchdog::~CudaWatchdog() { stop(); }

void CudaWatchdog::stop() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void CudaWatchdog::watch(std::shared_ptr<CudaTask> task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_.push_back(std::move(task));
  }
  cv_.notify_all();
}

void CudaWatchdog::waitIdle() {
  std::unique_lock<std::mutex> lock(mutex_);
  // The loop removes each task once its kernel ended, and fails it at its timeout first.
  cv_.wait(lock, [&] { return pending_.empty(); });
}

void CudaWatchdog::failAll(const std::vector<std::shared_ptr<CudaTask>>& tasks,
                           const std::string& reason) {
  state_->breakGroup(reason);
  for (const auto& t : tasks) {
    // A kernel that has ended already keeps its own outcome (poll reads it first).
    t->poll();
    t->fail(strCat("ring: ", t->what(), " on rank ", state_->rank(), " was stopped: ", reason));
  }
}

void CudaWatchdog::loop() {
  auto lastHealth = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point stopSince{};
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    if (pending_.empty()) {
      if (stopping_) return;
      // Nothing in flight: sleep until a collective is enqueued (or the engine goes).
      cv_.wait(lock, [&] { return stopping_ || !pending_.empty(); });
      continue;
    }
    // Kernels in flight: poll their end events every kPollInterval (a notify, e.g. a new
    // collective, only shortens one interval).
    cv_.wait_for(lock, kPollInterval);
    if (stopping_) {
      const auto now = std::chrono::steady_clock::now();
      if (stopSince == std::chrono::steady_clock::time_point{}) stopSince = now;
      if (!state_->brokenReason().empty() && now - stopSince > kAbortGrace) {
        RING_LOG(kLogWarn, pending_.size(), " CUDA ring kernel(s) did not "
                 "stop within ", kAbortGrace.count(), " s of being aborted; giving up on them");
        return;
      }
    }
    std::vector<std::shared_ptr<CudaTask>> tasks = pending_;
    lock.unlock();

    const auto now = std::chrono::steady_clock::now();
    if (now - lastHealth >= kHealthInterval) {
      lastHealth = now;
      try {
        state_->checkHealth();
      } catch (const std::exception& e) {
        // A peer failed, died or aborted, or this rank's abort() was called: stop our kernels.
        failAll(tasks, e.what());
      }
    }
    for (const auto& t : tasks) {
      if (t->poll() || t->finished()) continue;
      if (t->elapsed() > t->timeout()) {
        const std::string reason = strCat(
            "ring: ", t->what(), " on rank ", state_->rank(), " of ", state_->size(),
            " in group '", groupName_, "' timed out after ", t->elapsed().count(),
            " ms (the timeout is ", t->timeout().count(),
            " ms): its CUDA ring kernel did not finish. A peer may be stuck, slower, or running "
            "a different collective; TORCH_RING_DEBUG=INFO and the flight recorder show each "
            "rank's last collectives. The kernel was stopped and the group is broken.");
        // The group is broken (the abort word raised) before the task reports the timeout:
        // its error says the kernel was stopped, and a caller that reads it must find it so.
        state_->breakGroup(reason);
        t->fail(reason, /*timedOut=*/true);
        failAll(tasks, reason);
        break;
      }
    }

    lock.lock();
    const size_t before = pending_.size();
    std::vector<std::shared_ptr<CudaTask>> still;
    for (auto& t : pending_) {
      if (!t->poll()) still.push_back(std::move(t));
    }
    pending_.swap(still);
    if (pending_.size() != before) cv_.notify_all();  // waitIdle()
  }
}

}  // namespace ring
