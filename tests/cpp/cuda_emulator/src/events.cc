// Events: a record captures the stream's position at the time of the call; query, synchronize
// and cudaStreamWaitEvent look at the last record made before they were called (CUDA Runtime
// API, cudaEventRecord). A never-recorded event stands for no work and reads as complete.
// A record made while the stream captures goes into the capture instead: the event may then
// not be queried or synchronized while the capture lasts (cudaErrorCapturedEvent), and a stream
// that waits on it joins the capture (CUDA Programming Guide, "Cross-stream dependencies and
// events").
#include <cuda_runtime.h>

#include <atomic>
#include <chrono>

#include "runtime.h"
#include "submit.h"

using cudaemu::detail::enter;
using cudaemu::detail::fail;
using cudaemu::detail::Runtime;
using cudaemu::detail::runtime;
using cudaemu::detail::StreamCore;

namespace {

struct LastRecord {
  std::shared_ptr<StreamCore> stream;  // null: never recorded outside a capture
  uint64_t position = 0;
  // The capture the last record went into, while it is still under way.
  std::shared_ptr<cudaemu::detail::CaptureSequence> capture;
};

// The event's last record (an unknown handle: false).
bool lastRecord(cudaEvent_t event, LastRecord* out) {
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mutex);
  if (event == nullptr || rt.events.count(event) == 0) return false;
  out->stream = event->stream;
  out->position = event->position;
  out->capture = event->capturedIn;
  if (out->capture != nullptr && out->capture->status.load() == 0) out->capture = nullptr;
  return true;
}

// A record is an action of the stream (the legacy stream's rule applies); its position is the
// stream's once everything enqueued so far has run. A timing event also notes when that was.
cudaError_t recordEvent(cudaEvent_t event, cudaStream_t stream) {
  std::shared_ptr<std::atomic<int64_t>> reachedAt;
  {
    Runtime& rt = runtime();
    std::lock_guard<std::mutex> lock(rt.mutex);
    if (event == nullptr || rt.events.count(event) == 0) {
      return fail(cudaErrorInvalidResourceHandle);
    }
    if ((event->flags & cudaEventDisableTiming) == 0) {
      reachedAt = std::make_shared<std::atomic<int64_t>>(0);
    }
  }
  cudaemu::detail::Operation marker = [] {};
  if (reachedAt != nullptr) {
    marker = [reachedAt] {
      reachedAt->store(std::chrono::duration_cast<std::chrono::nanoseconds>(
                           std::chrono::steady_clock::now().time_since_epoch())
                           .count());
    };
  }
  std::shared_ptr<StreamCore> core;
  uint64_t position = 0;
  if (cudaError_t e = cudaemu::detail::submit(stream, std::move(marker), &core, &position)) {
    return fail(e);
  }
  std::shared_ptr<cudaemu::detail::CaptureSequence> capture = core->capture();
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mutex);
  // Destroyed meanwhile, by another thread.
  if (rt.events.count(event) == 0) return fail(cudaErrorInvalidResourceHandle);
  if (capture != nullptr) {
    // Into the capture: the event now stands for a node of the graph, not for device work.
    event->capturedIn = std::move(capture);
    event->stream = nullptr;
    event->reachedAt = nullptr;
    return cudaSuccess;
  }
  event->capturedIn = nullptr;
  event->stream = core;
  event->position = position;
  event->reachedAt = reachedAt;
  return cudaSuccess;
}

}  // namespace

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  if (cudaError_t e = enter("cudaEventCreateWithFlags")) return fail(e);
  const unsigned known = cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess;
  if (event == nullptr || (flags & ~known) != 0) return fail(cudaErrorInvalidValue);
  // An interprocess event must also be created without timing.
  if ((flags & cudaEventInterprocess) != 0 && (flags & cudaEventDisableTiming) == 0) {
    return fail(cudaErrorInvalidValue);
  }
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mutex);
  auto* handle = new CUevent_st(flags, cudaemu::detail::currentDevice());
  rt.events.insert(handle);
  ++rt.counters.liveEvents;
  *event = handle;
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  return cudaEventCreateWithFlags(event, cudaEventDefault);
}

