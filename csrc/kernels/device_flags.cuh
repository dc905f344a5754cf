// Memory-ordering primitives of the ring kernels, and the one bounded wait every spin goes
// through. Device code only (sm_70 and newer: the PTX memory model's .acquire/.release).
//
// Why system scope everywhere: the other side of each counter is another GPU over NVLink/PCIe,
// or another process's context on the same GPU. GPU scope (.gpu) only orders accesses among
// threads of this device's context, so it is not enough for either case.
#pragma once

#include <cstdint>

#include "kernels/device_error.h"

namespace ring {
namespace dev {

// Acquire load of a counter that another agent advances with a release store. Everything that
// agent wrote before its release (payload, header) is visible to this thread after the load
// returns the new value; and, by the barrier that follows it in every caller, to the whole
// block. The acquire also keeps later loads of the slot from being served before the counter.
__device__ __forceinline__ uint64_t loadAcquireSys(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

// Release store of a counter: every memory access this thread performed before (and, being
// cumulative, every access it has observed through the preceding barrier) is ordered before
// the new value can be seen by an acquire load on any GPU or the host.
__device__ __forceinline__ void storeReleaseSys(uint64_t* p, uint64_t v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" : : "l"(p), "l"(v) : "memory");
}

// Relaxed load at system scope, for the host-mapped abort word: it guards no data, we only need
// to eventually see the host's store, and a volatile access is never cached or hoisted.
__device__ __forceinline__ int32_t loadRelaxedSys(const int32_t* p) {
  int32_t v;
  asm volatile("ld.relaxed.sys.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void storeRelaxedSys(int32_t* p, int32_t v) {
  asm volatile("st.relaxed.sys.global.s32 [%0], %1;" : : "l"(p), "r"(v) : "memory");
}

// Nanoseconds of the GPU's global timer. Why not clock64(): it counts this SM's cycles, whose
// rate changes with clocks; the global timer is wall time, which is what a limit in seconds
// means. Coarse (about a microsecond) but the limit is seconds.
__device__ __forceinline__ uint64_t globalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Why check the abort word only every so many polls: it lives in host memory, so each read
// crosses PCIe (about a microsecond); the counter itself is in local device memory.
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
  for (uint32_t polls = 0;; ++polls) {
    // Checked on the first miss too, so a kernel launched after an abort stops at once.
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
    r.seen = loadAcquireSys(counter);
    if (r.seen >= target) {
      r.status = kDeviceOk;
      return r;
    }
  }
}

}  // namespace dev
}  // namespace ring
