// The group's CUDA route: what RingBackend holds for its CUDA tensors, apart from the c10d
// overrides. The group's CUDA kernels (set up, collectively, on the first CUDA call of the
// kernel collectives or at init_process_group's eager connect), the streams the group's CUDA
// calls queue their GPU work on, the staged calls whose copies back are not queued yet, and
// what every CUDA collective does before it is issued. Only in builds with CUDA.
#pragma once

#include <ATen/ATen.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace ring {

struct CheckScope;      // backend/tensor_checks.h
class CudaCollectives;  // backend/cuda_collectives.h
class DedicatedStream;  // backend/cuda_sync.h
class StagedCall;       // backend/staging.h

class CudaRoute {
 public:
  // Builds the group's kernels on `device`, queuing their GPU work on `stream`; throws (a
  // c10 error naming the call) where set-up fails. Called at most once per set-up, with
  // the route's lock held.
  using MakeKernels = std::function<std::unique_ptr<CudaCollectives>(
      const CheckScope& s, const at::Device& device, DedicatedStream& stream)>;

  explicit CudaRoute(MakeKernels makeKernels);
  ~CudaRoute();
  CudaRoute(const CudaRoute&) = delete;
  CudaRoute& operator=(const CudaRoute&) = delete;

  // The group's kernels for CUDA tensor `t`, or null where the group stages CUDA tensors
  // through host memory instead. Sets them up on first use, on `bound` (the group's bound
  // device, init_process_group's device_id) where there is one, else on t's device. A tensor on
  // another device than the group's is a usage error.
  CudaCollectives* kernelsFor(const CheckScope& s, const at::Tensor& t,
                              std::optional<at::Device> bound);
  // Sets the kernels up on `device` now if not yet tried (init_process_group's eager connect).
  void setUp(const CheckScope& s, const at::Device& device);
  // Whether set-up has made the kernels (usable or not).
  bool setUpDone();

  // Before a CUDA collective is issued (any path): refuses it under CUDA graph capture (its
  // host part could never be captured, nor its counters replayed), and waits until every
  // earlier staged collective of the group has queued its copies back, so that the new call's
  // GPU work, queued behind them on the group's stream, reads their results. Bounded by
  // `timeout`. The group's CUDA collectives so run in issue order, whatever their paths, as
  // ProcessGroupNCCL's do on its one stream per device.
  void beforeCollective(const CheckScope& s, const at::Device& device,
                        std::chrono::milliseconds timeout);
  // A point-to-point call's refusal under capture (p2p calls are not ordered after the group's
  // collectives: they are ordered after the caller's stream, as NCCL's).
  void refuseGraphCapture(const CheckScope& s, const at::Device& device);
  // A staged call, until its copies back are queued (beforeCollective waits for it).
  void addStaged(std::shared_ptr<StagedCall> call);

  // The stream every CUDA collective of the group on `device` queues its GPU work on: the
  // kernels and the staged calls' copies alike, so that their order on the GPU is the order
  // they were issued in (created on first use).
  DedicatedStream& orderStream(const at::Device& device);
  // The stream point-to-point calls on `device` copy on.
  DedicatedStream& p2pStream(const at::Device& device);

  // Waits for the kernels' work in flight (bounded: the watchdog stops every kernel at its
  // timeout; a failure raises CommError).
  void waitIdle();
  // Times the kernels from now on (enableCollectivesTiming), these and any set up later.
  void timeKernels();
  // Frees the kernels (after their work in flight), the staged calls and the streams; no
  // set-up after it until allowSetUpAgain.
  void shutdown();
  // The kernels set up again on first use, over the group's new members (reconfigure).
  void allowSetUpAgain();

 private:
  using DeviceStreams = std::map<c10::DeviceIndex, std::unique_ptr<DedicatedStream>>;
  // Caller holds mutex_.
  void setUpLocked(const CheckScope& s, const at::Device& device);
  static DedicatedStream& streamOf(DeviceStreams& streams, const at::Device& device);

  const MakeKernels makeKernels_;
  std::mutex mutex_;
  bool tried_ = false;
  bool timed_ = false;
  DeviceStreams orderStreams_;
  DeviceStreams p2pStreams_;
  // Staged collectives whose copies back may not be queued yet (beforeCollective).
  std::mutex stagedMutex_;
  std::vector<std::shared_ptr<StagedCall>> stagedInFlight_;
  // Declared last: destroyed first, before the streams its work is queued on.
  std::unique_ptr<CudaCollectives> kernels_;
};

}  // namespace ring