cudaError_t cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream, unsigned int flags) {
  if (cudaError_t e = enter("cudaEventRecordWithFlags")) return fail(e);
  // cudaEventRecordExternal only changes what a capture records; outside one it is a record.
  if ((flags & ~cudaEventRecordExternal) != 0) return fail(cudaErrorInvalidValue);
  return recordEvent(event, stream);
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (cudaError_t e = enter("cudaEventRecord")) return fail(e);
  return recordEvent(event, stream);
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  if (cudaError_t e = enter("cudaEventQuery")) return fail(e);
  LastRecord r;
  if (!lastRecord(event, &r)) return fail(cudaErrorInvalidResourceHandle);
  if (r.capture != nullptr) return fail(cudaErrorCapturedEvent);
  if (r.stream == nullptr) return cudaSuccess;
  return r.stream->reached(r.position) ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (cudaError_t e = enter("cudaEventSynchronize")) return fail(e);
  LastRecord r;
  if (!lastRecord(event, &r)) return fail(cudaErrorInvalidResourceHandle);
  if (r.capture != nullptr) return fail(cudaErrorCapturedEvent);
  if (r.stream != nullptr) r.stream->waitFor(r.position);
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  if (cudaError_t e = enter("cudaStreamWaitEvent")) return fail(e);
  if (flags != 0) return fail(cudaErrorInvalidValue);
  LastRecord r;
  if (!lastRecord(event, &r)) return fail(cudaErrorInvalidResourceHandle);
  if (r.capture != nullptr) {
    // A wait on a captured record: the waiting stream joins that capture (a fork), and its
    // work from now on is recorded into it too.
    Runtime& rt = runtime();
    std::lock_guard<std::mutex> lock(rt.mutex);
    std::shared_ptr<StreamCore> waiter = cudaemu::detail::streamOf(rt, stream);
    if (waiter == nullptr) return fail(cudaErrorInvalidResourceHandle);
    if (waiter->legacy) return fail(cudaErrorStreamCaptureImplicit);
    const std::shared_ptr<cudaemu::detail::CaptureSequence> own = waiter->capture();
    if (own == nullptr) {
      waiter->beginCapture(r.capture);
    } else if (own != r.capture) {
      return fail(cudaErrorStreamCaptureMerge);  // two captures may not become one
    }
    return cudaSuccess;
  }
  // The wait refers to the record in force now; a later record does not move it.
  cudaemu::detail::Operation wait = [] {};
  if (r.stream != nullptr) {
    wait = [source = r.stream, position = r.position] { source->waitFor(position); };
  }
  if (cudaError_t e = cudaemu::detail::submit(stream, std::move(wait))) return fail(e);
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (cudaError_t e = enter("cudaEventDestroy")) return fail(e);
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mutex);
  if (event == nullptr || rt.events.erase(event) == 0) return fail(cudaErrorInvalidResourceHandle);
  // Allowed with a record still pending: the stream finishes its work regardless.
  delete event;
  --rt.counters.liveEvents;
  return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (cudaError_t e = enter("cudaEventElapsedTime")) return fail(e);
  if (ms == nullptr) return fail(cudaErrorInvalidValue);
  std::shared_ptr<std::atomic<int64_t>> a, b;
  {
    Runtime& rt = runtime();
    std::lock_guard<std::mutex> lock(rt.mutex);
    if (rt.events.count(start) == 0 || rt.events.count(end) == 0) {
      return fail(cudaErrorInvalidResourceHandle);
    }
    // Never recorded, or created without timing: no time to tell (CUDA's error for both).
    a = start->reachedAt;
    b = end->reachedAt;
  }
  if (a == nullptr || b == nullptr) return fail(cudaErrorInvalidResourceHandle);
  const int64_t ta = a->load();
  const int64_t tb = b->load();
  if (ta == 0 || tb == 0) return fail(cudaErrorNotReady);
  *ms = static_cast<float>(static_cast<double>(tb - ta) / 1e6);
  return cudaSuccess;
}
