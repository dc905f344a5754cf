#include "backend/ring_backend.h"

#include <c10/util/Exception.h>

#include <numeric>

#include "backend/store_adapter.h"
#include "backend/tensor_checks.h"
#include "common/errors.h"
#include "common/logging.h"
#include "common/thread_name.h"
#ifdef RING_WITH_CUDA
#include "backend/cuda_glue.h"
#endif

namespace ring {

// ---- construction, worker ----------------------------------------------------------------------

RingBackend::RingBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                         std::chrono::milliseconds timeout, std::string groupName)
    : c10d::Backend(rank, size), timeout_(timeout) {
  CommOptions opts;
  opts.timeout = timeout;
  opts.groupName = groupName;
  groupName_ = std::move(groupName);
  try {
    store_ = std::make_unique<StoreRendezvous>(store);
    rendezvous_ = std::make_unique<GroupRendezvous>(*store_, rank, size);
    try {
      RING_LOG(kLogInfo, "group '", opts.groupName, "' rank ", rank, ": set-up number ",
               rendezvous_->incarnation(), " of this group on its store");
      comm_ = std::make_unique<Communicator>(*rendezvous_, rank, size, opts);
    } catch (const std::exception& e) {
      reportSetupFailure(*rendezvous_, rank, e.what());
      throw;
    }
  } catch (const CommError& e) {
    C10_THROW_ERROR(DistBackendError, e.what());
  } catch (const RingError& e) {
    TORCH_CHECK(false, e.what());
  }
  worker_ = std::thread([this] {
    nameThisThread("ring-worker");
    workerLoop();
  });
}

RingBackend::~RingBackend() {
  shutdown();
}

void RingBackend::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ && !worker_.joinable()) return;
    stopping_ = true;
  }
  wake_.notify_all();
  // Queued collectives still run (each bounded by its timeout) so that their Works complete.
  if (worker_.joinable()) worker_.join();
  std::lock_guard<std::mutex> lock(p2pMutex_);
  p2p_.reset();
#ifdef RING_WITH_CUDA
  // Waits for kernels in flight (each bounded by its timeout), then frees the CUDA state.
  {
    std::lock_guard<std::mutex> cudaLock(cudaMutex_);
    cuda_.reset();
    cudaTried_ = true;  // no CUDA set-up after shutdown: collectives now fail in enqueue()
  }
#endif
  // The rest goes now rather than with the last reference to the group (Python code often
  // keeps a subgroup object around): the links with their threads, sockets and shared memory,
  // and the store, whose TCPStore server would otherwise outlive destroy_process_group().
  std::lock_guard<std::mutex> commLock(commMutex_);
  comm_.reset();
  rendezvous_.reset();
  store_.reset();
}

void RingBackend::abort() {
  {
    std::lock_guard<std::mutex> lock(commMutex_);
    if (comm_) comm_->abort("abort() was called on this rank");
  }
  std::deque<Task> dropped;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    dropped.swap(queue_);
  }
  for (Task& t : dropped) {
    auto error = std::make_exception_ptr(CommError(strCat(
        "ring: ", t.name, " (sequence ", t.call.seq, ") on rank ", rank_,
        " was aborted before it started")));
    recorder_.markEnded(t.recordId, "aborted");
    t.work->complete(error);
  }
  std::lock_guard<std::mutex> lock(p2pMutex_);
  if (p2p_) p2p_->failAll(strCat("ring: rank ", rank_, " aborted the group"));
}

std::chrono::milliseconds RingBackend::effectiveTimeout(std::chrono::milliseconds t) const {
  return t == c10d::kUnsetTimeout || t.count() <= 0 ? timeout_ : t;
}

c10::intrusive_ptr<c10d::Work> RingBackend::enqueue(c10d::OpType type, const char* name,
                                                    std::string detail,
                                                    std::vector<at::Tensor> outputs,
                                                    std::chrono::milliseconds timeout, Body body) {
  Task task;
  task.call.seq = seq_++;
  task.call.timeout = effectiveTimeout(timeout);
  task.work = c10::make_intrusive<RingWork>(rank_, type, task.call.seq, std::move(outputs));
  task.recordId = recorder_.recordQueued(task.call.seq, name, std::move(detail));
  task.name = name;
  task.body = std::move(body);
  auto work = task.work;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    TORCH_CHECK(!stopping_, "ring: ", name, " on rank ", rank_,
                " was called after the process group was shut down (destroy_process_group)");
    queue_.push_back(std::move(task));
  }
  wake_.notify_one();
  return work;
}

void RingBackend::workerLoop() {
  while (true) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left to run
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    recorder_.markStarted(task.recordId);
    auto start = Clock::now();
    std::exception_ptr error;
    try {
      task.body(task.call);
    } catch (...) {
      error = std::current_exception();
    }
    double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    std::string what;
    if (error) {
      try {
        std::rethrow_exception(error);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
        what = "unknown error";
      }
      RING_LOG(kLogWarn, "rank ", rank_, " group '", groupName_, "': ", task.name,
               " (sequence ", task.call.seq, ") failed after ", ms, " ms: ", what,
               "\nlast collectives of this group on this rank:\n", recorder_.dump());
    } else {
      RING_LOG(kLogTrace, "rank ", rank_, " group '", groupName_, "': ", task.name,
               " (sequence ", task.call.seq, ") took ", ms, " ms");
    }
    recorder_.markEnded(task.recordId, what);
    task.work->complete(error);
  }
}

// ---- CUDA tensors: staged through host memory --------------------------------------------------
//
// The CUDA ring kernels (backend/cuda_glue.h) run all_reduce, reduce_scatter_tensor,
// all_gather_into_tensor and broadcast when every link of the group has a peer-memory path.
// Everything else with CUDA tensors - the other collectives, point-to-point, and groups whose
// ranks span hosts (their links are TCP) - is staged: copied into pinned host memory, run by
// the host ring, and copied back, all before the call returns (so async_op=True gives a
// completed Work). Logged once at INFO so that it is never silent.

