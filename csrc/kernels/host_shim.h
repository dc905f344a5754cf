// The CUDA built-ins the ring kernels use, mapped onto the C++ memory model, so that the kernel
// source itself (ring_kernels.cuh, reduce_kernels.cu, ring_launcher.cu) compiles with the host
// compiler and runs on the CPU: every launch becomes gridDim x blockDim host threads, "device
// memory" is host memory, and ranks are threads of one test process. Included only by the host
// build (RING_HOST_KERNELS, through kernels/cuda_api.h); the GPU build never sees it.
//
// Why: no machine that builds this project has a GPU. Run this way, the kernels' protocol
// (counters, slots, headers, aborts, spin limits) is exercised for real, compared bit for bit
// with the CPU executor, and checked by ThreadSanitizer: the flags below are std::atomic_ref
// with the same orders as the PTX they stand for, while payload and header accesses stay plain,
// so a missing acquire or release is a data race TSan reports.
//
// What it cannot show: anything about GPU speed, caching (__ldcv is a plain load here), warps,
// or the weaker-than-C++ corners of the PTX model. Those need a GPU (scripts/gpu_check.sh).
//
// Two runtimes underneath. Alone (RING_HOST_KERNELS), the shim carries a tiny synchronous
// runtime of its own: a launch runs the whole grid and returns, every copy is immediate. With
// RING_CUDA_EMULATOR as well, the runtime API comes from the emulated CUDA runtime of the tests
// (tests/cpp/cuda_emulator: streams, events, IPC, a device of limited size), and the shim keeps
// only the built-ins; the emulator runs each block through runBlockThreads (host_shim.cc).
#pragma once

#if !defined(RING_HOST_KERNELS)
#error "host_shim.h is for the host build of the kernels only (RING_HOST_KERNELS)"
#endif

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>

// ---- the runtime underneath, then the qualifiers as plain C++ --------------------------------------
// Under the emulator, <cuda_runtime.h> is the tests' own (api/cuda_runtime.h, the C++ tests) or
// CUDA's (the extension built to run over the emulator as libcudart.so.13); either way the
// vector types and the runtime API come from it, and launches from cuda_emulator_launch.h.
#if defined(RING_CUDA_EMULATOR)
#include <cuda_runtime.h>
#include <cuda_emulator_launch.h>
#endif

// CUDA's headers define these as attributes for nvcc only (empty for a host compiler), or as
// an always-inline attribute (__forceinline__): redefined here as what the host build needs.
#undef __global__
#undef __device__
#undef __host__
#undef __forceinline__
#undef __noinline__
#undef __launch_bounds__
#undef __grid_constant__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __grid_constant__

// ---- vector and index types ------------------------------------------------------------------------
#if !defined(RING_CUDA_EMULATOR)
struct alignas(16) uint4 {
  unsigned int x, y, z, w;
};
struct uint3 {
  unsigned int x = 0, y = 0, z = 0;
};
struct dim3 {
  unsigned int x = 1, y = 1, z = 1;
  dim3() = default;
  dim3(unsigned int vx, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
};
#endif

// Per host thread: which CUDA thread of which block it plays, and the launch's shape.
inline thread_local uint3 threadIdx;
inline thread_local uint3 blockIdx;
inline thread_local dim3 blockDim;
inline thread_local dim3 gridDim;

namespace ring {
namespace hostshim {

// One CUDA block's barrier: every thread of the block arrives, the last one releases them all.
// A mutex and condition variable, so the barrier itself is a happens-before edge that TSan sees
// (as __syncthreads orders the block's memory accesses on a GPU), and waiting threads sleep
// instead of spinning on two cores.
class BlockBarrier {
 public:
  explicit BlockBarrier(int threads) : threads_(threads) {}
  // Returns the OR of every thread's `predicate` (as __syncthreads_or).
  int arriveAndWait(int predicate);

