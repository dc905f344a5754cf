// Putting work on a stream: the one path every asynchronous call (copies, sets, launches,
// event records and waits) takes, so that the legacy default stream's rule is applied once.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>

#include "runtime.h"
#include "stream_core.h"

namespace cudaemu {
namespace detail {

// Enqueues `op` on `stream` (nullptr: the current device's legacy default stream, with its
// implicit ordering against the device's blocking streams). *position, if given: the
// stream's position once `op` has run. Errors: an unknown stream handle, a bad device.
cudaError_t submit(cudaStream_t stream, Operation op, std::shared_ptr<StreamCore>* core = nullptr,
                   uint64_t* position = nullptr);

// Blocks until every stream of `device` has finished the work enqueued on it before this call,
// leaving out `except` (the caller's own stream, when a launch waits for the rest).
void waitDeviceIdle(int device, const StreamCore* except);

}  // namespace detail
}  // namespace cudaemu
