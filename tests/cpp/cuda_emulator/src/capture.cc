// Stream capture: beginning and ending it, what a capture forbids other calls, and running a
// captured graph again.
//
// The rules, from the CUDA Runtime API (cudaStreamBeginCapture, cudaStreamEndCapture,
// cudaThreadExchangeStreamCaptureMode) and the CUDA Programming Guide ("Prohibited and
// unhandled operations"):
//   - while a stream captures, work put on it is recorded into the capture instead of run;
//   - the legacy stream cannot be captured;
//   - each host thread has a capture interaction mode (Global until it swaps it). In Global
//     mode a thread may not make potentially unsafe calls while it has a capture of its own not
//     begun in Relaxed mode, nor while any other thread has a capture begun in Global mode; in
//     ThreadLocal mode only its own capture forbids them; in Relaxed mode nothing does;
//   - an invalid call during a capture fails (cudaErrorStreamCaptureUnsupported) and
//     invalidates the capture: its cudaStreamEndCapture then fails with
//     cudaErrorStreamCaptureInvalidated and returns no graph.
// Which calls are potentially unsafe: those that synchronize with or query the device's work,
// or allocate and free outside any stream (the documentation's example is cudaMalloc; a
// cudaEventQuery from another thread during a Global capture is the one PyTorch's NCCL
// watchdog met, pytorch/pytorch#104555).
#include <cuda_runtime.h>

#include <atomic>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "runtime.h"
#include "submit.h"

using cudaemu::detail::enter;
using cudaemu::detail::fail;
using cudaemu::detail::Runtime;
using cudaemu::detail::runtime;
using cudaemu::detail::CaptureSequence;
using cudaemu::detail::StreamCore;

namespace cudaemu {
namespace detail {

cudaError_t captureRulesAllow(const char* api) {
  static const std::set<std::string> unsafe = {
      "cudaMalloc",          "cudaFree",            "cudaHostAlloc",
      "cudaFreeHost",        "cudaHostRegister",    "cudaHostUnregister",
      "cudaMemcpy",          "cudaMemset",          "cudaEventQuery",
      "cudaEventSynchronize", "cudaStreamQuery",    "cudaStreamSynchronize",
      "cudaDeviceSynchronize", "cudaDeviceSetLimit", "cudaIpcOpenMemHandle",
      "cudaIpcCloseMemHandle"};
  const int mode = captureInteractionMode();
  if (mode == cudaStreamCaptureModeRelaxed || unsafe.count(api) == 0) return cudaSuccess;
  const std::thread::id me = std::this_thread::get_id();
  std::vector<std::shared_ptr<CaptureSequence>> forbidding;
  {
    Runtime& rt = runtime();
    std::lock_guard<std::mutex> lock(rt.mutex);
    std::vector<std::weak_ptr<CaptureSequence>> still;
    for (const auto& weak : rt.capturing) {
      std::shared_ptr<CaptureSequence> c = weak.lock();
      if (c == nullptr || c->status.load() == cudaStreamCaptureStatusNone) continue;
      still.push_back(c);
      const bool mine = c->thread == me;
      if ((mine && c->mode != cudaStreamCaptureModeRelaxed) ||
          (!mine && mode == cudaStreamCaptureModeGlobal &&
           c->mode == cudaStreamCaptureModeGlobal)) {
        forbidding.push_back(std::move(c));
      }
    }
    rt.capturing.swap(still);
  }
  if (forbidding.empty()) return cudaSuccess;
  for (const auto& c : forbidding) {
    int active = 1;
    c->status.compare_exchange_strong(active, 2);
  }
  return cudaErrorStreamCaptureUnsupported;
}

}  // namespace detail
}  // namespace cudaemu

namespace {

std::shared_ptr<StreamCore> lookUpCapturable(cudaStream_t stream, cudaError_t* error) {
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mutex);
  std::shared_ptr<StreamCore> core = cudaemu::detail::streamOf(rt, stream);
  if (core == nullptr) *error = cudaErrorInvalidResourceHandle;
  return core;
}

}  // namespace

cudaError_t cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode* mode) {
  if (cudaError_t e = enter("cudaThreadExchangeStreamCaptureMode")) return fail(e);
  if (mode == nullptr || *mode < cudaStreamCaptureModeGlobal ||
      *mode > cudaStreamCaptureModeRelaxed) {
    return fail(cudaErrorInvalidValue);
  }
  int& mine = cudaemu::detail::captureInteractionMode();
  const int previous = mine;
  mine = *mode;
  *mode = static_cast<cudaStreamCaptureMode>(previous);
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  if (cudaError_t e = enter("cudaStreamIsCapturing")) return fail(e);
  if (status == nullptr) return fail(cudaErrorInvalidValue);
  cudaError_t error = cudaSuccess;
  std::shared_ptr<StreamCore> core = lookUpCapturable(stream, &error);
  if (core == nullptr) return fail(error);
  *status = static_cast<cudaStreamCaptureStatus>(core->captureStatus());
  return cudaSuccess;
}

cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream, cudaStreamCaptureStatus* status,
                                     unsigned long long* id, cudaGraph_t* graph,
                                     const cudaGraphNode_t** dependencies,
                                     const cudaGraphEdgeData** edgeData,
                                     size_t* numDependencies) {
  if (cudaError_t e = enter("cudaStreamGetCaptureInfo")) return fail(e);
  if (status == nullptr) return fail(cudaErrorInvalidValue);
  cudaError_t error = cudaSuccess;
  std::shared_ptr<StreamCore> core = lookUpCapturable(stream, &error);
  if (core == nullptr) return fail(error);
  *status = static_cast<cudaStreamCaptureStatus>(core->captureStatus());
  // The graph under construction is not built node by node here: no graph, no dependencies.
  if (id != nullptr) *id = *status == cudaStreamCaptureStatusNone ? 0 : core->captureId();
  if (graph != nullptr) *graph = nullptr;
  if (dependencies != nullptr) *dependencies = nullptr;
  if (edgeData != nullptr) *edgeData = nullptr;
  if (numDependencies != nullptr) *numDependencies = 0;
  return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  if (cudaError_t e = enter("cudaStreamBeginCapture")) return fail(e);
  // The legacy stream cannot be captured.
  if (cudaemu::detail::isLegacyHandle(stream)) return fail(cudaErrorStreamCaptureUnsupported);
  if (mode < cudaStreamCaptureModeGlobal || mode > cudaStreamCaptureModeRelaxed) {
    return fail(cudaErrorInvalidValue);
  }
  static std::atomic<uint64_t> captures{0};
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mutex);
  std::shared_ptr<StreamCore> core = cudaemu::detail::streamOf(rt, stream);
  if (core == nullptr) return fail(cudaErrorInvalidResourceHandle);
  if (core->captureStatus() != 0) return fail(cudaErrorIllegalState);
  auto sequence =
      std::make_shared<CaptureSequence>(++captures, mode, std::this_thread::get_id());
  core->beginCapture(sequence);
  // Kept alive by its streams only: it is under way while one of them captures into it.
  rt.capturing.push_back(sequence);
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  if (cudaError_t e = enter("cudaStreamEndCapture")) return fail(e);
  if (graph == nullptr) return fail(cudaErrorInvalidValue);
  cudaError_t error = cudaSuccess;
  std::shared_ptr<StreamCore> core = lookUpCapturable(stream, &error);
  if (core == nullptr) return fail(error);
  if (core->captureStatus() == 0) return fail(cudaErrorIllegalState);
  if (core->captureMode() != cudaStreamCaptureModeRelaxed &&
      core->captureThread() != std::this_thread::get_id()) {
    return fail(cudaErrorStreamCaptureWrongThread);
  }
  // Ended on the stream it began on; every stream that joined it leaves it too, and what each
  // recorded goes into the graph (the origin's first).
  std::shared_ptr<CaptureSequence> sequence = core->capture();
  std::vector<std::shared_ptr<StreamCore>> members;
  {
    std::lock_guard<std::mutex> lock(sequence->mutex);
    for (const auto& weak : sequence->members) {
      if (std::shared_ptr<StreamCore> m = weak.lock()) members.push_back(std::move(m));
    }
  }
  if (members.empty() || members.front() != core) return fail(cudaErrorStreamCaptureUnmatched);
  const bool invalidated = sequence->status.load() == cudaStreamCaptureStatusInvalidated;
  std::vector<cudaemu::detail::Operation> ops;
  for (const auto& m : members) {
    for (auto& op : m->endCapture()) ops.push_back(std::move(op));
  }
  sequence->status.store(cudaStreamCaptureStatusNone);  // over: it forbids nothing any more
  if (invalidated) {
    *graph = nullptr;
    return fail(cudaErrorStreamCaptureInvalidated);
  }
  auto* g = new CUgraph_st();
  g->operations = std::move(ops);
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mutex);
  rt.graphs.insert(g);
  *graph = g;
  return cudaSuccess;
}

cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t* nodes, size_t* numNodes) {
  if (cudaError_t e = enter("cudaGraphGetNodes")) return fail(e);
  if (numNodes == nullptr) return fail(cudaErrorInvalidValue);
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mutex);
  if (rt.graphs.count(graph) == 0) return fail(cudaErrorInvalidValue);
  // Only the count: captured operations are not exposed as nodes.
  if (nodes != nullptr) return fail(cudaErrorNotSupported);
  *numNodes = graph->operations.size();
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  if (cudaError_t e = enter("cudaGraphDestroy")) return fail(e);
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mutex);
  if (rt.graphs.erase(graph) == 0) return fail(cudaErrorInvalidValue);
  delete graph;
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t* exec, cudaGraph_t graph,
                                          unsigned long long flags) {
  if (cudaError_t e = enter("cudaGraphInstantiateWithFlags")) return fail(e);
  (void)flags;  // auto-free, upload, device launch, priority: nothing to do on the host
  if (exec == nullptr) return fail(cudaErrorInvalidValue);
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mutex);
  if (rt.graphs.count(graph) == 0) return fail(cudaErrorInvalidValue);
  // An executable graph is a snapshot: later changes to the graph do not reach it.
  auto* x = new CUgraphExec_st();
  x->operations = graph->operations;
  rt.graphExecs.insert(x);
  *exec = x;
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (cudaError_t e = enter("cudaGraphLaunch")) return fail(e);
  std::vector<cudaemu::detail::Operation> ops;
  {
    Runtime& rt = runtime();
    std::lock_guard<std::mutex> lock(rt.mutex);
    if (rt.graphExecs.count(exec) == 0) return fail(cudaErrorInvalidResourceHandle);
    ops = exec->operations;
  }
  // The whole graph is one piece of the stream's work, its operations in captured order.
  cudaError_t e = cudaemu::detail::submit(stream, [ops] {
    for (const auto& op : ops) op();
  });
  return e == cudaSuccess ? e : fail(e);
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  if (cudaError_t e = enter("cudaGraphExecDestroy")) return fail(e);
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mutex);
  if (rt.graphExecs.erase(exec) == 0) return fail(cudaErrorInvalidResourceHandle);
  delete exec;
  return cudaSuccess;
}