namespace {

bool anyCuda(const std::vector<at::Tensor>& v) {
  for (const auto& t : v) {
    if (t.defined() && t.is_cuda()) return true;
  }
  return false;
}

// A host copy of `t`. Pinned when `t` is on a GPU: the device copies straight into it by DMA
// rather than through a driver bounce buffer, and torch's caching host allocator hands the same
// blocks back on the next call, so steady-state staging allocates nothing.
at::Tensor stagingCopy(const at::Tensor& t) {
  if (!t.defined()) return t;
  at::Tensor host =
      at::empty(t.sizes(), t.options().device(at::kCPU).pinned_memory(t.is_cuda()));
  host.copy_(t);
  return host;
}

std::vector<at::Tensor> toHost(const std::vector<at::Tensor>& v) {
  std::vector<at::Tensor> out;
  out.reserve(v.size());
  for (const auto& t : v) out.push_back(stagingCopy(t));
  return out;
}

std::vector<std::vector<at::Tensor>> toHost(const std::vector<std::vector<at::Tensor>>& v) {
  std::vector<std::vector<at::Tensor>> out;
  for (const auto& inner : v) out.push_back(toHost(inner));
  return out;
}

void copyBack(std::vector<at::Tensor>& device, const std::vector<at::Tensor>& host) {
  for (size_t i = 0; i < device.size(); ++i) device[i].copy_(host[i]);
}

void noteStaging() {
  static std::once_flag once;
  std::call_once(once, [] {
    RING_LOG(kLogInfo, "some CUDA collectives of this process are staged through pinned host "
                       "memory (the CUDA ring kernels cover all_reduce, reduce_scatter_tensor, "
                       "all_gather_into_tensor and broadcast on groups whose links all have a "
                       "peer-memory path)");
  });
}

c10::intrusive_ptr<c10d::Work> completedWork(int rank, c10d::OpType type,
                                             std::vector<at::Tensor> outputs,
                                             const c10::intrusive_ptr<c10d::Work>& hostWork) {
  auto work = c10::make_intrusive<RingWork>(rank, type, hostWork->getSequencenumber(),
                                            std::move(outputs));
  work->complete(nullptr);
  return work;
}

// The end of every staged call: waits for the host collective, copies the host outputs back
// into the device ones, and returns a completed Work that carries the device outputs.
c10::intrusive_ptr<c10d::Work> finishStaged(int rank, c10d::OpType type,
                                            const c10::intrusive_ptr<c10d::Work>& hostWork,
                                            std::vector<at::Tensor> device,
                                            const std::vector<at::Tensor>& host) {
  hostWork->wait();
  copyBack(device, host);
  return completedWork(rank, type, std::move(device), hostWork);
}

// "1000 x float32": this project's dtype names, as in every other message.
std::string countDetail(int64_t count, at::ScalarType t) {
  CheckScope scope{"flight recorder", -1, 0};
  return strCat(count, " x ", dtypeName(toRingDType(scope, t)));
}

// Raw pointer of a tensor's first element, as bytes.
char* bytesOf(const at::Tensor& t) { return static_cast<char*>(t.data_ptr()); }

}  // namespace

// ---- collectives -------------------------------------------------------------------------------

c10::intrusive_ptr<c10d::Work> RingBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                      const c10d::AllreduceOptions& opts) {
  CheckScope s{"all_reduce", rank_, size_};
  checkSingle(s, tensors, "input");
  double factor = 1.0;
  RedOp op = toRingOp(s, opts.reduceOp, tensors[0].scalar_type(), &factor);
  if (anyCuda(tensors)) {
#ifdef RING_WITH_CUDA
    if (CudaCollectives* cuda = cudaPath(s, tensors[0])) {
      return cuda->allReduce(s, tensors[0], toRingDType(s, tensors[0].scalar_type()), op, factor,
                             seq_++, effectiveTimeout(opts.timeout));
    }
#endif
    noteStaging();
    auto host = toHost(tensors);
    auto w = allreduce(host, opts);
    return finishStaged(rank_, c10d::OpType::ALLREDUCE, w, tensors, host);
  }
  at::Tensor t = tensors[0];
  DType d = toRingDType(s, t.scalar_type());
  return enqueue(c10d::OpType::ALLREDUCE, s.collective,
                 strCat(countDetail(t.numel(), t.scalar_type()), ", op ", redOpName(op)), {t},
                 opts.timeout, [this, t, d, op, factor](const CallInfo& c) {
                   comm_->allReduce(t.data_ptr(), t.numel(), d, op, factor, c);
                 });
}

c10::intrusive_ptr<c10d::Work> RingBackend::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  CheckScope s{"all_reduce_coalesced", rank_, size_};
  if (tensors.empty()) failUsage(s, "expected at least one tensor");
  for (size_t i = 0; i < tensors.size(); ++i) {
    checkTensor(s, tensors[i], strCat("tensor ", i));
    checkSameDType(s, tensors[0], tensors[i], strCat("tensor ", i));
    checkSameDevice(s, tensors[0], tensors[i]);
  }
  double factor = 1.0;
  RedOp op = toRingOp(s, opts.reduceOp, tensors[0].scalar_type(), &factor);
  if (anyCuda(tensors)) {
    noteStaging();
    auto host = toHost(tensors);
    auto w = allreduce_coalesced(host, opts);
    return finishStaged(rank_, c10d::OpType::ALLREDUCE_COALESCED, w, tensors, host);
  }
  // One ring pass over the concatenation: many small tensors cost one latency, not many.
  std::vector<at::Tensor> flat;
  for (const auto& t : tensors) flat.push_back(t.reshape({-1}));
  DType d = toRingDType(s, tensors[0].scalar_type());
  std::vector<at::Tensor> outs = tensors;
  return enqueue(c10d::OpType::ALLREDUCE_COALESCED, s.collective,
                 strCat(tensors.size(), " tensors, op ", redOpName(op)), outs, opts.timeout,
                 [this, outs, flat, d, op, factor](const CallInfo& c) {
                   at::Tensor buffer = at::cat(flat);
                   comm_->allReduce(buffer.data_ptr(), buffer.numel(), d, op, factor, c);
                   int64_t offset = 0;
                   for (const auto& t : outs) {
                     t.view({-1}).copy_(buffer.narrow(0, offset, t.numel()));
                     offset += t.numel();
                   }
                 });
}

