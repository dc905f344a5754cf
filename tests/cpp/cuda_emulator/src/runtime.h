// The emulated runtime's process-wide state: configuration, devices, the registries that tell
// a live handle from a destroyed or made-up one, counters, injected failures, and each host
// thread's current device and last error.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "cuda_emulator.h"
#include "stream_core.h"

// The runtime's handles, under the names CUDA's own headers give their opaque structs (so that
// the same sources build against either header: the tests' api/cuda_runtime.h or CUDA's).
struct CUstream_st {
  CUstream_st(std::shared_ptr<cudaemu::detail::StreamCore> c, int p)
      : core(std::move(c)), priority(p) {}
  const std::shared_ptr<cudaemu::detail::StreamCore> core;
  const int priority;  // only reported back: the emulated device has no scheduler to honour it
};

struct CUevent_st {
  CUevent_st(unsigned int f, int dev) : flags(f), device(dev) {}
  const unsigned int flags;
  const int device;
  // The last record: the stream and its position then (position 0: never recorded, which
  // reads as complete). Guarded by Runtime::mutex.
  std::shared_ptr<cudaemu::detail::StreamCore> stream;
  uint64_t position = 0;
  // With timing: when the last record's place in its stream was reached (nanoseconds of the
  // steady clock; 0 until then).
  std::shared_ptr<std::atomic<int64_t>> reachedAt;
  // A record made while its stream captured: the capture it went into (null otherwise).
  std::shared_ptr<cudaemu::detail::CaptureSequence> capturedIn;
};

struct CUgraph_st {
  std::vector<cudaemu::detail::Operation> operations;  // captured, in order
};

// An instantiated graph: launching it runs the captured operations again, in their order.
struct CUgraphExec_st {
  std::vector<cudaemu::detail::Operation> operations;
};

