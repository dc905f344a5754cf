// The c10d::Backend of "ring": the torch-facing front door. Each collective checks its
// arguments on the caller's thread (errors name the collective, the rank and what was
// expected), then asks route() once which of these paths it takes (or whether it is only priced,
// inside torch's time estimator, or held for the end of a coalescing block):
//   - CUDA tensors of all_reduce, reduce_scatter_tensor, all_gather_into_tensor and broadcast
//     on a group whose links all have peer memory: one CUDA ring kernel (cuda_collectives.h);
//   - CPU tensors: the group's worker runs the host ring over them (work_queue.h);
//   - other CUDA tensors: the same host call over pinned host copies (staging.h).
// Point-to-point operations go to their own progress engine (executor/p2p_engine.h).
// Defined in several files: ring_backend.cc (the route, and the collectives on whole tensors),
// ring_backend_lists.cc (the collectives over lists, the exchanges), ring_backend_cuda.cc (the
// CUDA kernels' construction; cuda_route.h holds the CUDA route), ring_backend_group.cc (life,
// coalescing, settings, split, merge and shrink), ring_backend_reconfigure.cc,
// ring_backend_estimate.cc (time_estimate.h holds the estimator's window) and
// ring_backend_p2p.cc
// (point-to-point).
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <functional>
#include <memory>
#include <mutex>

#include "backend/coalescing.h"
#include "backend/abort_hooks.h"
#include "backend/call_ends.h"
#include "backend/host_call.h"
#include "backend/ring_options.h"
#include "backend/time_estimate.h"
#include "backend/torch_store.h"
#include "backend/work_queue.h"
#include "executor/communicator.h"
#include "executor/flight_recorder.h"
#include "executor/p2p_engine.h"
#include "transport/setup_keys.h"