c10::intrusive_ptr<c10d::Work> RingBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                      const c10d::BroadcastOptions& opts) {
  CheckScope s{"broadcast", rank_, size_};
  checkSingle(s, tensors, "tensor");
  checkRoot(s, opts.rootRank, "root (src)");
  if (opts.rootTensor != 0) failUsage(s, strCat("rootTensor ", opts.rootTensor, " must be 0"));
  if (anyCuda(tensors)) {
#ifdef RING_WITH_CUDA
    if (CudaCollectives* cuda = cudaPath(s, tensors[0])) {
      return cuda->broadcast(s, tensors[0], toRingDType(s, tensors[0].scalar_type()),
                             static_cast<int>(opts.rootRank), seq_++,
                             effectiveTimeout(opts.timeout));
    }
#endif
    noteStaging();
    auto host = toHost(tensors);
    auto w = broadcast(host, opts);
    return finishStaged(rank_, c10d::OpType::BROADCAST, w, tensors, host);
  }
  at::Tensor t = tensors[0];
  DType d = toRingDType(s, t.scalar_type());
  int root = static_cast<int>(opts.rootRank);
  return enqueue(c10d::OpType::BROADCAST, s.collective,
                 strCat(countDetail(t.numel(), t.scalar_type()), ", root ", root), {t},
                 opts.timeout, [this, t, d, root](const CallInfo& c) {
                   comm_->broadcast(t.data_ptr(), t.numel(), d, root, c);
                 });
}

c10::intrusive_ptr<c10d::Work> RingBackend::reduce(std::vector<at::Tensor>& tensors,
                                                   const c10d::ReduceOptions& opts) {
  CheckScope s{"reduce", rank_, size_};
  checkSingle(s, tensors, "tensor");
  checkRoot(s, opts.rootRank, "root (dst)");
  if (opts.rootTensor != 0) failUsage(s, strCat("rootTensor ", opts.rootTensor, " must be 0"));
  double factor = 1.0;
  RedOp op = toRingOp(s, opts.reduceOp, tensors[0].scalar_type(), &factor);
  if (anyCuda(tensors)) {
    noteStaging();
    auto host = toHost(tensors);
    auto w = reduce(host, opts);
    return finishStaged(rank_, c10d::OpType::REDUCE, w, tensors, host);
  }
  at::Tensor t = tensors[0];
  DType d = toRingDType(s, t.scalar_type());
  int root = static_cast<int>(opts.rootRank);
  return enqueue(c10d::OpType::REDUCE, s.collective,
                 strCat(countDetail(t.numel(), t.scalar_type()), ", op ", redOpName(op), ", root ",
                        root),
                 {t}, opts.timeout, [this, t, d, op, factor, root](const CallInfo& c) {
                   comm_->reduce(t.data_ptr(), t.data_ptr(), t.numel(), d, op, factor, root, c);
                 });
}

c10::intrusive_ptr<c10d::Work> RingBackend::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                            const c10d::AllgatherOptions& opts) {
  CheckScope s{"all_gather_into_tensor", rank_, size_};
  checkTensor(s, input, "input");
  checkTensor(s, output, "output");
  checkSameDevice(s, input, output);
  checkSameDType(s, input, output, "output");
  checkNumel(s, output, input.numel() * size_, "output",
             strCat("world size ", size_, " x input's ", input.numel()));
  if (input.is_cuda()) {
#ifdef RING_WITH_CUDA
    if (CudaCollectives* cuda = cudaPath(s, input)) {
      return cuda->allGather(s, input, output, toRingDType(s, input.scalar_type()), seq_++,
                             effectiveTimeout(opts.timeout));
    }
#endif
    noteStaging();
    at::Tensor hin = stagingCopy(input), hout = stagingCopy(output);
    auto w = _allgather_base(hout, hin, opts);
    return finishStaged(rank_, c10d::OpType::_ALLGATHER_BASE, w, {output}, {hout});
  }
  // FSDP passes an input that is a view of its own block of the output; any other overlap
  // would be overwritten before it is sent.
  const char* in = bytesOf(input);
  const char* out = bytesOf(output);
  const int64_t blockBytes = input.numel() * static_cast<int64_t>(input.element_size());
  if (blockBytes > 0 && in < out + blockBytes * size_ && out < in + blockBytes &&
      in != out + blockBytes * rank_) {
    failUsage(s, strCat("input overlaps the output but is not this rank's block (block ", rank_,
                        " of ", size_, "); pass a separate input or output.narrow() of block ",
                        rank_));
  }
  DType d = toRingDType(s, input.scalar_type());
  return enqueue(c10d::OpType::_ALLGATHER_BASE, s.collective,
                 countDetail(input.numel(), input.scalar_type()), {output}, opts.timeout,
                 [this, input, output, d](const CallInfo& c) {
                   comm_->allGather(input.data_ptr(), output.data_ptr(), input.numel(), d, c);
                 });
}

