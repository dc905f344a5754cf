#include "backend/cuda_collectives.h"

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/util/Exception.h>

#include <map>
#include <set>

#include "backend/work_outcome.h"
#include "common/errors.h"
#include "common/logging.h"
#include "transport/cuda_ipc/cuda_env.h"

namespace ring {
namespace {

[[noreturn]] void raiseComm(const std::string& text) { C10_THROW_ERROR(DistBackendError, text); }

// Two ranks of one process (threads as ranks) that both call on the legacy default stream can
// deadlock: rank 0's wait() makes the default stream wait for kernel 0, which spins until
// kernel 1 runs; rank 1's next call records its start on that same default stream, so kernel 1
// queues behind the wait for kernel 0. Warned once per group and device.
void noteDefaultStream(const std::string& group, int rank, const at::Device& device) {
  static std::mutex mutex;
  static std::map<std::pair<std::string, int>, std::set<int>> ranksOnDefault;
  std::lock_guard<std::mutex> lock(mutex);
  std::set<int>& ranks = ranksOnDefault[{group, device.index()}];
  const bool had = ranks.size() >= 2;
  ranks.insert(rank);
  if (had || ranks.size() < 2) return;
  RING_LOG(kLogWarn, "ranks ", *ranks.begin(), " and ", *ranks.rbegin(),
           " of this process both call ring collectives on the default stream of ",
           device.str(), ". A wait() on one rank's work then queues the other rank's next "
           "kernel behind it while the first kernel waits for that one: a deadlock until the "
           "timeout. Give each rank thread its own stream (with torch.cuda.stream(torch.cuda."
           "Stream()): ...).");
}

// PREMUL_SUM's factor for the kernels: a device tensor of the data's dtype on the data's device
// is read by the kernel itself (no wait for the caller's stream); any other is read here.
ScaleFactor scaleFactorFor(double factor, const at::Tensor& deviceFactor, const at::Tensor& data) {
  if (!deviceFactor.defined()) return factor;
  if (deviceFactor.device() == data.device() && deviceFactor.scalar_type() == data.scalar_type()) {
    return ScaleFactor::deviceResident(deviceFactor.const_data_ptr());
  }
  return deviceFactor.item<double>();
}

}  // namespace

CudaCollectives::CudaCollectives(Store& store, Communicator& comm,
                                 FlightRecorder& recorder, int rank, int size, at::Device device,
                                 std::chrono::milliseconds timeout, DedicatedStream& stream,
                                 Finished finished)
    : rank_(rank),
      device_(device),
      groupName_(comm.groupName()),
      commStream_(stream),
      sink_(std::make_shared<FinishedSink>()) {
  sink_->finished = std::move(finished);
  CudaEngineOptions opts;
  opts.rank = rank;
  opts.size = size;
  opts.groupName = groupName_;
  opts.timeout = timeout;
  opts.links = cudaLinkOptionsFromEnv(device.index(), timeout);
  opts.commStream = commStream_.raw();
  engine_ = std::make_unique<CudaRingEngine>(store, opts, communicatorHooks(comm, recorder));
}

// The engine's shutdown: waits for the kernels, stops the watchdog, closes the links; with the
// group's device current on the thread that does it (it may be any: destroy_process_group's,
// the interpreter's at exit), whose device torch's guard gives back without making a context.
CudaCollectives::~CudaCollectives() {
  c10::cuda::CUDAGuard guard(device_);
  engine_.reset();
  std::lock_guard<std::mutex> lock(sink_->mutex);
  sink_->finished = nullptr;
}

// ---- one collective ------------------------------------------------------------------------------

c10::intrusive_ptr<c10d::Work> CudaCollectives::run(const CheckScope& s, c10d::OpType type,
                                                    uint64_t seq,
                                                    std::chrono::milliseconds timeout,
                                                    const std::vector<at::Tensor>& inputs,
                                                    std::vector<at::Tensor> outputs,
                                                    const Enqueue& enqueue) {
  c10::cuda::CUDAGuard guard(device_);
  const c10::cuda::CUDAStream caller = c10::cuda::getCurrentCUDAStream(device_.index());
  if (caller == c10::cuda::getDefaultCUDAStream(device_.index())) {
    noteDefaultStream(groupName_, rank_, device_);
  }
  auto future = cudaFuture(device_);
  CudaCall call;
  call.collective = s.collective;
  call.seq = seq;
  call.timeout = timeout;
  call.caller = caller.stream();
  call.timed = timed_.load(std::memory_order_relaxed);
  const uint64_t key = nextCompletionKey();
  call.onFinished = [sink = sink_, type, seq, key,
                     start = std::chrono::steady_clock::now()](std::exception_ptr error) {
    std::lock_guard<std::mutex> lock(sink->mutex);
    if (sink->finished) {
      sink->finished(type, seq, start, std::chrono::steady_clock::now(),
                     error ? toTorchError(error) : nullptr, key);
    }
  };
  call.afterLaunch = [&](cudaStream_t) {
    const c10::cuda::CUDAStream comm = commStream_.stream();
    // The caller may drop its tensors now: their memory is not reused before the kernel on the
    // comm stream is done.
    for (const at::Tensor& t : inputs) {
      c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), comm);
    }
    for (const at::Tensor& t : outputs) {
      c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), comm);
    }
    // With the comm stream current: the events that future.wait() and .then() callbacks make
    // their streams wait on are recorded right after the kernel.
    c10::cuda::CUDAStreamGuard onComm(comm);
    future->markCompleted(c10::IValue(outputs));
  };
  std::shared_ptr<CudaTask> task;
  try {
    task = enqueue(call);
  } catch (const CommError& e) {
    raiseComm(e.what());
  } catch (const UsageError& e) {
    failUsage(s, e.what());
  } catch (const RingError& e) {
    TORCH_CHECK(false, e.what());
  }
  return c10::make_intrusive<CudaRingWork>(type, std::move(task), std::move(outputs), device_,
                                           cudaKnobs().blockingWait, std::move(future), key);
}

