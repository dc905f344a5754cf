// What memory a pointer is (cudaPointerGetAttributes), page-locking host memory the caller
// allocated (cudaHostRegister), the device's memory figures, and the copies and sets that are
// not the basic ones: synchronous cudaMemset, 2D copies, copies between devices.
#include <cuda_runtime.h>

#include <cstring>
#include <iterator>

#include "runtime.h"
#include "submit.h"

using cudaemu::detail::enter;
using cudaemu::detail::fail;
using cudaemu::detail::Runtime;
using cudaemu::detail::runtime;

using cudaemu::detail::holding;
using cudaemu::detail::kDeviceMemoryBytes;

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attributes, const void* ptr) {
  if (cudaError_t e = enter("cudaPointerGetAttributes")) return fail(e);
  if (attributes == nullptr) return fail(cudaErrorInvalidValue);
  std::memset(attributes, 0, sizeof *attributes);
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mutex);
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  if (auto a = holding(rt.allocations, p); a != rt.allocations.end()) {
    // Device memory: reachable from the device only (on a GPU; the emulator's is host memory,
    // but it answers as a GPU would).
    attributes->type = cudaMemoryTypeDevice;
    attributes->device = a->second.device;
    attributes->devicePointer = const_cast<void*>(ptr);
    return cudaSuccess;
  }
  if (holding(rt.mappings, p) != rt.mappings.end()) {
    attributes->type = cudaMemoryTypeDevice;
    attributes->device = cudaemu::detail::currentDevice();
    attributes->devicePointer = const_cast<void*>(ptr);
    return cudaSuccess;
  }
  for (const auto* pinned : {&rt.hostAllocations, &rt.registered}) {
    if (auto h = holding(*pinned, p); h != pinned->end()) {
      // Page-locked host memory: with unified addressing the device reaches it at the host's
      // address (CUDA Programming Guide, "Unified Virtual Address Space").
      attributes->type = cudaMemoryTypeHost;
      attributes->device = h->second.device;
      attributes->devicePointer = const_cast<void*>(ptr);
      attributes->hostPointer = const_cast<void*>(ptr);
      return cudaSuccess;
    }
  }
  // Since CUDA 11, ordinary host memory is not an error: its type says it is unregistered.
  attributes->type = cudaMemoryTypeUnregistered;
  attributes->device = -2;  // what CUDA reports for it (no device owns it)
  return cudaSuccess;
}

cudaError_t cudaHostRegister(void* ptr, size_t size, unsigned int flags) {
  if (cudaError_t e = enter("cudaHostRegister")) return fail(e);
  const unsigned known = cudaHostRegisterPortable | cudaHostRegisterMapped;
  if (ptr == nullptr || size == 0 || (flags & ~known) != 0) return fail(cudaErrorInvalidValue);
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mutex);
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  // A range that overlaps one registered already is refused (CUDA:
  // cudaErrorHostMemoryAlreadyRegistered, reported here as an invalid value).
  auto next = rt.registered.lower_bound(p);
  if ((next != rt.registered.end() && next->first < p + size) ||
      holding(rt.registered, p) != rt.registered.end()) {
    return fail(cudaErrorInvalidValue);
  }
  rt.registered[p] = cudaemu::detail::HostAllocation{size, flags,
                                                     cudaemu::detail::currentDevice()};
  return cudaSuccess;
}

cudaError_t cudaHostUnregister(void* ptr) {
  if (cudaError_t e = enter("cudaHostUnregister")) return fail(e);
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mutex);
  // Only the base address a registration began at unregisters it.
  if (rt.registered.erase(reinterpret_cast<uintptr_t>(ptr)) == 0) {
    return fail(cudaErrorInvalidValue);
  }
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  if (cudaError_t e = enter("cudaMemGetInfo")) return fail(e);
  if (free == nullptr || total == nullptr) return fail(cudaErrorInvalidValue);
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mutex);
  const int device = cudaemu::detail::currentDevice();
  size_t used = 0;
  for (const auto& entry : rt.allocations) {
    if (entry.second.device == device) used += entry.second.bytes;
  }
  *total = kDeviceMemoryBytes;
  *free = used < kDeviceMemoryBytes ? kDeviceMemoryBytes - used : 0;
  return cudaSuccess;
}

cudaError_t cudaMemset(void* devPtr, int value, size_t count) {
  // Synchronous with respect to the host: the set on the legacy stream, then its end.
  if (cudaError_t e = cudaMemsetAsync(devPtr, value, count, nullptr)) return e;
  return cudaStreamSynchronize(nullptr);
}

cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch,
                              size_t width, size_t height, cudaMemcpyKind kind,
                              cudaStream_t stream) {
  if (cudaError_t e = enter("cudaMemcpy2DAsync")) return fail(e);
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) {
    return fail(cudaErrorInvalidMemcpyDirection);
  }
  if (width == 0 || height == 0) return cudaSuccess;
  if (dst == nullptr || src == nullptr || width > dpitch || width > spitch) {
    return fail(cudaErrorInvalidValue);
  }
  {
    Runtime& rt = runtime();
    std::lock_guard<std::mutex> lock(rt.mutex);
    const size_t srcSpan = spitch * (height - 1) + width;
    const size_t dstSpan = dpitch * (height - 1) + width;
    if (!cudaemu::detail::copyEndsAccessible(rt, kind, dst, dstSpan, src, srcSpan)) {
      return fail(cudaErrorInvalidValue);
    }
  }
  cudaError_t e = cudaemu::detail::submit(stream, [=] {
    for (size_t row = 0; row < height; ++row) {
      std::memmove(static_cast<char*>(dst) + row * dpitch,
                   static_cast<const char*>(src) + row * spitch, width);
    }
  });
  return e == cudaSuccess ? e : fail(e);
}

cudaError_t cudaMemcpyPeerAsync(void* dst, int dstDevice, const void* src, int srcDevice,
                                size_t count, cudaStream_t stream) {
  if (cudaError_t e = enter("cudaMemcpyPeerAsync")) return fail(e);
  {
    Runtime& rt = runtime();
    std::lock_guard<std::mutex> lock(rt.mutex);
    if (cudaemu::detail::deviceOf(rt, dstDevice) == nullptr ||
        cudaemu::detail::deviceOf(rt, srcDevice) == nullptr) {
      return fail(cudaErrorInvalidDevice);
    }
    if (count == 0) return cudaSuccess;
    if (!cudaemu::detail::deviceAccessible(rt, src, count) ||
        !cudaemu::detail::deviceAccessible(rt, dst, count)) {
      return fail(cudaErrorInvalidValue);
    }
  }
  cudaError_t e = cudaemu::detail::submit(stream, [=] { std::memmove(dst, src, count); });
  return e == cudaSuccess ? e : fail(e);
}