c10::intrusive_ptr<c10d::Work> RingBackend::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  CheckScope s{"all_gather", rank_, size_};
  checkSingle(s, inputs, "input");
  if (outputs.size() != 1) failUsage(s, strCat("expected one output list, got ", outputs.size()));
  checkListSize(s, outputs[0].size(), static_cast<size_t>(size_), "the output list");
  for (size_t i = 0; i < outputs[0].size(); ++i) {
    const auto& o = outputs[0][i];
    checkTensor(s, o, strCat("output[", i, "]"));
    checkSameDType(s, inputs[0], o, strCat("output[", i, "]"));
    checkSameDevice(s, inputs[0], o);
    checkNumel(s, o, inputs[0].numel(), strCat("output[", i, "]"), "the input's size");
  }
  if (anyCuda(inputs)) {
    noteStaging();
    auto hin = toHost(inputs);
    auto hout = toHost(outputs);
    auto w = allgather(hout, hin, opts);
    return finishStaged(rank_, c10d::OpType::ALLGATHER, w, outputs[0], hout[0]);
  }
  at::Tensor input = inputs[0];
  std::vector<at::Tensor> outs = outputs[0];
  DType d = toRingDType(s, input.scalar_type());
  return enqueue(c10d::OpType::ALLGATHER, s.collective,
                 countDetail(input.numel(), input.scalar_type()), outs, opts.timeout,
                 [this, input, outs, d](const CallInfo& c) {
                   at::Tensor flat = at::empty({size_ * input.numel()}, input.options());
                   comm_->allGather(input.data_ptr(), flat.data_ptr(), input.numel(), d, c);
                   for (int r = 0; r < size_; ++r) {
                     outs[r].view({-1}).copy_(flat.narrow(0, r * input.numel(), input.numel()));
                   }
                 });
}

c10::intrusive_ptr<c10d::Work> RingBackend::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputLists, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  CheckScope s{"all_gather_coalesced", rank_, size_};
  if (outputLists.size() != inputs.size()) {
    failUsage(s, strCat(outputLists.size(), " output lists for ", inputs.size(), " inputs"));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkTensor(s, inputs[i], strCat("input[", i, "]"));
    checkSameDevice(s, inputs[0], inputs[i]);
    checkListSize(s, outputLists[i].size(), static_cast<size_t>(size_), strCat("output list ", i));
    for (size_t r = 0; r < outputLists[i].size(); ++r) {
      const auto& o = outputLists[i][r];
      std::string what = strCat("output[", i, "][", r, "]");
      checkTensor(s, o, what);
      checkSameDType(s, inputs[i], o, what);
      checkSameDevice(s, inputs[i], o);
      checkNumel(s, o, inputs[i].numel(), what, strCat("input[", i, "]'s size"));
    }
  }
  if (anyCuda(inputs)) {
    noteStaging();
    auto hin = toHost(inputs);
    auto hout = toHost(outputLists);
    auto w = allgather_coalesced(hout, hin, opts);
    w->wait();
    std::vector<at::Tensor> flatOutputs;
    for (size_t i = 0; i < outputLists.size(); ++i) {
      copyBack(outputLists[i], hout[i]);
      flatOutputs.insert(flatOutputs.end(), outputLists[i].begin(), outputLists[i].end());
    }
    return completedWork(rank_, c10d::OpType::ALLGATHER_COALESCED, flatOutputs, w);
  }
  std::vector<at::Tensor> ins = inputs;
  std::vector<std::vector<at::Tensor>> outs = outputLists;
  std::vector<at::Tensor> flatOutputs;
  for (const auto& list : outs) flatOutputs.insert(flatOutputs.end(), list.begin(), list.end());
  return enqueue(c10d::OpType::ALLGATHER_COALESCED, s.collective, strCat(inputs.size(), " tensors"),
                 flatOutputs, opts.timeout, [this, ins, outs](const CallInfo& c) {
                   for (size_t i = 0; i < ins.size(); ++i) {
                     const at::Tensor& in = ins[i];
                     DType d = toRingDType(CheckScope{"all_gather_coalesced", rank_, size_},
                                           in.scalar_type());
                     at::Tensor flat = at::empty({size_ * in.numel()}, in.options());
                     comm_->allGather(in.data_ptr(), flat.data_ptr(), in.numel(), d, c);
                     for (int r = 0; r < size_; ++r) {
                       outs[i][r].view({-1}).copy_(flat.narrow(0, r * in.numel(), in.numel()));
                     }
                   }
                 });
}

c10::intrusive_ptr<c10d::Work> RingBackend::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  CheckScope s{"all_gather_into_tensor_coalesced", rank_, size_};
  if (outputs.size() != inputs.size()) {
    failUsage(s, strCat(outputs.size(), " outputs for ", inputs.size(), " inputs"));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkTensor(s, inputs[i], strCat("input[", i, "]"));
    checkTensor(s, outputs[i], strCat("output[", i, "]"));
    checkSameDType(s, inputs[i], outputs[i], strCat("output[", i, "]"));
    checkSameDevice(s, inputs[0], inputs[i]);
    checkSameDevice(s, inputs[i], outputs[i]);
    checkNumel(s, outputs[i], inputs[i].numel() * size_, strCat("output[", i, "]"),
               strCat("world size ", size_, " x input[", i, "]"));
  }
  if (anyCuda(inputs)) {
    noteStaging();
    auto hin = toHost(inputs);
    auto hout = toHost(outputs);
    auto w = allgather_into_tensor_coalesced(hout, hin, opts);
    return finishStaged(rank_, c10d::OpType::COALESCED, w, outputs, hout);
  }
  std::vector<at::Tensor> ins = inputs, outs = outputs;
  return enqueue(c10d::OpType::COALESCED, s.collective, strCat(inputs.size(), " tensors"), outs,
                 opts.timeout, [this, ins, outs](const CallInfo& c) {
                   for (size_t i = 0; i < ins.size(); ++i) {
                     DType d = toRingDType(CheckScope{"all_gather", rank_, size_},
                                           ins[i].scalar_type());
                     comm_->allGather(ins[i].data_ptr(), outs[i].data_ptr(), ins[i].numel(), d, c);
                   }
                 });
}