c10::intrusive_ptr<c10d::Work> CudaCollectives::allReduce(const CheckScope& s, const at::Tensor& t,
                                                          DType d, RedOp op, double factor,
                                                          const at::Tensor& deviceFactor,
                                                          uint64_t seq,
                                                          std::chrono::milliseconds timeout) {
  void* data = t.data_ptr();
  const int64_t count = t.numel();
  const ScaleFactor f = scaleFactorFor(factor, deviceFactor, t);
  // The factor tensor is an input too: kept alive until the kernel has read it.
  std::vector<at::Tensor> inputs{t};
  if (f.onDevice != nullptr) inputs.push_back(deviceFactor);
  return run(s, c10d::OpType::ALLREDUCE, seq, timeout, inputs, {t}, [&](const CudaCall& c) {
    return engine_->allReduce(c, data, count, d, op, f);
  });
}

c10::intrusive_ptr<c10d::Work> CudaCollectives::reduceScatter(const CheckScope& s,
                                                              const at::Tensor& input,
                                                              const at::Tensor& output, DType d,
                                                              RedOp op, double factor,
                                                              const at::Tensor& deviceFactor,
                                                              uint64_t seq,
                                                              std::chrono::milliseconds timeout) {
  // Blocks of the input are read until the last step: an output inside the input would be
  // overwritten first. Stage through a copy (on the caller's stream, so it is ordered).
  at::Tensor in = overlaps(input, output) ? input.clone() : input;
  const void* src = in.data_ptr();
  void* dst = output.data_ptr();
  const int64_t count = output.numel();
  const ScaleFactor f = scaleFactorFor(factor, deviceFactor, input);
  std::vector<at::Tensor> inputs{in};
  if (f.onDevice != nullptr) inputs.push_back(deviceFactor);
  return run(s, c10d::OpType::_REDUCE_SCATTER_BASE, seq, timeout, inputs, {output},
             [&](const CudaCall& c) {
               return engine_->reduceScatter(c, src, dst, count, d, op, f);
             });
}

c10::intrusive_ptr<c10d::Work> CudaCollectives::allGather(const CheckScope& s,
                                                          const at::Tensor& input,
                                                          const at::Tensor& output, DType d,
                                                          uint64_t seq,
                                                          std::chrono::milliseconds timeout) {
  // An input inside the output is this rank's block (checked by the caller: FSDP's case).
  const void* src = input.data_ptr();
  void* dst = output.data_ptr();
  const int64_t count = input.numel();
  return run(s, c10d::OpType::_ALLGATHER_BASE, seq, timeout, {input}, {output},
             [&](const CudaCall& c) { return engine_->allGather(c, src, dst, count, d); });
}

c10::intrusive_ptr<c10d::Work> CudaCollectives::broadcast(const CheckScope& s, const at::Tensor& t,
                                                          DType d, int root, uint64_t seq,
                                                          std::chrono::milliseconds timeout) {
  void* data = t.data_ptr();
  const int64_t count = t.numel();
  return run(s, c10d::OpType::BROADCAST, seq, timeout, {t}, {t},
             [&](const CudaCall& c) { return engine_->broadcast(c, data, count, d, root); });
}

}  // namespace ring
