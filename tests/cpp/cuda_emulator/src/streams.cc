// Streams and stream capture, and submit(): how work reaches a stream.
#include <cuda_runtime.h>

#include <thread>
#include <utility>
#include <vector>

#include "runtime.h"
#include "submit.h"

namespace cudaemu {
namespace detail {
namespace {

// The device's legacy default stream, made on first use (caller holds rt.mutex).
std::shared_ptr<StreamCore> legacyOf(DeviceState& d) {
  if (d.legacy == nullptr) {
    d.legacy = std::make_shared<StreamCore>(d.ordinal, /*blocking=*/true, /*legacy=*/true);
    d.legacy->start();
  }
  return d.legacy;
}

// The device's live streams (caller holds rt.mutex); `blockingOnly`: those that synchronize
// with the legacy stream. The legacy stream itself is not among them.
std::vector<std::shared_ptr<StreamCore>> liveStreams(DeviceState& d, bool blockingOnly) {
  std::vector<std::shared_ptr<StreamCore>> out;
  for (auto it = d.streams.begin(); it != d.streams.end();) {
    std::shared_ptr<StreamCore> s = it->lock();
    if (s == nullptr) {
      it = d.streams.erase(it);
      continue;
    }
    if (!blockingOnly || s->blocking) out.push_back(std::move(s));
    ++it;
  }
  return out;
}

}  // namespace

cudaError_t submit(cudaStream_t stream, Operation op, std::shared_ptr<StreamCore>* coreOut,
                   uint64_t* position) {
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mutex);
  std::shared_ptr<StreamCore> core;
  uint64_t at = 0;
  if (stream == nullptr) {
    DeviceState* d = deviceOf(rt, currentDevice());
    if (d == nullptr) return cudaErrorInvalidDevice;
    core = legacyOf(*d);
    // The legacy rule (CUDA Driver API, "Stream synchronization behavior"): the legacy stream
    // first waits for every blocking stream, the action is queued, then every blocking stream
    // waits for the legacy stream.
    std::vector<std::shared_ptr<StreamCore>> blocking = liveStreams(*d, true);
    for (const auto& s : blocking) {
      const uint64_t p = s->enqueued();
      if (!s->reached(p)) core->enqueue([s, p] { s->waitFor(p); });
    }
    at = core->enqueue(std::move(op));
    for (const auto& s : blocking) s->enqueue([core, at] { core->waitFor(at); });
  } else {
    if (rt.streams.count(stream) == 0) return cudaErrorInvalidResourceHandle;
    core = stream->core;
    at = core->enqueue(std::move(op));
  }
  if (coreOut != nullptr) *coreOut = core;
  if (position != nullptr) *position = at;
  return cudaSuccess;
}

void waitDeviceIdle(int device, const StreamCore* except) {
  std::vector<std::pair<std::shared_ptr<StreamCore>, uint64_t>> targets;
  {
    Runtime& rt = runtime();
    std::lock_guard<std::mutex> lock(rt.mutex);
    DeviceState* d = deviceOf(rt, device);
    if (d == nullptr) return;
    std::vector<std::shared_ptr<StreamCore>> all = liveStreams(*d, false);
    if (d->legacy != nullptr) all.push_back(d->legacy);
    for (auto& s : all) {
      // A stream never waits for itself (a launch waiting for the rest of the device).
      if (s.get() != except && !s->isOwnThread()) targets.emplace_back(s, s->enqueued());
    }
  }
  for (auto& [s, p] : targets) s->waitFor(p);
}

}  // namespace detail
}  // namespace cudaemu

using cudaemu::detail::enter;
using cudaemu::detail::fail;
using cudaemu::detail::Runtime;
using cudaemu::detail::runtime;
using cudaemu::detail::StreamCore;

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  if (cudaError_t e = enter("cudaStreamCreateWithFlags")) return fail(e);
  if (stream == nullptr || (flags & ~cudaStreamNonBlocking) != 0) {
    return fail(cudaErrorInvalidValue);
  }
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mutex);
  cudaemu::detail::DeviceState* d = cudaemu::detail::deviceOf(rt, cudaemu::detail::currentDevice());
  if (d == nullptr) return fail(cudaErrorInvalidDevice);
  const bool blocking = (flags & cudaStreamNonBlocking) == 0;
  auto core = std::make_shared<StreamCore>(d->ordinal, blocking, /*legacy=*/false);
  core->start();
  if (blocking && d->legacy != nullptr) {
    // A blocking stream's work also follows the legacy work issued before it existed.
    std::shared_ptr<StreamCore> legacy = d->legacy;
    const uint64_t p = legacy->enqueued();
    if (!legacy->reached(p)) core->enqueue([legacy, p] { legacy->waitFor(p); });
  }
  d->streams.push_back(core);
  auto* handle = new cudaemu::StreamHandle(core);
  rt.streams.insert(handle);
  ++rt.counters.liveStreams;
  *stream = handle;
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (cudaError_t e = enter("cudaStreamDestroy")) return fail(e);
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mutex);
  if (stream == nullptr || rt.streams.erase(stream) == 0) {
    return fail(cudaErrorInvalidResourceHandle);
  }
  // Returns at once; the stream's thread finishes the queued work, then exits.
  stream->core->retire();
  delete stream;
  --rt.counters.liveStreams;
  return cudaSuccess;
}