c10::intrusive_ptr<c10d::Work> RingBackend::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  CheckScope s{"reduce_scatter_tensor", rank_, size_};
  checkTensor(s, input, "input");
  checkTensor(s, output, "output");
  checkSameDevice(s, input, output);
  checkSameDType(s, input, output, "output");
  checkNumel(s, input, output.numel() * size_, "input",
             strCat("world size ", size_, " x output's ", output.numel()));
  double factor = 1.0;
  RedOp op = toRingOp(s, opts.reduceOp, input.scalar_type(), &factor);
  if (input.is_cuda()) {
#ifdef RING_WITH_CUDA
    if (CudaCollectives* cuda = cudaPath(s, input)) {
      return cuda->reduceScatter(s, input, output, toRingDType(s, input.scalar_type()), op, factor,
                                 seq_++, effectiveTimeout(opts.timeout));
    }
#endif
    noteStaging();
    at::Tensor hin = stagingCopy(input), hout = stagingCopy(output);
    auto w = _reduce_scatter_base(hout, hin, opts);
    return finishStaged(rank_, c10d::OpType::_REDUCE_SCATTER_BASE, w, {output}, {hout});
  }
  DType d = toRingDType(s, input.scalar_type());
  at::Tensor in = input, out = output;
  // The output must not overlap the input: blocks of the input are read until the last step.
  const char* ip = bytesOf(in);
  const char* opp = bytesOf(out);
  const int64_t outBytes = out.numel() * static_cast<int64_t>(out.element_size());
  if (outBytes > 0 && ip < opp + outBytes && opp < ip + outBytes * size_) {
    // Reading block r of the input while writing the output in place is only safe if the
    // output is a separate buffer; stage through a copy of the input.
    in = input.clone();
  }
  return enqueue(c10d::OpType::_REDUCE_SCATTER_BASE, s.collective,
                 strCat(countDetail(out.numel(), out.scalar_type()), ", op ", redOpName(op)),
                 {out}, opts.timeout, [this, in, out, d, op, factor](const CallInfo& c) {
                   comm_->reduceScatter(in.data_ptr(), out.data_ptr(), out.numel(), d, op, factor,
                                        c);
                 });
}

c10::intrusive_ptr<c10d::Work> RingBackend::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  CheckScope s{"reduce_scatter", rank_, size_};
  checkSingle(s, outputs, "output");
  if (inputs.size() != 1) failUsage(s, strCat("expected one input list, got ", inputs.size()));
  checkListSize(s, inputs[0].size(), static_cast<size_t>(size_), "the input list");
  for (size_t i = 0; i < inputs[0].size(); ++i) {
    const auto& t = inputs[0][i];
    checkTensor(s, t, strCat("input[", i, "]"));
    checkSameDType(s, outputs[0], t, strCat("input[", i, "]"));
    checkSameDevice(s, outputs[0], t);
    checkNumel(s, t, outputs[0].numel(), strCat("input[", i, "]"), "the output's size");
  }
  double factor = 1.0;
  RedOp op = toRingOp(s, opts.reduceOp, outputs[0].scalar_type(), &factor);
  if (anyCuda(outputs)) {
    noteStaging();
    auto hout = toHost(outputs);
    auto hin = toHost(inputs);
    auto w = reduce_scatter(hout, hin, opts);
    return finishStaged(rank_, c10d::OpType::REDUCE_SCATTER, w, outputs, hout);
  }
  std::vector<at::Tensor> flat;
  for (const auto& t : inputs[0]) flat.push_back(t.reshape({-1}));
  at::Tensor out = outputs[0];
  DType d = toRingDType(s, out.scalar_type());
  return enqueue(c10d::OpType::REDUCE_SCATTER, s.collective,
                 strCat(countDetail(out.numel(), out.scalar_type()), ", op ", redOpName(op)),
                 {out}, opts.timeout, [this, flat, out, d, op, factor](const CallInfo& c) {
                   at::Tensor in = at::cat(flat);
                   comm_->reduceScatter(in.data_ptr(), out.data_ptr(), out.numel(), d, op, factor,
                                        c);
                 });
}

c10::intrusive_ptr<c10d::Work> RingBackend::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  CheckScope s{"reduce_scatter_tensor_coalesced", rank_, size_};
  if (outputs.size() != inputs.size()) {
    failUsage(s, strCat(outputs.size(), " outputs for ", inputs.size(), " inputs"));
  }
  double factor = 1.0;
  RedOp op = RedOp::Sum;
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkTensor(s, inputs[i], strCat("input[", i, "]"));
    checkTensor(s, outputs[i], strCat("output[", i, "]"));
    checkSameDType(s, inputs[i], outputs[i], strCat("output[", i, "]"));
    checkSameDevice(s, inputs[0], inputs[i]);
    checkSameDevice(s, inputs[i], outputs[i]);
    checkNumel(s, inputs[i], outputs[i].numel() * size_, strCat("input[", i, "]"),
               strCat("world size ", size_, " x output[", i, "]"));
    op = toRingOp(s, opts.reduceOp, inputs[i].scalar_type(), &factor);
  }
  if (anyCuda(inputs)) {
    noteStaging();
    auto hin = toHost(inputs);
    auto hout = toHost(outputs);
    auto w = reduce_scatter_tensor_coalesced(hout, hin, opts);
    return finishStaged(rank_, c10d::OpType::COALESCED, w, outputs, hout);
  }
  std::vector<at::Tensor> ins = inputs, outs = outputs;
  return enqueue(c10d::OpType::COALESCED, s.collective,
                 strCat(inputs.size(), " tensors, op ", redOpName(op)), outs, opts.timeout,
                 [this, ins, outs, op, factor](const CallInfo& c) {
                   for (size_t i = 0; i < ins.size(); ++i) {
                     DType d = toRingDType(CheckScope{"reduce_scatter", rank_, size_},
                                           ins[i].scalar_type());
                     comm_->reduceScatter(ins[i].data_ptr(), outs[i].data_ptr(), outs[i].numel(),
                                          d, op, factor, c);
                   }
                 });
}

