// Streams and stream capture, and submit(): how work reaches a stream.
#include <cuda_runtime.h>

#include <algorithm>
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

bool isLegacyHandle(cudaStream_t stream) {
  return stream == nullptr || stream == cudaStreamLegacy;
}

bool namesCurrentDevicesStream(cudaStream_t stream) {
  return isLegacyHandle(stream) || stream == cudaStreamPerThread;
}

cudaError_t unresolvedStreamError(cudaStream_t stream) {
  return namesCurrentDevicesStream(stream) ? cudaErrorInvalidDevice
                                           : cudaErrorInvalidResourceHandle;
}

std::shared_ptr<StreamCore> streamOf(Runtime& rt, cudaStream_t stream) {
  if (namesCurrentDevicesStream(stream)) {
    DeviceState* d = deviceOf(rt, currentDevice());
    if (d == nullptr) return nullptr;
    return isLegacyHandle(stream) ? legacyOf(*d) : perThreadStream(*d);
  }
  if (rt.streams.count(stream) == 0) return nullptr;
  return stream->core;
}

cudaError_t submit(cudaStream_t stream, Operation op, std::shared_ptr<StreamCore>* coreOut,
                   uint64_t* position) {
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mutex);
  std::shared_ptr<StreamCore> core = streamOf(rt, stream);
  if (core == nullptr) return unresolvedStreamError(stream);
  uint64_t at = 0;
  if (core->legacy) {
    DeviceState* d = deviceOf(rt, core->device);
    std::vector<std::shared_ptr<StreamCore>> blocking = liveStreams(*d, true);
    // While a blocking stream captures, work on the legacy stream would make it depend on the
    // capture: refused, and the capture is invalidated (CUDA Programming Guide, "Prohibited
    // and unhandled operations").
    bool implicit = false;
    for (const auto& s : blocking) {
      if (s->captureStatus() != 0) {
        s->invalidateCapture();
        implicit = true;
      }
    }
    if (implicit) return cudaErrorStreamCaptureImplicit;
    // The legacy rule (CUDA Driver API, "Stream synchronization behavior"): the legacy stream
    // first waits for every blocking stream, the action is queued, then every blocking stream
    // waits for the legacy stream.
    for (const auto& s : blocking) {
      const uint64_t p = s->enqueued();
      if (!s->reached(p)) core->enqueue([s, p] { s->waitFor(p); });
    }
    at = core->enqueue(std::move(op));
    for (const auto& s : blocking) s->enqueue([core, at] { core->waitFor(at); });
  } else {
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

namespace {

// CUDA's range on current GPUs (cudaDeviceGetStreamPriorityRange): lower numbers are higher
// priorities; a priority outside the range is clamped to it.
constexpr int kLeastPriority = 0;
constexpr int kGreatestPriority = -5;

cudaError_t createStream(cudaStream_t* stream, unsigned int flags, int priority) {
  if (stream == nullptr || (flags & ~cudaStreamNonBlocking) != 0) {
    return fail(cudaErrorInvalidValue);
  }
  priority = std::min(kLeastPriority, std::max(kGreatestPriority, priority));
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
  auto* handle = new CUstream_st(core, priority);
  rt.streams.insert(handle);
  ++rt.counters.liveStreams;
  *stream = handle;
  return cudaSuccess;
}

}  // namespace

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  if (cudaError_t e = enter("cudaStreamCreateWithFlags")) return fail(e);
  return createStream(stream, flags, kLeastPriority);
}

cudaError_t cudaStreamCreateWithPriority(cudaStream_t* stream, unsigned int flags, int priority) {
  if (cudaError_t e = enter("cudaStreamCreateWithPriority")) return fail(e);
  return createStream(stream, flags, priority);
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

cudaError_t cudaStreamGetPriority(cudaStream_t stream, int* priority) {
  if (cudaError_t e = enter("cudaStreamGetPriority")) return fail(e);
  if (priority == nullptr) return fail(cudaErrorInvalidValue);
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mutex);
  if (cudaemu::detail::namesCurrentDevicesStream(stream)) {
    *priority = kLeastPriority;
    return cudaSuccess;
  }
  if (rt.streams.count(stream) == 0) return fail(cudaErrorInvalidResourceHandle);
  *priority = stream->priority;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetStreamPriorityRange(int* leastPriority, int* greatestPriority) {
  if (cudaError_t e = enter("cudaDeviceGetStreamPriorityRange")) return fail(e);
  if (leastPriority != nullptr) *leastPriority = kLeastPriority;
  if (greatestPriority != nullptr) *greatestPriority = kGreatestPriority;
  return cudaSuccess;
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

// The stream behind a handle for the calls that only look at it.
cudaError_t lookUp(cudaStream_t stream, std::shared_ptr<StreamCore>* out) {
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mutex);
  *out = cudaemu::detail::streamOf(rt, stream);
  return *out != nullptr ? cudaSuccess : cudaemu::detail::unresolvedStreamError(stream);
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
  if (core->legacy) {
    // An action of the legacy stream: it waits for every blocking stream first.
    if (cudaError_t e = cudaemu::detail::submit(stream, [] {}, &core, &position)) return fail(e);
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
  if (refuseWhileCapturing(core)) return fail(cudaErrorStreamCaptureUnsupported);
  return core->reached(core->enqueued()) ? cudaSuccess : cudaErrorNotReady;
}

// Host functions run on the stream's own thread, in their place in its order: the stream's
// later work waits for them (CUDA Runtime API, cudaLaunchHostFunc).
cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* userData) {
  if (cudaError_t e = enter("cudaLaunchHostFunc")) return fail(e);
  if (fn == nullptr) return fail(cudaErrorInvalidValue);
  cudaError_t e = cudaemu::detail::submit(stream, [fn, userData] { fn(userData); });
  return e == cudaSuccess ? e : fail(e);
}

cudaError_t cudaStreamAddCallback(cudaStream_t stream, cudaStreamCallback_t callback,
                                  void* userData, unsigned int flags) {
  if (cudaError_t e = enter("cudaStreamAddCallback")) return fail(e);
  // flags: "reserved for future use, must be 0".
  if (callback == nullptr || flags != 0) return fail(cudaErrorInvalidValue);
  cudaError_t e = cudaemu::detail::submit(stream, [callback, stream, userData] {
    callback(stream, cudaSuccess, userData);
  });
  return e == cudaSuccess ? e : fail(e);
}
