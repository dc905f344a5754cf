// Devices: count, the current device of each host thread, properties and attributes, limits,
// peer access, device-wide synchronization, and what a kernel's attributes and occupancy are.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>

#include "runtime.h"
#include "submit.h"

using cudaemu::detail::DeviceState;
using cudaemu::detail::enter;
using cudaemu::detail::fail;
using cudaemu::detail::Runtime;
using cudaemu::detail::runtime;

namespace {

constexpr int kMaxThreadsPerBlock = 1024;
constexpr int kMaxThreadsPerSm = 2048;

DeviceState* device(int ordinal) {
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mutex);
  return cudaemu::detail::deviceOf(rt, ordinal);
}

cudaemu::Config currentConfig() {
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mutex);
  return rt.config;
}

// The same 16 bytes for device d in every process (the ranks compare UUIDs to find a GPU).
void uuidOf(int d, char out[16]) {
  std::memcpy(out, "cuda-emulator-", 14);
  out[14] = static_cast<char>(0x40 + d / 256);
  out[15] = static_cast<char>(d % 256);
}

}  // namespace

cudaError_t cudaGetDeviceCount(int* count) {
  if (cudaError_t e = enter("cudaGetDeviceCount")) return fail(e);
  if (count == nullptr) return fail(cudaErrorInvalidValue);
  {
    Runtime& rt = runtime();
    std::lock_guard<std::mutex> lock(rt.mutex);
    *count = static_cast<int>(rt.devices.size());
  }
  return *count == 0 ? fail(cudaErrorNoDevice) : cudaSuccess;
}

cudaError_t cudaGetDevice(int* d) {
  if (cudaError_t e = enter("cudaGetDevice")) return fail(e);
  if (d == nullptr) return fail(cudaErrorInvalidValue);
  *d = cudaemu::detail::currentDevice();
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int d) {
  if (cudaError_t e = enter("cudaSetDevice")) return fail(e);
  if (device(d) == nullptr) return fail(cudaErrorInvalidDevice);
  cudaemu::detail::currentDevice() = d;  // per host thread, as CUDA keeps it
  // Since CUDA 12.0 cudaSetDevice initialises the device's primary context at once.
  cudaemu::detail::noteContext(d);
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int d) {
  if (cudaError_t e = enter("cudaGetDeviceProperties")) return fail(e);
  if (prop == nullptr) return fail(cudaErrorInvalidValue);
  DeviceState* state = device(d);
  if (state == nullptr) return fail(cudaErrorInvalidDevice);
  const cudaemu::Config c = currentConfig();
  std::memset(prop, 0, sizeof *prop);
  std::snprintf(prop->name, sizeof prop->name, "Emulated CUDA device %d (%d SMs x %d blocks)", d,
                c.smsPerDevice, c.blocksPerSm);
  // Which of the machine's devices it is: the same in every process, however numbered there.
  uuidOf(state->physical, prop->uuid.bytes);
  prop->totalGlobalMem = cudaemu::detail::kDeviceMemoryBytes;
  prop->sharedMemPerBlock = 48 << 10;
  prop->regsPerBlock = 65536;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = kMaxThreadsPerBlock;
  prop->multiProcessorCount = c.smsPerDevice;
  prop->maxThreadsPerMultiProcessor = kMaxThreadsPerSm;
  prop->maxBlocksPerMultiProcessor = c.blocksPerSm;
  prop->major = 9;
  prop->minor = 0;
  prop->canMapHostMemory = 1;
  prop->unifiedAddressing = 1;
  prop->pciBusID = state->physical + 1;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int d) {
  if (cudaError_t e = enter("cudaDeviceGetAttribute")) return fail(e);
  if (value == nullptr) return fail(cudaErrorInvalidValue);
  if (device(d) == nullptr) return fail(cudaErrorInvalidDevice);
  const cudaemu::Config c = currentConfig();
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: *value = kMaxThreadsPerBlock; break;
    case cudaDevAttrWarpSize: *value = 32; break;
    case cudaDevAttrMultiProcessorCount: *value = c.smsPerDevice; break;
    case cudaDevAttrCanMapHostMemory: *value = 1; break;
    case cudaDevAttrMaxThreadsPerMultiProcessor: *value = kMaxThreadsPerSm; break;
    case cudaDevAttrUnifiedAddressing: *value = 1; break;
    case cudaDevAttrComputeCapabilityMajor: *value = 9; break;
    case cudaDevAttrComputeCapabilityMinor: *value = 0; break;
    case cudaDevAttrMaxBlocksPerMultiprocessor: *value = c.blocksPerSm; break;
    default: return fail(cudaErrorInvalidValue);
  }
  return cudaSuccess;
}