c10::intrusive_ptr<c10d::Work> RingBackend::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                   std::vector<at::Tensor>& inputs,
                                                   const c10d::GatherOptions& opts) {
  CheckScope s{"gather", rank_, size_};
  checkSingle(s, inputs, "input");
  checkRoot(s, opts.rootRank, "root (dst)");
  const int root = static_cast<int>(opts.rootRank);
  if (rank_ == root) {
    if (outputs.size() != 1) failUsage(s, strCat("the root expects one output list, got ", outputs.size()));
    checkListSize(s, outputs[0].size(), static_cast<size_t>(size_), "the gather list");
    for (size_t i = 0; i < outputs[0].size(); ++i) {
      const auto& o = outputs[0][i];
      checkTensor(s, o, strCat("gather_list[", i, "]"));
      checkSameDType(s, inputs[0], o, strCat("gather_list[", i, "]"));
      checkSameDevice(s, inputs[0], o);
      checkNumel(s, o, inputs[0].numel(), strCat("gather_list[", i, "]"), "the input's size");
    }
  } else if (!outputs.empty() && !outputs[0].empty()) {
    failUsage(s, strCat("only the root (rank ", root, ") may pass a gather list"));
  }
  if (anyCuda(inputs)) {
    noteStaging();
    auto hin = toHost(inputs);
    auto hout = toHost(outputs);
    auto w = gather(hout, hin, opts);
    w->wait();
    if (rank_ == root) copyBack(outputs[0], hout[0]);
    return completedWork(rank_, c10d::OpType::GATHER,
                         rank_ == root ? outputs[0] : std::vector<at::Tensor>{}, w);
  }
  at::Tensor input = inputs[0];
  std::vector<at::Tensor> outs = rank_ == root ? outputs[0] : std::vector<at::Tensor>{};
  DType d = toRingDType(s, input.scalar_type());
  return enqueue(c10d::OpType::GATHER, s.collective,
                 strCat(countDetail(input.numel(), input.scalar_type()), ", root ", root), outs,
                 opts.timeout, [this, input, outs, d, root](const CallInfo& c) {
                   at::Tensor flat;
                   if (rank_ == root) flat = at::empty({size_ * input.numel()}, input.options());
                   comm_->gather(input.data_ptr(), flat.defined() ? flat.data_ptr() : nullptr,
                                 input.numel(), d, root, c);
                   for (size_t r = 0; r < outs.size(); ++r) {
                     outs[r].view({-1}).copy_(flat.narrow(0, r * input.numel(), input.numel()));
                   }
                 });
}

c10::intrusive_ptr<c10d::Work> RingBackend::scatter(std::vector<at::Tensor>& outputs,
                                                    std::vector<std::vector<at::Tensor>>& inputs,
                                                    const c10d::ScatterOptions& opts) {
  CheckScope s{"scatter", rank_, size_};
  checkSingle(s, outputs, "output");
  checkRoot(s, opts.rootRank, "root (src)");
  const int root = static_cast<int>(opts.rootRank);
  if (rank_ == root) {
    if (inputs.size() != 1) failUsage(s, strCat("the root expects one input list, got ", inputs.size()));
    checkListSize(s, inputs[0].size(), static_cast<size_t>(size_), "the scatter list");
    for (size_t i = 0; i < inputs[0].size(); ++i) {
      const auto& t = inputs[0][i];
      checkTensor(s, t, strCat("scatter_list[", i, "]"));
      checkSameDType(s, outputs[0], t, strCat("scatter_list[", i, "]"));
      checkSameDevice(s, outputs[0], t);
      checkNumel(s, t, outputs[0].numel(), strCat("scatter_list[", i, "]"), "the output's size");
    }
  } else if (!inputs.empty() && !inputs[0].empty()) {
    failUsage(s, strCat("only the root (rank ", root, ") may pass a scatter list"));
  }
  if (anyCuda(outputs)) {
    noteStaging();
    auto hout = toHost(outputs);
    auto hin = toHost(inputs);
    auto w = scatter(hout, hin, opts);
    return finishStaged(rank_, c10d::OpType::SCATTER, w, outputs, hout);
  }
  at::Tensor out = outputs[0];
  std::vector<at::Tensor> ins = rank_ == root ? inputs[0] : std::vector<at::Tensor>{};
  DType d = toRingDType(s, out.scalar_type());
  return enqueue(c10d::OpType::SCATTER, s.collective,
                 strCat(countDetail(out.numel(), out.scalar_type()), ", root ", root), {out},
                 opts.timeout, [this, ins, out, d, root](const CallInfo& c) {
                   at::Tensor flat;
                   if (!ins.empty()) {
                     std::vector<at::Tensor> parts;
                     for (const auto& t : ins) parts.push_back(t.reshape({-1}));
                     flat = at::cat(parts);
                   }
                   comm_->scatter(flat.defined() ? flat.data_ptr() : nullptr, out.data_ptr(),
                                  out.numel(), d, root, c);
                 });
}