namespace ring {

struct CheckScope;        // backend/tensor_checks.h
class CudaCollectives;    // backend/cuda_collectives.h
#ifdef RING_WITH_CUDA
class CudaRoute;          // backend/cuda_route.h
class DedicatedStream;    // backend/cuda_sync.h
class StagedCall;         // backend/staging.h
#endif

class RingBackend : public c10d::Backend {
 public:
  RingBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
              std::chrono::milliseconds timeout, std::string groupName);
  // With options (init_process_group(pg_options=RingOptions(...)), new_group, split, shrink).
  RingBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
              c10::intrusive_ptr<RingOptions> options);
  ~RingBackend() override;

  const std::string getBackendName() const override { return "ring"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  // torch_ring_backend.inference_all_reduce: the all_reduce of one CPU tensor in place, as
  // allreduce() runs it (the same checks, sequence, plan and flight recorder entry), returning
  // once it is complete. Why: called from Python without torch.distributed's wrapper and
  // dispatch, which cost a small call more than the collective itself (docs/notes/latency_cpu.md);
  // what DeepSpeed's inference_all_reduce offers tensor-parallel inference.
  void allReduceNow(at::Tensor& tensor, const c10d::ReduceOp& op);
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  // Deprecated in torch (dist.all_gather_coalesced) but still callable: one output list per
  // RANK, each holding one tensor per input (torch's documented convention, as gloo checks).
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputLists, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
#if RING_TORCH_AT_LEAST(2, 14)
  // torch 2.14's names of the single-tensor collectives. Each runs this backend's own call
  // under the older name (still what torch 2.11-2.13 call), not torch's forwarding between
  // the two names (which guards against a backend that implements neither).
  c10::intrusive_ptr<c10d::Work> all_gather_single(at::Tensor& output, at::Tensor& input,
                                                   const c10d::AllgatherOptions& opts) override {
    return RingBackend::_allgather_base(output, input, opts);
  }
  c10::intrusive_ptr<c10d::Work> all_gather_single_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override {
    return RingBackend::allgather_into_tensor_coalesced(outputs, inputs, opts);
  }
  c10::intrusive_ptr<c10d::Work> reduce_scatter_single(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override {
    return RingBackend::_reduce_scatter_base(output, input, opts);
  }
  c10::intrusive_ptr<c10d::Work> reduce_scatter_single_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override {
    return RingBackend::reduce_scatter_tensor_coalesced(outputs, inputs, opts);
  }
  c10::intrusive_ptr<c10d::Work> all_to_all_single(at::Tensor& output, at::Tensor& input,
                                                   std::vector<int64_t>& outputSplits,
                                                   std::vector<int64_t>& inputSplits,
                                                   const c10d::AllToAllOptions& opts) override {
    return RingBackend::alltoall_base(output, input, outputSplits, inputSplits, opts);
  }
  // Every rank's input straight into the root's one output tensor (gather() fills a list).
  c10::intrusive_ptr<c10d::Work> gather_single(at::Tensor& output, at::Tensor& input,
                                               const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather_into_tensor(at::Tensor& output, at::Tensor& input,
                                                    const c10d::GatherOptions& opts) override {
    return RingBackend::gather_single(output, input, opts);
  }
#endif
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplits,
                                               std::vector<int64_t>& inputSplits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors,
                                               int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  // Coalescing (coalescing.h): the calls between start and end issued as one task.
  bool supportsCoalescing() const override { return true; }
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;

  // A new backend over some of this group's ranks: split (collective among `ranks`, which are
  // this group's ranks; nullptr on the others) and shrink (collective among the ranks that stay,
  // e.g. after one died: dist.shrink_group); or over ranks of several groups (merge). Each sets
  // up fresh links through a store.
  bool supportsSplitting() const override { return true; }
  c10::intrusive_ptr<c10d::Backend> split(const c10::intrusive_ptr<c10d::Store>& store,
                                          const std::vector<int>& ranks,
                                          const c10::intrusive_ptr<Options>& opts) override;
  // merge (ProcessGroup.merge_remote_group): this rank joins a new group of `size` ranks
  // gathered from several groups through `store`, as rank `rank` (torch numbers them in the
  // order they reach the store); collective among the ranks of the new group.
  c10::intrusive_ptr<c10d::Backend> merge(const c10::intrusive_ptr<c10d::Store>& store,
                                          const c10::intrusive_ptr<Options>& opts,
                                          const int& rank, const int& size) override;
  bool supportsShrinking() const override { return true; }
  c10::intrusive_ptr<c10d::Backend> shrink(const std::vector<int64_t>& ranksToExclude,
                                           int shrinkFlags,
                                           const c10::intrusive_ptr<Options>& optsOverride) override;

  // Settings and what torch reads back.
  void setTimeout(std::chrono::milliseconds timeout) override;
  c10d::ErrorType getError() override;
  c10::intrusive_ptr<Options> getBackendOptions() override;
  // Called on the worker (p2p: the engine thread) after each call with its timings.
  // dist.monitored_barrier: gloo's semantics over the group's store (backend/monitored_barrier.h).
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) override;
  void registerOnCompletionHook(std::function<void(std::shared_ptr<c10d::WorkInfo>)>&& hook) override;
  // Host calls are timed always (RingWork::getDuration); CUDA kernels from now on.
  void enableCollectivesTiming() override;
  void waitForPendingWorks() override;
  // init_process_group(device_id=cuda:N): sets up the CUDA ring now rather than on first use.
  void eagerConnectSingleDevice(at::Device device) override;

#ifdef C10D_BACKEND_HAS_RECONFIGURE
  // torch 2.14's fault-tolerance API (dist._reconfigure): the same group object over a new
  // membership, with fresh links (ring_backend_reconfigure.cc).
  bool supportsReconfigure() const override { return true; }
  c10d::ReconfigureHandle get_reconfigure_handle() const override;
  c10::intrusive_ptr<c10d::Work> reconfigure(const c10d::ReconfigureOptions& opts) override;
#endif

  // torch.distributed._time_estimator: between start and end, collectives move nothing and
  // complete at once, and their expected times (executor/call_estimate.h) add up; end returns
  // the sum in microseconds, as ProcessGroupNCCL's does (ring_backend_estimate.cc).
  bool supportsTimeEstimation() const override { return true; }
#if RING_TORCH_AT_LEAST(2, 15)
  void startTimeEstimate() override;  // torch 2.15 declares both on c10d::Backend
  float endTimeEstimate() override;
#else
  void startTimeEstimate();
  float endTimeEstimate();
#endif

#if RING_TORCH_AT_LEAST(2, 15)
  // torch 2.15's temporary timeout extension (ephemeral_timeouts.h), completion hooks and abort
  // hooks (abort_hooks.h).
  void addEphemeralTimeout(const std::chrono::milliseconds& timeout) override {
    ends_.ephemeral().add(timeout, seq_.load());
  }
  // Keyed completion hooks (call_ends.h): on the thread that learns of each successful call,
  // with its Work's getCompletionKey.
  bool supportsCompletionHooks() const override { return true; }
  void registerCompletionHook(int64_t id, c10d::CompletionHook hook) override {
    ends_.addKeyedHook(id, [hook = std::move(hook)](uint64_t key, std::optional<float> ms) {
      c10d::CompletionHookArgs args;
      args.completionKey = key;
      args.duration_ms = ms;
      hook(args);
    });
  }
  void unregisterCompletionHook(int64_t id) override { ends_.removeKeyedHook(id); }
  bool supportsAbortHooks() const override { return true; }
  void registerAbortHook(int64_t id, c10d::AbortHook hook) override {
    abortHooks_.add(id, std::move(hook));
  }
  void unregisterAbortHook(int64_t id) override { abortHooks_.remove(id); }
#endif

  void setSequenceNumberForGroup() override {}
  uint64_t getSequenceNumberForGroup() override { return seq_.load(); }
  void abort() override;
  void shutdown() override;

  const FlightRecorder& flightRecorder() const { return recorder_; }
  // The group as a flight-recorder dump names it: torch's uid (else the options' name), and
  // the job's ranks of its members.
  std::string dumpGroupUid() const;
  std::vector<int64_t> globalRanks() const;
  // Who this group's ranks waited for (executor/straggler_stats.h), over its last collectives.
  StragglerReport stragglerReport(double thresholdMs) const;
  const std::string& groupName() const { return groupName_; }

 private:
  // Puts this group's flight recorder and config in the process's dumps (backend/fr_dump.h),
  // until the destructor takes them out.
  void registerForDumps();
  // A call's timeout: its own if set, else the group's (setTimeout, or the constructor's).
  std::chrono::milliseconds effectiveTimeout(std::chrono::milliseconds t) const {
    return (t == c10d::kUnsetTimeout || t.count() <= 0 ? std::chrono::milliseconds(timeoutMs_.load())
                                                        : t) +
           ends_.ephemeral().extra();
  }
  // Links this rank to the group's others through `store` (collective), and the queue that runs
  // calls over them: the constructor's set-up, and reconfigure()'s for a new membership.
  void connect(const c10::intrusive_ptr<c10d::Store>& store, std::chrono::milliseconds timeout);
  // Ends this membership's calls and closes its links (shutdown, reconfigure).
  void disconnect();
  // Refuses a call before the group has members (enable_reconfigure=True, no reconfigure yet).
  // Inline: every call asks, and the answer is almost always yes (refuseUnconnected says no).
  void checkConnected(const CheckScope& s) const {
    if (!queue_) refuseUnconnected(s);
  }
  [[noreturn]] void refuseUnconnected(const CheckScope& s) const;
  // A call made while estimating: its expected time added up, a completed Work returned.
  c10::intrusive_ptr<c10d::Work> estimated(const HostCall& call);
  // After a failed call (CallEnds): the flight recorder's dump, once per process.
  void dumpAfterFailure();
  // Where a call goes: decided once per call by route(), before anything is queued, launched
  // or numbered, and read once (dispatch, or a kernel collective's one test for CudaKernel).
  // Why one decision: the estimator, the coalescing block, the kernel path and the staging
  // were each asked at several sites, and a staged call ran the CUDA checks twice.
  enum class Route : uint8_t {
    Priced,      // inside torch's time estimator: priced (estimated), nothing runs
    Held,        // inside a coalescing block: kept for the block's end (coalescing.h)
    Host,        // CPU tensors: the group's runner (work_queue.h)
    CudaKernel,  // CUDA tensors of a kernel collective, the group's kernels usable
    Staged,      // other CUDA tensors: the host ring over pinned copies (staging.h)
  };
  struct CallRoute {
    Route route;
    CudaCollectives* kernels = nullptr;  // CudaKernel's
  };
  // `cudaTensor`: a CUDA tensor of the call (the group's device is its), null where every
  // tensor is on the CPU. `kernelCollective`: one of the four collectives with a CUDA ring
  // kernel. Refuses a call on a group without members; for a CUDA call, first does what every
  // CUDA collective does before it is issued (CudaRoute::beforeCollective), and for a kernel
  // collective sets the kernels up on the group's first.
  CallRoute route(const CheckScope& s, const at::Tensor* cudaTensor, c10d::OpType type,
                  std::chrono::milliseconds timeout, bool kernelCollective);
  // Runs a host call where route() sent it (any route but CudaKernel).
  c10::intrusive_ptr<c10d::Work> dispatch(const CheckScope& s, CallRoute r, HostCall call);
  // route() then dispatch(): every collective without a CUDA ring kernel.
  c10::intrusive_ptr<c10d::Work> run(const CheckScope& s, HostCall call);
  // Announces a call to the peers as issued and hands it to the group's runner (work_queue.h).
  // `callerMayRun`: a host call on CPU tensors, which the runner may run on this thread.
  c10::intrusive_ptr<RingWork> push(const char* name, uint64_t seq, HostCall call,
                                    std::function<void(const CallInfo&)> beforeBody = nullptr,
                                    bool callerMayRun = false);
  // This group as torch's profiler names it (record_param_comms).
  CommProfileGroup profileGroup() const;
  // A Work of a call that runs at once: also covered by an open coalescing block's Work.
  c10::intrusive_ptr<c10d::Work> started(c10::intrusive_ptr<c10d::Work> work);
  P2PEngine& p2p();
  c10::intrusive_ptr<c10d::Work> pointToPoint(bool isSend, at::Tensor tensor, int peer, int tag,
                                              const char* name);
  // Blocks until the CUDA kernels enqueued so far have ended (barrier waits for all earlier work).
  void waitCudaWork();
  // Whether this group has run a collective on its CUDA kernels (then waitCudaWork may wait).
  bool cudaPathSetUp();
  // One ring all_reduce over the concatenation of `tensors`, written back into each: what
  // all_reduce_coalesced and a fused coalescing block run.
  void allReduceConcatenation(const CallInfo& c, const Tensors& tensors, const AllReduceKey& k);

  std::atomic<int64_t> timeoutMs_;
  std::string groupName_;
  c10::intrusive_ptr<c10d::Store> c10dStore_;  // the group's store as torch gave it (shrink)
  c10::intrusive_ptr<RingOptions> options_;
  std::atomic<uint64_t> monitoredBarriers_{0};
  std::atomic<int> shrinks_{0};
  // Who this process is across reconfigurations: its global rank when the group was made.
  int64_t stableRank_ = 0;
  // The uuid of the last reconfigure() (-1: none), which a reconfigure handle carries.
  int64_t reconfigureUuid_ = -1;
  // Why the last reconfigure() left the group without members (empty: it did not), which
  // every call refused afterwards names.
  std::string reconfigureFailure_;
  // Between startTimeEstimate and endTimeEstimate: calls are priced, not run.
  TimeEstimate estimate_;
  // Where every call reports its end (getError, the dump after a failure, the completion hook).
  // Declared before the runners that report to it (comm_, queue_, p2p_, cuda_), so it outlives them.
  AbortHooks abortHooks_;  // before ends_, whose failure callback runs them
  CallEnds ends_{[this] {
    abortHooks_.runOnce(rank_, groupName_, "after a failed call");
    dumpAfterFailure();
  }};
  // Released by shutdown() (guarded by commMutex_ from then on: abort() may race with it).
  mutable std::mutex commMutex_;
  std::unique_ptr<Communicator> comm_;
  FlightRecorder recorder_;  // sized from TORCH_FR_BUFFER_SIZE in the constructor
  std::atomic<uint64_t> seq_{0};
  std::shared_ptr<WorkQueue> queue_;
  Coalescer coalescer_;

  std::mutex p2pMutex_;
  std::unique_ptr<P2PEngine> p2p_;

  // This incarnation's view of the group's store (transport/setup_keys.h): the links
  // are set up through it, and so is the CUDA path on first use.
  std::unique_ptr<TorchStore> store_;
  std::unique_ptr<SetupKeys> setupKeys_;
#ifdef RING_WITH_CUDA
  // The group's kernels on `device`, over its communicator and store, queuing their work on
  // `stream`: CudaRoute's MakeKernels (cuda_route.h). Throws naming the call where set-up fails.
  std::unique_ptr<CudaCollectives> makeCudaKernels(const CheckScope& s, const at::Device& device,
                                                   DedicatedStream& stream);
  // A host call on CUDA tensors (Route::Staged): its copies in queued on the group's stream,
  // the host ring over pinned copies, its copies back queued when that ends.
  c10::intrusive_ptr<c10d::Work> runStaged(const CheckScope& s, HostCall call);
  // Copies a staged call's outputs back once its host part (hostWork) has ended.
  static void finishWhenDone(const c10::intrusive_ptr<RingWork>& hostWork,
                             const std::shared_ptr<StagedCall>& staged);
  // Declared last: destroyed first, while the communicator its kernels report to still exists.
  std::unique_ptr<CudaRoute> cuda_;
#endif
};

}  // namespace ring