 private:
  std::mutex mutex_;
  std::condition_variable released_;
  const int threads_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  int pending_ = 0;  // OR of this generation's predicates so far
  int result_ = 0;   // OR of the last completed generation
};

// The threads of one block share this (set as a thread-local by the launcher).
BlockBarrier* currentBarrier();

// Host threads per block: a launch asks for up to 512; the host runs at most this many (the
// kernels stride by blockDim.x, so any count computes the same result). Default 8;
// TORCH_RING_HOST_BLOCK_THREADS or setBlockThreads() change it.
int blockThreads();
void setBlockThreads(int threads);

// Runs `body(closure)` on grid.x * min(block.x, blockThreads()) host threads, each with its
// threadIdx/blockIdx/blockDim/gridDim set, every block at once, and joins them all: a launch
// returns when the "kernel" has ended (the synchronous build's stream). Under the emulator,
// cudaemu::runBlockThreads runs one block the same way, when the emulated device has room.
void runGrid(dim3 grid, dim3 block, void (*body)(void* closure), void* closure);

// How often host-run waits read the abort word and how many polls they made, in this process:
// on a GPU the abort word is host memory read across PCIe, so the tests hold a wait to one
// read per kAbortCheckInterval polls (device_flags.cuh).
inline std::atomic<uint64_t> abortWordReads{0};
inline std::atomic<uint64_t> spinPolls{0};
// 16-byte units the ring kernels moved (once per block and step: moveStep), in this process:
// how the tests see that a misaligned tensor still takes the wide path.
inline std::atomic<uint64_t> vectorUnits{0};

}  // namespace hostshim

namespace dev {

// ---- the PTX wrappers of device_flags.cuh, as the C++ memory model's orders --------------------

// ld.acquire.sys
inline uint64_t loadAcquireSys(const uint64_t* p) {
  return std::atomic_ref<uint64_t>(*const_cast<uint64_t*>(p)).load(std::memory_order_acquire);
}
// st.release.sys (64-bit counters)
inline void storeReleaseSys(uint64_t* p, uint64_t v) {
  std::atomic_ref<uint64_t>(*p).store(v, std::memory_order_release);
}
// st.release.sys (32-bit status words)
inline void storeReleaseSys(int32_t* p, int32_t v) {
  std::atomic_ref<int32_t>(*p).store(v, std::memory_order_release);
}
// ld.relaxed.sys / st.relaxed.sys (the abort word: it guards no data)
inline int32_t loadRelaxedSys(const int32_t* p) {
  hostshim::abortWordReads.fetch_add(1, std::memory_order_relaxed);
  return std::atomic_ref<int32_t>(*const_cast<int32_t*>(p)).load(std::memory_order_relaxed);
}
inline void storeRelaxedSys(int32_t* p, int32_t v) {
  std::atomic_ref<int32_t>(*p).store(v, std::memory_order_relaxed);
}
// %globaltimer: wall-clock nanoseconds.
inline uint64_t globalTimerNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}
// One poll of a spin: a GPU thread just polls again; a host thread lets the others run (there
// are far more "CUDA threads" than cores here, and the one it waits for may need this core).
inline void spinPause() {
  hostshim::spinPolls.fetch_add(1, std::memory_order_relaxed);
  std::this_thread::yield();
}

}  // namespace dev
}  // namespace ring

// ---- memory built-ins -------------------------------------------------------------------------------

// ld.global.cv: on a GPU, "fetch again, do not trust L1". The host has coherent caches, so a
// plain load: kept plain on purpose, so that TSan sees every payload and header read.
template <typename T>
inline T __ldcv(const T* p) {
  return *p;
}

namespace ring {
namespace hostshim {
// How many system-scope fences host-run kernels have executed in this process: a fence costs a
// system-wide drain on a GPU, so the tests hold the kernels to one per block per step.
inline std::atomic<uint64_t> systemFences{0};
}  // namespace hostshim
}  // namespace ring

// A system-wide fence: seq_cst. (TSan does not model stand-alone fences; the kernels never rely
// on one for ordering that the release/acquire pairs and barriers do not already give.)
inline void __threadfence_system() {
  ring::hostshim::systemFences.fetch_add(1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);
}
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }

// atomicCAS on device memory: a relaxed read-modify-write (device atomics carry no ordering).
inline unsigned int atomicCAS(unsigned int* address, unsigned int compare, unsigned int value) {
  std::atomic_ref<unsigned int>(*address).compare_exchange_strong(compare, value,
                                                                  std::memory_order_relaxed);
  return compare;
}