namespace cudaemu {

namespace detail {

// What an emulated device reports as its memory (totalGlobalMem, cudaMemGetInfo's total).
constexpr size_t kDeviceMemoryBytes = size_t{80} << 30;

struct DeviceState {
  DeviceState(int ordinal, int physical, size_t stackBytes, int slots);
  const int ordinal;   // as this process numbers it
  const int physical;  // which of the machine's devices (CUDA_VISIBLE_DEVICES maps them)
  std::mutex mutex;  // guards the fields below
  std::condition_variable roomFreed;
  int slots;         // blocks that fit at once: multiprocessors x resident blocks each
  int resident = 0;  // blocks of any launch resident now
  size_t stackLimit;
  size_t printfFifoBytes = 1 << 20;
  size_t mallocHeapBytes = 8 << 20;
  std::set<int> peersEnabled;  // cudaDeviceEnablePeerAccess'ed peer ordinals
  // The legacy default stream and every stream created on this device (device-wide waits,
  // the legacy rule). Guarded by Runtime::mutex, not by `mutex`.
  std::shared_ptr<StreamCore> legacy;
  std::vector<std::weak_ptr<StreamCore>> streams;
};

// A cudaMalloc allocation: a memfd mapped shared, a header page (SharedHeader, read by the
// processes that open it) and then the bytes the caller sees.
struct DeviceAllocation {
  int fd;
  char* mapBase;
  size_t mapBytes;
  size_t bytes;
  int device;
  uint64_t id;
};
// Another process's allocation opened here through its IPC handle.
struct IpcMapping {
  uint64_t id;
  char* mapBase;
  size_t mapBytes;
  size_t bytes;
  int refs;  // opens of the same handle share the mapping (CUDA counts them)
};
struct HostAllocation {
  size_t bytes;
  unsigned int flags;
  int device;  // current when it was allocated or registered
};

struct Runtime {
  Runtime(const Config& c, std::map<std::string, cudaError_t> f,
          std::map<std::string, std::chrono::milliseconds> d);
  Config config;
  std::mutex mutex;  // guards everything here but the devices' own fields
  std::vector<std::unique_ptr<DeviceState>> devices;
  std::set<CUstream_st*> streams;
  std::set<CUevent_st*> events;
  std::set<CUgraph_st*> graphs;
  std::set<CUgraphExec_st*> graphExecs;
  std::map<std::string, cudaError_t> failures;
  std::map<std::string, std::chrono::milliseconds> delays;
  std::map<std::string, uint64_t> calls;
  // Devices with a primary context in this process (see enter()): a context, once made, stays.
  std::set<int> contexts;
  std::map<const void*, size_t> kernelLocalBytes;
  // Keyed by the pointer the caller got.
  std::map<uintptr_t, DeviceAllocation> allocations;
  std::map<uintptr_t, IpcMapping> mappings;
  std::map<uintptr_t, HostAllocation> hostAllocations;
  // cudaHostRegister'ed ranges (page-locked in CUDA; here only known, so copies may use them).
  std::map<uintptr_t, HostAllocation> registered;
  // Capture sequences under way (capture.cc: who may make potentially unsafe calls).
  std::vector<std::weak_ptr<CaptureSequence>> capturing;
  Counters counters;
};

// The runtime of this process (created on first use; a forked child gets a new one).
Runtime& runtime();
DeviceState* deviceOf(Runtime& rt, int ordinal);

// The calling host thread's current device (0 until cudaSetDevice).
int& currentDevice();
// The calling host thread's stream capture interaction mode (cudaStreamCaptureMode's values;
// Global until cudaThreadExchangeStreamCaptureMode).
int& captureInteractionMode();
// The calling host thread's per-thread default stream on `device` (made on first use, caller
// holds rt.mutex; a blocking stream of the device, as CUDA's per-thread stream is).
std::shared_ptr<StreamCore> perThreadStream(DeviceState& device);
// The stream a handle names (nullptr and cudaStreamLegacy: the current device's legacy stream,
// made on first use; cudaStreamPerThread: the thread's own), or null for an unknown handle.
// Caller holds rt.mutex.
std::shared_ptr<StreamCore> streamOf(Runtime& rt, cudaStream_t stream);
bool isLegacyHandle(cudaStream_t stream);
// Whether a handle names a stream of the calling thread's current device (the legacy stream's
// handles, cudaStreamPerThread) rather than one that cudaStreamCreate made.
bool namesCurrentDevicesStream(cudaStream_t stream);
// The error for a handle that streamOf does not resolve: an invalid current device for the
// handles that name its stream, else an unknown handle.
cudaError_t unresolvedStreamError(cudaStream_t stream);
// Whether [ptr, ptr + bytes) lies in memory a kernel or a copy engine may touch: a cudaMalloc
// allocation, a mapped IPC handle, or page-locked host memory (cudaHostAlloc, cudaHostRegister:
// with unified addressing the device reaches it at the host's address). Caller holds rt.mutex.
bool deviceAccessible(Runtime& rt, const void* ptr, size_t bytes);
// Whether the ends that a copy of `kind` names as the device's ([dst, dst + dstBytes) and
// [src, src + srcBytes)) are memory the device can reach (deviceAccessible); the host's ends
// are not checked. Caller holds rt.mutex.
bool copyEndsAccessible(Runtime& rt, cudaMemcpyKind kind, const void* dst, size_t dstBytes,
                        const void* src, size_t srcBytes);
// The entry of `m` (start address -> a range with .bytes) whose range holds `p`, or m.end().
template <typename Map>
typename Map::const_iterator holding(const Map& m, uintptr_t p) {
  auto it = m.upper_bound(p);
  if (it == m.begin()) return m.end();
  --it;
  return p < it->first + it->second.bytes ? it : m.end();
}
// The capture rules of a call made now (capture.cc): cudaSuccess, or the error of a potentially
// unsafe call (`api`) that the calling thread may not make while a capture is under way (the
// captures that forbid it are invalidated).
cudaError_t captureRulesAllow(const char* api);
// Records `error` as the calling thread's last error and returns it.
cudaError_t fail(cudaError_t error);
// The calling thread's last error; `clear`: reset it to cudaSuccess (cudaGetLastError).
cudaError_t lastError(bool clear);
// Every API call starts here: counts the call, sleeps its injected delay, and returns its
// injected failure, if any.
cudaError_t enter(const char* api);
// Records that `device` now has a primary context (cudaSetDevice makes one).
void noteContext(int device);

// The machine's device indices this process sees, in its order (Config::visibleDevices).
std::vector<int> visiblePhysicalDevices(const Config& config);

// Reads a configuration from CUDA_EMULATOR_* (see cuda_emulator.h).
Config configFromEnvironment(std::map<std::string, cudaError_t>* failures,
                             std::map<std::string, std::chrono::milliseconds>* delays);

// Loud end for what CUDA leaves undefined and a test must not get away with.
[[noreturn]] void fatal(const std::string& what);

}  // namespace detail
}  // namespace cudaemu
