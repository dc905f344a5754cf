// The one bounded wait every spin of the ring kernels goes through, over the memory-ordering
// primitives: PTX in the GPU build (ptx_primitives.cuh), std::atomic_ref with the same orders
// in the host build (host_shim.h).
#pragma once

#include <cstdint>

#include "kernels/cuda_api.h"
#include "kernels/device_error.h"
#if !defined(RING_HOST_KERNELS)
#include "kernels/ptx_primitives.cuh"
#endif

namespace ring {
namespace dev {

// Why check the abort word only every so many polls: it lives in host memory, so each read
// crosses PCIe (about a microsecond); the counter itself is in local device memory. Not on a
// wait's first miss either: a pipeline step whose message is a few polls late (the usual case)
// would pay that read every step. A kernel launched after an abort still stops at once: it
// reads the word at its start (ring_kernels.cuh) before any wait.
constexpr uint32_t kAbortCheckInterval = 256;

struct WaitBounds {
  const int32_t* abortWord;  // host-mapped HostMappedControl::abort (device pointer)
  uint64_t spinLimitNs;      // give up after this long in ONE wait (a backstop: see below)
};

struct WaitResult {
  DeviceStatus status;
  uint64_t seen;  // last counter value read
};

// Polls *counter until it reaches `target`. Run by ONE thread per block; the others wait at the
// barrier that follows. Returns kDeviceOk, or kDeviceAborted once the host (or another block)
// set the abort word, or kDeviceSpinLimit after bounds.spinLimitNs: never hangs. The spin
// limit is a backstop behind the host watchdog (which aborts at the group timeout), set above
// that timeout, so that a kernel exits even if its host process stopped watching it.
__device__ __forceinline__ WaitResult waitAtLeast(const uint64_t* counter, uint64_t target,
                                                  const WaitBounds& bounds) {
  WaitResult r;
  r.seen = loadAcquireSys(counter);
  if (r.seen >= target) {
    r.status = kDeviceOk;
    return r;
  }
  const uint64_t start = globalTimerNs();
  for (uint32_t polls = 1;; ++polls) {
    spinPause();
    r.seen = loadAcquireSys(counter);
    if (r.seen >= target) {
      r.status = kDeviceOk;
      return r;
    }
    // Every kAbortCheckInterval-th poll, never the first (see the top).
    if (polls % kAbortCheckInterval == 0) {
      if (loadRelaxedSys(bounds.abortWord) != 0) {
        r.status = kDeviceAborted;
        return r;
      }
      if (globalTimerNs() - start > bounds.spinLimitNs) {
        r.status = kDeviceSpinLimit;
        return r;
      }
    }
  }
}

}  // namespace dev
}  // namespace ring
