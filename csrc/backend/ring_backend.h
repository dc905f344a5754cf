// The c10d::Backend of "ring": validates arguments on the caller's thread, then runs each
// collective, in issue order, on one worker thread per group over the core Communicator.
// Point-to-point operations go to their own progress engine (executor/p2p_engine.h).
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "backend/ring_work.h"
#include "backend/store_adapter.h"
#include "executor/communicator.h"
#include "executor/flight_recorder.h"
#include "executor/p2p_engine.h"
#include "transport/group_rendezvous.h"

namespace ring {

#ifdef RING_WITH_CUDA
class CudaCollectives;  // backend/cuda_glue.h
struct CheckScope;      // backend/tensor_checks.h
#endif

class RingBackend : public c10d::Backend {
 public:
  RingBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
              std::chrono::milliseconds timeout, std::string groupName);
  ~RingBackend() override;

  const std::string getBackendName() const override { return "ring"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
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
  // Deprecated in torch (dist.all_gather_coalesced) but still callable: one list per input.
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputLists, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
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

  void setSequenceNumberForGroup() override {}
  uint64_t getSequenceNumberForGroup() override { return seq_.load(); }
  void abort() override;
  void shutdown() override;

  const FlightRecorder& flightRecorder() const { return recorder_; }
  const std::string& groupName() const { return groupName_; }

 private:
  using Body = std::function<void(const CallInfo&)>;
  struct Task {
    c10::intrusive_ptr<RingWork> work;
    CallInfo call;
    uint64_t recordId;
    std::string name;
    Body body;
  };

  // Queues `body` for the worker and returns its Work (completed with `outputs`).
  c10::intrusive_ptr<c10d::Work> enqueue(c10d::OpType type, const char* name, std::string detail,
                                         std::vector<at::Tensor> outputs,
                                         std::chrono::milliseconds timeout, Body body);
  std::chrono::milliseconds effectiveTimeout(std::chrono::milliseconds t) const;
  void workerLoop();
  P2PEngine& p2p();
  c10::intrusive_ptr<c10d::Work> pointToPoint(bool isSend, at::Tensor tensor, int peer, int tag,
                                              const char* name);

  std::chrono::milliseconds timeout_;
  std::string groupName_;
  // Released by shutdown() (guarded by commMutex_ from then on: abort() may race with it).
  std::mutex commMutex_;
  std::unique_ptr<Communicator> comm_;
  FlightRecorder recorder_;
  std::atomic<uint64_t> seq_{0};

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Task> queue_;
  bool stopping_ = false;
  std::thread worker_;

  std::mutex p2pMutex_;
  std::unique_ptr<P2PEngine> p2p_;

  // CUDA tensors of all_reduce, reduce_scatter_tensor, all_gather_into_tensor and broadcast run
  // on the CUDA ring kernels (backend/cuda_glue.h) when every link has a peer path.
  // This incarnation's view of the group's store (transport/group_rendezvous.h): the links
  // are set up through it, and so is the CUDA path on first use.
  std::unique_ptr<StoreRendezvous> store_;
  std::unique_ptr<GroupRendezvous> rendezvous_;
#ifdef RING_WITH_CUDA
  // The kernel path for tensor `t`, set up (collectively) on the first CUDA collective; null
  // when the group stages CUDA tensors through host memory instead. Throws a usage error if `t`
  // is on another device than the one the group is bound to.
  CudaCollectives* cudaPath(const CheckScope& s, const at::Tensor& t);
  std::mutex cudaMutex_;
  bool cudaTried_ = false;
  // Declared last: destroyed first, while the communicator it reports to still exists.
  std::unique_ptr<CudaCollectives> cuda_;
#endif
  // Blocks until the CUDA kernels enqueued so far have ended (barrier waits for all earlier work).
  void waitCudaWork();
};

}  // namespace ring