namespace {

// The stream behind a handle for the calls that only look at it (nullptr: legacy).
cudaError_t lookUp(cudaStream_t stream, std::shared_ptr<StreamCore>* out) {
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mutex);
  if (stream == nullptr) {
    cudaemu::detail::DeviceState* d =
        cudaemu::detail::deviceOf(rt, cudaemu::detail::currentDevice());
    if (d == nullptr) return cudaErrorInvalidDevice;
    *out = d->legacy;  // may be null: nothing was ever put there
    return cudaSuccess;
  }
  if (rt.streams.count(stream) == 0) return cudaErrorInvalidResourceHandle;
  *out = stream->core;
  return cudaSuccess;
}

// Synchronizing with a capturing stream is refused and breaks the capture (CUDA's capture
// rules: no call may wait on work that is being captured rather than run).
bool refuseWhileCapturing(const std::shared_ptr<StreamCore>& core) {
  if (core == nullptr || core->captureStatus() == 0) return false;
  core->invalidateCapture();
  return true;
}

}  // namespace

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (cudaError_t e = enter("cudaStreamSynchronize")) return fail(e);
  std::shared_ptr<StreamCore> core;
  if (cudaError_t e = lookUp(stream, &core)) return fail(e);
  if (refuseWhileCapturing(core)) return fail(cudaErrorStreamCaptureUnsupported);
  uint64_t position = 0;
  if (stream == nullptr) {
    // An action of the legacy stream: it waits for every blocking stream first.
    if (cudaError_t e = cudaemu::detail::submit(nullptr, [] {}, &core, &position)) return fail(e);
  } else {
    position = core->enqueued();
  }
  core->waitFor(position);
  return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  if (cudaError_t e = enter("cudaStreamQuery")) return fail(e);
  std::shared_ptr<StreamCore> core;
  if (cudaError_t e = lookUp(stream, &core)) return fail(e);
  if (core == nullptr) return cudaSuccess;
  if (refuseWhileCapturing(core)) return fail(cudaErrorStreamCaptureUnsupported);
  return core->reached(core->enqueued()) ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  if (cudaError_t e = enter("cudaStreamIsCapturing")) return fail(e);
  if (status == nullptr) return fail(cudaErrorInvalidValue);
  std::shared_ptr<StreamCore> core;
  if (cudaError_t e = lookUp(stream, &core)) return fail(e);
  *status = core == nullptr ? cudaStreamCaptureStatusNone
                            : static_cast<cudaStreamCaptureStatus>(core->captureStatus());
  return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  if (cudaError_t e = enter("cudaStreamBeginCapture")) return fail(e);
  // The legacy stream cannot be captured.
  if (stream == nullptr) return fail(cudaErrorStreamCaptureUnsupported);
  if (mode < cudaStreamCaptureModeGlobal || mode > cudaStreamCaptureModeRelaxed) {
    return fail(cudaErrorInvalidValue);
  }
  std::shared_ptr<StreamCore> core;
  if (cudaError_t e = lookUp(stream, &core)) return fail(e);
  if (core->captureStatus() != 0) return fail(cudaErrorIllegalState);
  core->beginCapture(mode, std::this_thread::get_id());
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  if (cudaError_t e = enter("cudaStreamEndCapture")) return fail(e);
  if (graph == nullptr) return fail(cudaErrorInvalidValue);
  std::shared_ptr<StreamCore> core;
  if (cudaError_t e = lookUp(stream, &core)) return fail(e);
  if (core == nullptr || core->captureStatus() == 0) return fail(cudaErrorIllegalState);
  if (core->captureMode() != cudaStreamCaptureModeRelaxed &&
      core->captureThread() != std::this_thread::get_id()) {
    return fail(cudaErrorStreamCaptureWrongThread);
  }
  const bool invalidated = core->captureStatus() == cudaStreamCaptureStatusInvalidated;
  std::vector<cudaemu::detail::Operation> ops = core->endCapture();
  if (invalidated) {
    *graph = nullptr;
    return fail(cudaErrorStreamCaptureInvalidated);
  }
  auto* g = new cudaemu::GraphHandle();
  g->operations = std::move(ops);
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mutex);
  rt.graphs.insert(g);
  *graph = g;
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