c10::intrusive_ptr<c10d::Work> RingBackend::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                          std::vector<int64_t>& outputSplits,
                                                          std::vector<int64_t>& inputSplits,
                                                          const c10d::AllToAllOptions& opts) {
  CheckScope s{"all_to_all_single", rank_, size_};
  checkTensor(s, input, "input");
  checkTensor(s, output, "output");
  checkSameDevice(s, input, output);
  checkSameDType(s, input, output, "output");
  // Splits count rows of dimension 0; an empty list means equal splits.
  auto rowsOf = [&](const at::Tensor& t, std::vector<int64_t>& splits, const char* what) {
    int64_t rows = t.dim() == 0 ? 1 : t.size(0);
    if (splits.empty()) {
      if (rows % size_ != 0) {
        failUsage(s, strCat(what, " has ", rows, " rows, not divisible by the world size ", size_,
                            "; pass explicit split sizes"));
      }
      return std::vector<int64_t>(static_cast<size_t>(size_), rows / size_);
    }
    checkListSize(s, splits.size(), static_cast<size_t>(size_), strCat(what, " split sizes"));
    int64_t total = 0;
    for (int64_t v : splits) {
      if (v < 0) failUsage(s, strCat(what, " split sizes contain a negative value ", v));
      total += v;
    }
    if (total != rows) {
      failUsage(s, strCat(what, " split sizes add up to ", total, " but dimension 0 has ", rows));
    }
    return splits;
  };
  std::vector<int64_t> outRows = rowsOf(output, outputSplits, "output");
  std::vector<int64_t> inRows = rowsOf(input, inputSplits, "input");
  auto rowBytes = [](const at::Tensor& t) {
    int64_t rows = t.dim() == 0 ? 1 : t.size(0);
    return rows == 0 ? 0 : t.numel() / rows * static_cast<int64_t>(t.element_size());
  };
  if (input.numel() > 0 && output.numel() > 0 && rowBytes(input) != rowBytes(output)) {
    failUsage(s, strCat("input rows have ", rowBytes(input), " bytes but output rows have ",
                        rowBytes(output), "; all dimensions but the first must match"));
  }
  if (inRows[rank_] != outRows[rank_]) {
    failUsage(s, strCat("this rank sends ", inRows[rank_], " rows to itself but expects ",
                        outRows[rank_], " from itself"));
  }
  if (input.is_cuda()) {
    noteStaging();
    at::Tensor hin = stagingCopy(input), hout = stagingCopy(output);
    auto w = alltoall_base(hout, hin, outputSplits, inputSplits, opts);
    return finishStaged(rank_, c10d::OpType::ALLTOALL_BASE, w, {output}, {hout});
  }
  const int64_t inRow = rowBytes(input), outRow = rowBytes(output);
  std::vector<int64_t> sendCounts(size_), sendOffsets(size_), recvCounts(size_), recvOffsets(size_);
  int64_t so = 0, ro = 0;
  for (int r = 0; r < size_; ++r) {
    sendCounts[r] = inRows[r] * inRow;
    sendOffsets[r] = so;
    so += sendCounts[r];
    recvCounts[r] = outRows[r] * outRow;
    recvOffsets[r] = ro;
    ro += recvCounts[r];
  }
  DType d = toRingDType(s, input.scalar_type());
  at::Tensor in = input, out = output;
  return enqueue(c10d::OpType::ALLTOALL_BASE, s.collective,
                 strCat(countDetail(input.numel(), input.scalar_type()), " in, ", output.numel(),
                        " out"),
                 {out}, opts.timeout,
                 [this, in, out, d, sendCounts, sendOffsets, recvCounts, recvOffsets](
                     const CallInfo& c) {
                   comm_->allToAll(in.data_ptr(), out.data_ptr(), sendCounts, sendOffsets,
                                   recvCounts, recvOffsets, d, c);
                 });
}

c10::intrusive_ptr<c10d::Work> RingBackend::alltoall(std::vector<at::Tensor>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllToAllOptions& opts) {
  CheckScope s{"all_to_all", rank_, size_};
  checkListSize(s, inputs.size(), static_cast<size_t>(size_), "the input list");
  checkListSize(s, outputs.size(), static_cast<size_t>(size_), "the output list");
  for (int r = 0; r < size_; ++r) {
    checkTensor(s, inputs[r], strCat("input[", r, "]"));
    checkTensor(s, outputs[r], strCat("output[", r, "]"));
    checkSameDType(s, inputs[0], inputs[r], strCat("input[", r, "]"));
    checkSameDType(s, inputs[0], outputs[r], strCat("output[", r, "]"));
    checkSameDevice(s, inputs[0], inputs[r]);
    checkSameDevice(s, inputs[0], outputs[r]);
  }
  if (inputs[rank_].numel() != outputs[rank_].numel()) {
    failUsage(s, strCat("input[", rank_, "] has ", inputs[rank_].numel(), " elements but output[",
                        rank_, "] has ", outputs[rank_].numel()));
  }
  if (anyCuda(inputs)) {
    noteStaging();
    auto hin = toHost(inputs);
    auto hout = toHost(outputs);
    auto w = alltoall(hout, hin, opts);
    return finishStaged(rank_, c10d::OpType::ALLTOALL, w, outputs, hout);
  }
  const int64_t esize = static_cast<int64_t>(inputs[0].element_size());
  std::vector<int64_t> sendCounts(size_), sendOffsets(size_), recvCounts(size_), recvOffsets(size_);
  int64_t so = 0, ro = 0;
  for (int r = 0; r < size_; ++r) {
    sendCounts[r] = inputs[r].numel() * esize;
    sendOffsets[r] = so;
    so += sendCounts[r];
    recvCounts[r] = outputs[r].numel() * esize;
    recvOffsets[r] = ro;
    ro += recvCounts[r];
  }
  std::vector<at::Tensor> ins = inputs, outs = outputs;
  DType d = toRingDType(s, inputs[0].scalar_type());
  return enqueue(c10d::OpType::ALLTOALL, s.collective, strCat(size_, " tensors"), outs,
                 opts.timeout,
                 [this, ins, outs, d, sendCounts, sendOffsets, recvCounts, recvOffsets, so, ro](
                     const CallInfo& c) {
                   std::vector<at::Tensor> parts;
                   for (const auto& t : ins) parts.push_back(t.reshape({-1}));
                   at::Tensor in = at::cat(parts);
                   at::Tensor out = at::empty({ro / std::max<int64_t>(1, ins[0].element_size())},
                                              ins[0].options());
                   comm_->allToAll(in.data_ptr(), out.data_ptr(), sendCounts, sendOffsets,
                                   recvCounts, recvOffsets, d, c);
                   int64_t offset = 0;
                   for (const auto& t : outs) {
                     t.view({-1}).copy_(out.narrow(0, offset, t.numel()));
                     offset += t.numel();
                   }
                 });
}

