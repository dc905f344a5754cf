// The CUDA ring path of one group below torch: the links, the channel counters, a dedicated
// comm stream, one kernel launch per collective, a CudaTask per collective and the watchdog.
// Torch-free and written against the standard CUDA runtime API only, so the same source runs
// on a GPU under the backend (backend/cuda_collectives.h turns tensors and torch's streams into
// the raw pointers and cudaStream_t taken here) and in the C++ tests over an emulated runtime.
//
// Per collective, on the calling thread (one at a time: the counters and the comm stream's
// order are the group's):
//   1. refuse CUDA graph capture of the caller's stream (the kernels' counters advance on the
//      host at enqueue time, so a replayed graph would run with stale counters);
//   2. record an event on the caller's stream; the comm stream (non-blocking: it never waits
//      implicitly for the legacy default stream) waits on it, so the kernel starts after
//      everything the caller queued before the call (e.g. the kernel that produced the input);
//   3. launch the kernel on the comm stream (kernels/ring_launcher.h), then record the end
//      event;
//   4. hand the task to the watchdog, and run the caller's afterLaunch (the backend completes
//      its Future there, with the comm stream current).
// A launch that fails breaks the group at once: the peers wait for messages this rank will
// never send.
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "common/types.h"
#include "executor/cuda_group_state.h"
#include "executor/cuda_task.h"
#include "kernels/scale_factor.h"
#include "executor/cuda_watchdog.h"
#include "kernels/ring_launcher.h"
#include "transport/cuda_ipc/cuda_ring_links.h"
#include "transport/store.h"

namespace ring {

struct CudaEngineOptions {
  int rank = 0;
  int size = 1;
  std::string groupName = "default";
  // The group's timeout: bounds the close protocol's wait at shutdown (with kCloseWait).
  std::chrono::milliseconds timeout{std::chrono::minutes(30)};
  CudaLinkOptions links;  // device, geometry, whether the kernels may run, store waits
  // The stream the kernels run on, non-blocking and used by nothing else; the caller's, who
  // keeps it beyond the engine (torch may record events on it later: backend/cuda_sync.h).
  // Null: the engine creates one of its own and destroys it when it goes.
  cudaStream_t commStream = nullptr;
};

// The link options the environment asks for (TORCH_RING_CUDA_KERNELS, _CHANNELS, _SLOTS,
// _SLOT_BYTES; TORCH_RING_TRANSPORT=tcp declines the kernels) on `device`.
CudaLinkOptions cudaLinkOptionsFromEnv(int device, std::chrono::milliseconds timeout);

// One collective as the caller hands it over.
struct CudaCall {
  const char* collective = "";   // the flight recorder's name: "all_reduce"
  uint64_t seq = 0;              // the same on every rank
  std::chrono::milliseconds timeout{0};
  cudaStream_t caller = nullptr;  // the kernel starts after the work queued on it so far
  // torch's collective timing is on: the task times its kernel (CudaTask::kernelMilliseconds).
  bool timed = false;
  // Under the enqueue lock, right after the kernel and its end event are queued on `comm` and
  // the task is watched: what must be ordered on the comm stream right behind this kernel.
  std::function<void(cudaStream_t comm)> afterLaunch;
  // Once, when the collective's outcome is known (null error: it succeeded), on the thread that
  // learns it (the watchdog, or one polling the task), whether or not a Work still holds it.
  CudaTask::FinishHook onFinished;
};

class CudaRingEngine {
 public:
  // Collective over the group: sets up the links through `store` (a failure is reported to the
  // other ranks there first). Throws CommError if a peer never arrives, RingError on a refusal
  // that every rank makes (co-residency); links without a peer path leave usable() false.
  CudaRingEngine(Store& store, const CudaEngineOptions& opts, CudaGroupHooks hooks);
  // shutdown().
  ~CudaRingEngine();
  CudaRingEngine(const CudaRingEngine&) = delete;
  CudaRingEngine& operator=(const CudaRingEngine&) = delete;

  bool usable() const;
  const std::string& declineReason() const;
  int device() const { return opts_.links.device; }
  cudaStream_t commStream() const { return commStream_; }
  CudaGroupState& state() { return *state_; }

  // Only when usable(). Each throws CommError (a broken group, a failed launch: the group is
  // then broken), UsageError (graph capture: the bare reason) or RingError (ordering the comm
  // stream after the caller's failed); arguments are checked by the caller.
  std::shared_ptr<CudaTask> allReduce(const CudaCall& c, void* data, int64_t count, DType d,
                                      RedOp op, ScaleFactor factor);
  // input: size * countPerRank elements, not overlapping output.
  std::shared_ptr<CudaTask> reduceScatter(const CudaCall& c, const void* input, void* output,
                                          int64_t countPerRank, DType d, RedOp op,
                                          ScaleFactor factor);
  // input: countPerRank elements (may be block `rank` of output).
  std::shared_ptr<CudaTask> allGather(const CudaCall& c, const void* input, void* output,
                                      int64_t countPerRank, DType d);
  std::shared_ptr<CudaTask> broadcast(const CudaCall& c, void* data, int64_t count, DType d,
                                      int root);

  // Blocks the calling thread until every kernel enqueued so far has ended (bounded: the
  // watchdog stops each at its timeout); throws CommError if the group broke. For barrier.
  void waitIdle();
  // Throws CommError if the group is broken, aborted, or lost a rank.
  void checkHealth();

  // Collective: waits for the kernels in flight (each bounded by its timeout), stops the
  // watchdog, then closes the links together with the other ranks (unless the group broke:
  // the memory is then kept), and detaches the hooks. Idempotent.
  void shutdown();

  // How many collectives have run as ring kernels in this process: GPU tests check that the
  // calls they mean to run as kernels did.
  static uint64_t kernelCallCount();

 private:
  using Launch = std::function<std::string(cudaStream_t comm)>;
  std::shared_ptr<CudaTask> enqueue(const CudaCall& c, const Fingerprint& fp,
                                    const std::string& detail, const Launch& launch);

  const CudaEngineOptions opts_;
  Store& store_;  // the set-up's keys; outlives this object (the backend's shutdown order)
  std::shared_ptr<CudaGroupState> state_;

  std::mutex enqueueMutex_;
  ChannelCounters counters_{};
  cudaStream_t commStream_ = nullptr;
  bool ownsCommStream_ = false;
  cudaEvent_t ready_ = nullptr;  // recorded on the caller's stream, waited on by the comm stream
  std::unique_ptr<CudaWatchdog> watchdog_;
  bool shutDown_ = false;
};

}  // namespace ring