cudaError_t cudaDeviceGetLimit(size_t* value, cudaLimit limit) {
  if (cudaError_t e = enter("cudaDeviceGetLimit")) return fail(e);
  if (value == nullptr) return fail(cudaErrorInvalidValue);
  DeviceState* d = device(cudaemu::detail::currentDevice());
  if (d == nullptr) return fail(cudaErrorInvalidDevice);
  std::lock_guard<std::mutex> lock(d->mutex);
  switch (limit) {
    case cudaLimitStackSize: *value = d->stackLimit; break;
    case cudaLimitPrintfFifoSize: *value = d->printfFifoBytes; break;
    case cudaLimitMallocHeapSize: *value = d->mallocHeapBytes; break;
    default: return fail(cudaErrorUnsupportedLimit);
  }
  return cudaSuccess;
}

cudaError_t cudaDeviceSetLimit(cudaLimit limit, size_t value) {
  if (cudaError_t e = enter("cudaDeviceSetLimit")) return fail(e);
  const int current = cudaemu::detail::currentDevice();
  DeviceState* d = device(current);
  if (d == nullptr) return fail(cudaErrorInvalidDevice);
  if (limit == cudaLimitStackSize) {
    // The new stack takes effect at once, so the device first finishes everything already
    // asked of it (CUDA Driver API, cuCtxSetLimit: "the device will block until all preceding
    // requested tasks are complete"). A kernel that spins for a peer makes this wait forever.
    cudaemu::detail::waitDeviceIdle(current, nullptr);
    std::lock_guard<std::mutex> lock(d->mutex);
    d->stackLimit = value;
    return cudaSuccess;
  }
  std::lock_guard<std::mutex> lock(d->mutex);
  switch (limit) {
    case cudaLimitPrintfFifoSize: d->printfFifoBytes = value; break;
    case cudaLimitMallocHeapSize: d->mallocHeapBytes = value; break;
    default: return fail(cudaErrorUnsupportedLimit);
  }
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
  if (cudaError_t e = enter("cudaDeviceSynchronize")) return fail(e);
  const int current = cudaemu::detail::currentDevice();
  if (device(current) == nullptr) return fail(cudaErrorInvalidDevice);
  cudaemu::detail::waitDeviceIdle(current, nullptr);
  return cudaSuccess;
}

cudaError_t cudaDeviceCanAccessPeer(int* canAccessPeer, int d, int peer) {
  if (cudaError_t e = enter("cudaDeviceCanAccessPeer")) return fail(e);
  if (canAccessPeer == nullptr) return fail(cudaErrorInvalidValue);
  if (device(d) == nullptr || device(peer) == nullptr) return fail(cudaErrorInvalidDevice);
  // A device is not its own peer.
  *canAccessPeer = d != peer && currentConfig().peerAccess ? 1 : 0;
  return cudaSuccess;
}

cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int flags) {
  if (cudaError_t e = enter("cudaDeviceEnablePeerAccess")) return fail(e);
  if (flags != 0) return fail(cudaErrorInvalidValue);
  const int current = cudaemu::detail::currentDevice();
  DeviceState* d = device(current);
  if (d == nullptr || device(peer) == nullptr || peer == current) {
    return fail(cudaErrorInvalidDevice);
  }
  if (!currentConfig().peerAccess) return fail(cudaErrorPeerAccessUnsupported);
  std::lock_guard<std::mutex> lock(d->mutex);
  if (!d->peersEnabled.insert(peer).second) return fail(cudaErrorPeerAccessAlreadyEnabled);
  return cudaSuccess;
}

cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attr, const void* func) {
  if (cudaError_t e = enter("cudaFuncGetAttributes")) return fail(e);
  if (attr == nullptr) return fail(cudaErrorInvalidValue);
  if (func == nullptr) return fail(cudaErrorInvalidDeviceFunction);
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mutex);
  auto it = rt.kernelLocalBytes.find(func);
  std::memset(attr, 0, sizeof *attr);
  attr->localSizeBytes = it != rt.kernelLocalBytes.end() ? it->second : rt.config.kernelLocalBytes;
  attr->maxThreadsPerBlock = kMaxThreadsPerBlock;
  attr->numRegs = 32;
  return cudaSuccess;
}

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* numBlocks, const void* func,
                                                          int blockSize, size_t dynamicSMemSize) {
  if (cudaError_t e = enter("cudaOccupancyMaxActiveBlocksPerMultiprocessor")) return fail(e);
  if (numBlocks == nullptr || blockSize <= 0) return fail(cudaErrorInvalidValue);
  if (func == nullptr) return fail(cudaErrorInvalidDeviceFunction);
  // Every kernel of the emulated device fits Config::blocksPerSm blocks per multiprocessor:
  // the same number the launch gate uses, so a co-residency check reads what will happen.
  *numBlocks = blockSize > kMaxThreadsPerBlock ? 0 : currentConfig().blocksPerSm;
  return cudaSuccess;
}