c10::intrusive_ptr<c10d::Work> RingBackend::barrier(const c10d::BarrierOptions& opts) {
  // Queued behind every earlier collective of the group, so it also waits for all of them.
  auto work = enqueue(c10d::OpType::BARRIER, "barrier", "", {}, opts.timeout,
                      [this](const CallInfo& c) {
                        waitCudaWork();
                        comm_->barrier(c);
                      });
  return work;
}

// ---- CUDA kernel path: set-up on first use -----------------------------------------------------

#ifdef RING_WITH_CUDA
CudaCollectives* RingBackend::cudaPath(const CheckScope& s, const at::Tensor& t) {
  std::lock_guard<std::mutex> lock(cudaMutex_);
  if (!cudaTried_) {
    // Collective: every rank reaches its first CUDA collective of these four at the same point.
    cudaTried_ = true;
    std::optional<at::Device> bound = getBoundDeviceId();
    at::Device device = bound && bound->is_cuda() && bound->has_index() ? *bound : t.device();
    try {
      cuda_ = std::make_unique<CudaCollectives>(*rendezvous_, *comm_, recorder_, rank_, size_,
                                                device, timeout_);
    } catch (const CommError& e) {
      C10_THROW_ERROR(DistBackendError, strCat("ring: ", s.collective, " on rank ", rank_,
                                               ": setting up the CUDA ring failed: ", e.what()));
    } catch (const RingError& e) {
      TORCH_CHECK(false, "ring: ", s.collective, " on rank ", rank_,
                  ": setting up the CUDA ring failed: ", e.what());
    }
  }
  if (!cuda_) return nullptr;
  if (t.device() != cuda_->device()) {
    failUsage(s, strCat("the tensor is on ", t.device().str(), " but this rank's group is bound to ",
                        cuda_->device().str(), " (its first CUDA collective, or init_process_group's "
                        "device_id); use one device per rank, e.g. torch.cuda.set_device(local_rank)"));
  }
  return cuda_->usable() ? cuda_.get() : nullptr;
}
#endif

void RingBackend::waitCudaWork() {
#ifdef RING_WITH_CUDA
  CudaCollectives* cuda = nullptr;
  {
    std::lock_guard<std::mutex> lock(cudaMutex_);
    cuda = cuda_ && cuda_->usable() ? cuda_.get() : nullptr;
  }
  // Bounded: the watchdog stops every kernel at its timeout. A failure raises CommError, which
  // fails the barrier.
  if (cuda != nullptr) cuda->waitIdle();
#endif
}

// ---- point to point ----------------------------------------------------------------------------

P2PEngine& RingBackend::p2p() {
  std::lock_guard<std::mutex> lock(p2pMutex_);
  if (!p2p_) {
    std::lock_guard<std::mutex> commLock(commMutex_);
    TORCH_CHECK(comm_ != nullptr, "ring: point-to-point on rank ", rank_,
                " was called after the process group was shut down (destroy_process_group)");
    p2p_ = std::make_unique<P2PEngine>(comm_->transport(), groupName_, comm_->spinMicros());
  }
  return *p2p_;
}

c10::intrusive_ptr<c10d::Work> RingBackend::pointToPoint(bool isSend, at::Tensor tensor, int peer,
                                                         int tag, const char* name) {
  CheckScope s{name, rank_, size_};
  if (peer != -1) {
    checkRoot(s, peer, isSend ? "destination rank" : "source rank");
    if (peer == rank_) failUsage(s, strCat("rank ", rank_, " cannot ", name, " itself"));
  }
  if (size_ == 1) failUsage(s, "a group of one rank has no peer to exchange with");
  if (tensor.is_cuda()) {
    noteStaging();
    at::Tensor host = stagingCopy(tensor);
    auto w = pointToPoint(isSend, host, peer, tag, name);
    w->wait();
    if (!isSend) tensor.copy_(host);
    auto work = c10::make_intrusive<RingWork>(rank_, isSend ? c10d::OpType::SEND
                                                            : c10d::OpType::RECV,
                                              0, std::vector<at::Tensor>{tensor});
    int src = -1;
    if (!isSend) src = w->sourceRank();
    work->complete(nullptr, src);
    return work;
  }
  auto work = c10::make_intrusive<RingWork>(
      rank_, isSend ? c10d::OpType::SEND : (peer < 0 ? c10d::OpType::RECVANYSOURCE : c10d::OpType::RECV),
      0, std::vector<at::Tensor>{tensor});
  P2POp op;
  op.isSend = isSend;
  op.peer = peer;
  op.tag = tag;
  op.data = tensor.data_ptr();
  op.bytes = tensor.numel() * static_cast<int64_t>(tensor.element_size());
  op.timeout = timeout_;
  // The lambda holds the tensor so its storage outlives the transfer.
  op.done = [work, tensor](std::exception_ptr error, int source) { work->complete(error, source); };
  p2p().post(std::move(op));
  return work;
}

c10::intrusive_ptr<c10d::Work> RingBackend::send(std::vector<at::Tensor>& tensors, int dstRank,
                                                 int tag) {
  CheckScope s{"send", rank_, size_};
  checkSingle(s, tensors, "tensor");
  return pointToPoint(true, tensors[0], dstRank, tag, "send");
}

c10::intrusive_ptr<c10d::Work> RingBackend::recv(std::vector<at::Tensor>& tensors, int srcRank,
                                                 int tag) {
  CheckScope s{"recv", rank_, size_};
  checkSingle(s, tensors, "tensor");
  return pointToPoint(false, tensors[0], srcRank, tag, "recv");
}

c10::intrusive_ptr<c10d::Work> RingBackend::recvAnysource(std::vector<at::Tensor>& tensors,
                                                          int tag) {
  CheckScope s{"recv", rank_, size_};
  checkSingle(s, tensors, "tensor");
  return pointToPoint(false, tensors[0], -1, tag, "recv");
}

}  // namespace ring
