// The emulated runtime's process-wide state: configuration, devices, the registries that tell
// a live handle from a destroyed or made-up one, counters, injected failures, and each host
// thread's current device and last error.
#pragma once

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

namespace cudaemu {

class StreamHandle {
 public:
  explicit StreamHandle(std::shared_ptr<detail::StreamCore> c) : core(std::move(c)) {}
  const std::shared_ptr<detail::StreamCore> core;
};

class EventHandle {
 public:
  EventHandle(unsigned int f, int dev) : flags(f), device(dev) {}
  const unsigned int flags;
  const int device;
  // The last record: the stream and its position then (position 0: never recorded, which
  // reads as complete). Guarded by Runtime::mutex.
  std::shared_ptr<detail::StreamCore> stream;
  uint64_t position = 0;
};

class GraphHandle {
 public:
  std::vector<detail::Operation> operations;  // captured, never run (no cudaGraphLaunch)
};

namespace detail {

struct DeviceState {
  DeviceState(int ordinal, size_t stackBytes, int slots);
  const int ordinal;
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
};

struct Runtime {
  Runtime(const Config& c, std::map<std::string, cudaError_t> f,
          std::map<std::string, std::chrono::milliseconds> d);
  Config config;
  std::mutex mutex;  // guards everything here but the devices' own fields
  std::vector<std::unique_ptr<DeviceState>> devices;
  std::set<StreamHandle*> streams;
  std::set<EventHandle*> events;
  std::set<GraphHandle*> graphs;
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
  Counters counters;
};

// The runtime of this process (created on first use; a forked child gets a new one).
Runtime& runtime();
DeviceState* deviceOf(Runtime& rt, int ordinal);

// The calling host thread's current device (0 until cudaSetDevice).
int& currentDevice();
// Records `error` as the calling thread's last error and returns it.
cudaError_t fail(cudaError_t error);
// The calling thread's last error; `clear`: reset it to cudaSuccess (cudaGetLastError).
cudaError_t lastError(bool clear);
// Every API call starts here: counts the call, sleeps its injected delay, and returns its
// injected failure, if any.
cudaError_t enter(const char* api);
// Records that `device` now has a primary context (cudaSetDevice makes one).
void noteContext(int device);

// Reads a configuration from CUDA_EMULATOR_* (see cuda_emulator.h).
Config configFromEnvironment(std::map<std::string, cudaError_t>* failures);

// Loud end for what CUDA leaves undefined and a test must not get away with.
[[noreturn]] void fatal(const std::string& what);

}  // namespace detail
}  // namespace cudaemu
