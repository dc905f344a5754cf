// The memory-ordering primitives of the ring kernels, as PTX (the GPU build). The host build
// defines the same functions on std::atomic_ref with the same orders (host_shim.h); the kernels
// see only these names. Device code only (sm_70 and newer: the PTX memory model's
// .acquire/.release).
//
// Why system scope everywhere: the other side of each counter is another GPU over NVLink/PCIe,
// or another process's context on the same GPU. GPU scope (.gpu) only orders accesses among
// threads of this device's context, so it is not enough for either case.
#pragma once

#include <cstdint>

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
// The same for a 32-bit status word (the error record's status, read by the host with acquire).
__device__ __forceinline__ void storeReleaseSys(int32_t* p, int32_t v) {
  asm volatile("st.release.sys.global.s32 [%0], %1;" : : "l"(p), "r"(v) : "memory");
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

// One poll of a spin: a GPU thread simply polls again (the counter is in local memory).
__device__ __forceinline__ void spinPause() {}

}  // namespace dev
}  // namespace ring