inline void __syncthreads() { ring::hostshim::currentBarrier()->arriveAndWait(0); }
inline int __syncthreads_or(int predicate) {
  return ring::hostshim::currentBarrier()->arriveAndWait(predicate != 0);
}

// ---- the runtime API the launchers call (the synchronous build's own) -----------------------------------
#if !defined(RING_CUDA_EMULATOR)


enum cudaError_t : int {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
};
enum cudaMemcpyKind : int {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
};
struct HostShimStream;
using cudaStream_t = HostShimStream*;

inline const char* cudaGetErrorString(cudaError_t e) {
  return e == cudaSuccess ? "no error" : "invalid argument";
}
inline const char* cudaGetErrorName(cudaError_t e) {
  return e == cudaSuccess ? "cudaSuccess" : "cudaErrorInvalidValue";
}
inline cudaError_t cudaGetLastError() { return cudaSuccess; }

// Synchronous, like every launch here.
inline cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind,
                                   cudaStream_t) {
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}

enum cudaLimit : int { cudaLimitStackSize = 0 };
// The host has no device stack to size.
inline cudaError_t cudaDeviceGetLimit(size_t* value, cudaLimit) {
  *value = 0;
  return cudaSuccess;
}
inline cudaError_t cudaDeviceSetLimit(cudaLimit, size_t) { return cudaSuccess; }

struct cudaFuncAttributes {
  size_t localSizeBytes = 0;
  size_t sharedSizeBytes = 0;
  int numRegs = 0;
  int maxThreadsPerBlock = 1024;
};
// Host "kernels" are always loaded and use no device stack.
template <typename F>
inline cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attr, F*) {
  *attr = cudaFuncAttributes{};
  return cudaSuccess;
}
// Every host block is co-resident: as many as one could ask for.
template <typename F>
inline cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, F*, int, size_t) {
  *blocks = 1 << 20;
  return cudaSuccess;
}

namespace ring {
namespace hostshim {

template <typename... P, size_t... I>
void callWithArgs(void (*kernel)(P...), void** args, std::index_sequence<I...>) {
  // Each host thread gets its own copy of the parameters, as each CUDA thread reads them.
  std::tuple<std::decay_t<P>...> values{*static_cast<std::decay_t<P>*>(args[I])...};
  kernel(std::get<I>(values)...);
}

template <typename... P>
struct KernelCall {
  void (*kernel)(P...);
  void** args;
  static void run(void* self) {
    auto* call = static_cast<KernelCall*>(self);
    callWithArgs(call->kernel, call->args, std::index_sequence_for<P...>{});
  }
};

}  // namespace hostshim
}  // namespace ring

// cudaLaunchKernel's typed form: runs `kernel` on grid x block host threads and returns when
// they have all finished.
template <typename... P>
inline cudaError_t cudaLaunchKernel(void (*kernel)(P...), dim3 grid, dim3 block, void** args,
                                    size_t sharedMem = 0, cudaStream_t stream = nullptr) {
  (void)sharedMem;
  (void)stream;
  if (grid.x == 0 || block.x == 0) return cudaErrorInvalidValue;
  ring::hostshim::KernelCall<P...> call{kernel, args};
  ring::hostshim::runGrid(grid, block, &ring::hostshim::KernelCall<P...>::run, &call);
  return cudaSuccess;
}

#endif  // !RING_CUDA_EMULATOR

namespace ring {

// The project's one kernel launch (kernels/cuda_api.h has the GPU build's): on the emulated
// runtime a typed launch that copies the arguments now and runs later on the stream; on the
// synchronous shim, the typed cudaLaunchKernel above.
template <typename... P>
inline cudaError_t launchKernel(void (*kernel)(P...), dim3 grid, dim3 block, void** args,
                                cudaStream_t stream) {
#if defined(RING_CUDA_EMULATOR)
  return cudaemu::launchTyped(kernel, grid, block, args, 0, stream);
#else
  return cudaLaunchKernel(kernel, grid, block, args, 0, stream);
#endif
}

}  // namespace ring
