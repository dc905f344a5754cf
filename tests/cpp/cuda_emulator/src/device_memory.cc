// Device memory, IPC handles and host-mapped memory.
//
// Why memfd: an allocation must map the same bytes in another process that opens its IPC
// handle. Each cudaMalloc is an anonymous memory file mapped shared; a peer process opens it
// through /proc/<exporter pid>/fd/<fd> and maps it too, and the kernel frees it when the last
// mapping and descriptor are gone, so a killed process leaves nothing behind.
//
// The first page of each file is a header that every process mapping it can read: a magic and
// an id (so a handle whose descriptor number was reused by another file is refused), and who
// has it open. cudaFree of an allocation that a live process still has open is undefined
// behaviour in CUDA ("Calling cudaFree on an exported memory region before calling
// cudaIpcCloseMemHandle in the importing context will result in undefined behavior"): here it
// ends the exporting process loudly, so that a test sees it.
#include <cuda_runtime.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>
#include <random>
#include <string>

#include "runtime.h"
#include "submit.h"

using cudaemu::detail::DeviceAllocation;
using cudaemu::detail::enter;
using cudaemu::detail::fail;
using cudaemu::detail::IpcMapping;
using cudaemu::detail::Runtime;
using cudaemu::detail::runtime;

namespace {

constexpr uint64_t kAllocationMagic = 0x454d55434d454d31ull;  // "EMUCMEM1"
constexpr uint32_t kHandleMagic = 0x48435045u;
constexpr size_t kHeaderBytes = 4096;
constexpr int kMaxOpeners = 64;
// cudaMalloc does not clear memory: fresh allocations hold this byte, so that code which
// forgets to initialize device memory reads garbage here too.
constexpr unsigned char kFreshByte = 0xcb;

struct Opener {
  int32_t pid;
  int32_t count;  // opens not yet closed
};
struct SharedHeader {
  uint64_t magic;
  uint64_t id;
  uint64_t bytes;
  int32_t exporterPid;
  int32_t device;
  Opener openers[kMaxOpeners];
};
static_assert(sizeof(SharedHeader) <= kHeaderBytes, "the header fits its page");

// What an IPC handle carries (inside cudaIpcMemHandle_t's 64 bytes).
struct HandleBytes {
  uint32_t magic;
  int32_t pid;
  int32_t fd;
  int32_t device;  // the machine's index of the exporter's device (not its ordinal)
  uint64_t id;
  uint64_t mapBytes;
};
static_assert(sizeof(HandleBytes) <= sizeof(cudaIpcMemHandle_t), "fits the handle");

uint64_t newAllocationId() {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = [] {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }();
  return salt ^ (static_cast<uint64_t>(getpid()) << 40) ^ ++counter;
}

// Counts this process as having the allocation open (`delta` +1) or closed (-1). Atomic on the
// shared page: several processes may open one allocation at once.
void countOpener(SharedHeader* h, int delta) {
  const int32_t me = static_cast<int32_t>(getpid());
  for (Opener& o : h->openers) {
    if (__atomic_load_n(&o.pid, __ATOMIC_ACQUIRE) == me) {
      __atomic_add_fetch(&o.count, delta, __ATOMIC_ACQ_REL);
      return;
    }
  }
  if (delta < 0) return;
  for (Opener& o : h->openers) {
    int32_t empty = 0;
    if (__atomic_compare_exchange_n(&o.pid, &empty, me, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE)) {
      __atomic_add_fetch(&o.count, delta, __ATOMIC_ACQ_REL);
      return;
    }
  }
  cudaemu::detail::fatal("more than 64 processes opened one allocation");
}

// A process that has exited (or is a zombie) holds no mapping any more.
bool processLives(int32_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  FILE* f = std::fopen(path, "r");
  if (f == nullptr) return false;
  char buffer[512] = {0};
  const size_t n = std::fread(buffer, 1, sizeof buffer - 1, f);
  std::fclose(f);
  const char* close = std::strrchr(buffer, ')');  // "pid (comm) S ..."
  if (n == 0 || close == nullptr || close[1] == '\0') return false;
  const char state = close[2];
  return state != 'Z' && state != 'X';
}

}  // namespace

namespace cudaemu {
namespace detail {
namespace {

// Whether [p, p + bytes) lies within one entry of `m` (bytes > 0).
template <typename Map>
bool inside(const Map& m, uintptr_t p, size_t bytes) {
  auto it = holding(m, p);
  return it != m.end() && p + bytes <= it->first + it->second.bytes;
}

}  // namespace

bool deviceAccessible(Runtime& rt, const void* ptr, size_t bytes) {
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  return inside(rt.allocations, p, bytes) || inside(rt.mappings, p, bytes) ||
         inside(rt.hostAllocations, p, bytes) || inside(rt.registered, p, bytes);
}

bool copyEndsAccessible(Runtime& rt, cudaMemcpyKind kind, const void* dst, size_t dstBytes,
                        const void* src, size_t srcBytes) {
  const bool srcOnDevice = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  const bool dstOnDevice = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  return (!srcOnDevice || deviceAccessible(rt, src, srcBytes)) &&
         (!dstOnDevice || deviceAccessible(rt, dst, dstBytes));
}

}  // namespace detail
}  // namespace cudaemu

using cudaemu::detail::deviceAccessible;

cudaError_t cudaMalloc(void** devPtr, size_t size) {
  if (cudaError_t e = enter("cudaMalloc")) return fail(e);
  if (devPtr == nullptr) return fail(cudaErrorInvalidValue);
  if (size == 0) {
    *devPtr = nullptr;
    return cudaSuccess;
  }
  const size_t page = kHeaderBytes;
  const size_t mapBytes = kHeaderBytes + (size + page - 1) / page * page;
  const int fd = memfd_create("cuda-emulator-device-memory", MFD_CLOEXEC);
  if (fd < 0) return fail(cudaErrorMemoryAllocation);
  if (ftruncate(fd, static_cast<off_t>(mapBytes)) != 0) {
    close(fd);
    return fail(cudaErrorMemoryAllocation);
  }
  void* base = mmap(nullptr, mapBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    close(fd);
    return fail(cudaErrorMemoryAllocation);
  }
  auto* header = static_cast<SharedHeader*>(base);
  header->magic = kAllocationMagic;
  header->id = newAllocationId();
  header->bytes = size;
  header->exporterPid = static_cast<int32_t>(getpid());
  char* user = static_cast<char*>(base) + kHeaderBytes;
  std::memset(user, kFreshByte, size);
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mutex);
  header->device = cudaemu::detail::currentDevice();
  rt.allocations[reinterpret_cast<uintptr_t>(user)] =
      DeviceAllocation{fd, static_cast<char*>(base), mapBytes, size, header->device, header->id};
  ++rt.counters.liveDeviceAllocations;
  *devPtr = user;
  return cudaSuccess;
}

cudaError_t cudaFree(void* devPtr) {
  if (cudaError_t e = enter("cudaFree")) return fail(e);
  if (devPtr == nullptr) return cudaSuccess;
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mutex);
  auto it = rt.allocations.find(reinterpret_cast<uintptr_t>(devPtr));
  if (it == rt.allocations.end()) return fail(cudaErrorInvalidValue);
  const DeviceAllocation a = it->second;
  const auto* header = reinterpret_cast<const SharedHeader*>(a.mapBase);
  for (const Opener& o : header->openers) {
    const int32_t pid = __atomic_load_n(&o.pid, __ATOMIC_ACQUIRE);
    const int32_t count = __atomic_load_n(&o.count, __ATOMIC_ACQUIRE);
    if (pid != 0 && count > 0 && processLives(pid)) {
      cudaemu::detail::fatal(
          "cudaFree(" + std::to_string(reinterpret_cast<uintptr_t>(devPtr)) + ") of " +
          std::to_string(a.bytes) + " bytes while process " + std::to_string(pid) +
          " still has it open through cudaIpcOpenMemHandle (" + std::to_string(count) +
          " open(s) not closed): undefined behaviour in CUDA; close the handle in every "
          "importing process before freeing");
    }
  }
  munmap(a.mapBase, a.mapBytes);
  close(a.fd);
  rt.allocations.erase(it);
  --rt.counters.liveDeviceAllocations;
  return cudaSuccess;
}

cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t* handle, void* devPtr) {
  if (cudaError_t e = enter("cudaIpcGetMemHandle")) return fail(e);
  if (handle == nullptr || devPtr == nullptr) return fail(cudaErrorInvalidValue);
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mutex);
  // The handle names the whole allocation the pointer lies in.
  const auto p = reinterpret_cast<uintptr_t>(devPtr);
  auto it = rt.allocations.upper_bound(p);
  if (it == rt.allocations.begin()) return fail(cudaErrorInvalidValue);
  --it;
  if (p >= it->first + it->second.bytes) return fail(cudaErrorInvalidValue);
  // The handle names the machine's device, which the opening process may number otherwise.
  const cudaemu::detail::DeviceState* owner = cudaemu::detail::deviceOf(rt, it->second.device);
  HandleBytes h{kHandleMagic, static_cast<int32_t>(getpid()), it->second.fd,
                owner != nullptr ? owner->physical : -1, it->second.id, it->second.mapBytes};
  std::memset(handle, 0, sizeof *handle);
  std::memcpy(handle->reserved, &h, sizeof h);
  return cudaSuccess;
}

cudaError_t cudaIpcOpenMemHandle(void** devPtr, cudaIpcMemHandle_t handle, unsigned int flags) {
  if (cudaError_t e = enter("cudaIpcOpenMemHandle")) return fail(e);
  if (devPtr == nullptr || flags != cudaIpcMemLazyEnablePeerAccess) {
    return fail(cudaErrorInvalidValue);
  }
  HandleBytes h;
  std::memcpy(&h, handle.reserved, sizeof h);
  if (h.magic != kHandleMagic) return fail(cudaErrorInvalidValue);
  // A handle opens only in another process; in its own, CUDA answers "invalid device context".
  if (h.pid == static_cast<int32_t>(getpid())) return fail(cudaErrorDeviceUninitialized);
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mutex);
  // Memory of another device is mapped with peer access, as cudaDeviceEnablePeerAccess would
  // enable it; that device need not be visible to this process.
  const cudaemu::detail::DeviceState* here =
      cudaemu::detail::deviceOf(rt, cudaemu::detail::currentDevice());
  if (here == nullptr) return fail(cudaErrorInvalidDevice);
  if (h.device != here->physical && !rt.config.peerAccess) {
    return fail(cudaErrorPeerAccessUnsupported);
  }
  // A second open of the same handle here shares the first mapping and counts one more.
  for (auto& [ptr, m] : rt.mappings) {
    if (m.id == h.id) {
      ++m.refs;
      *devPtr = reinterpret_cast<void*>(ptr);
      return cudaSuccess;
    }
  }
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/fd/%d", static_cast<int>(h.pid),
                static_cast<int>(h.fd));
  const int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return fail(cudaErrorMapBufferObjectFailed);  // the exporter is gone, or freed it
  struct stat st {};
  void* base = MAP_FAILED;
  if (fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_size) == h.mapBytes) {
    base = mmap(nullptr, h.mapBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  close(fd);  // the mapping keeps the memory
  if (base == MAP_FAILED) return fail(cudaErrorMapBufferObjectFailed);
  auto* header = static_cast<SharedHeader*>(base);
  if (header->magic != kAllocationMagic || header->id != h.id) {
    munmap(base, h.mapBytes);  // the descriptor number now names another file
    return fail(cudaErrorMapBufferObjectFailed);
  }
  countOpener(header, +1);
  char* user = static_cast<char*>(base) + kHeaderBytes;
  rt.mappings[reinterpret_cast<uintptr_t>(user)] =
      IpcMapping{h.id, static_cast<char*>(base), h.mapBytes, header->bytes, 1};
  ++rt.counters.liveIpcMappings;
  *devPtr = user;
  return cudaSuccess;
}

cudaError_t cudaIpcCloseMemHandle(void* devPtr) {
  if (cudaError_t e = enter("cudaIpcCloseMemHandle")) return fail(e);
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mutex);
  auto it = rt.mappings.find(reinterpret_cast<uintptr_t>(devPtr));
  if (it == rt.mappings.end()) return fail(cudaErrorInvalidValue);
  if (--it->second.refs > 0) return cudaSuccess;
  // The last close unmaps: any later access through the pointer faults.
  countOpener(reinterpret_cast<SharedHeader*>(it->second.mapBase), -1);
  munmap(it->second.mapBase, it->second.mapBytes);
  rt.mappings.erase(it);
  --rt.counters.liveIpcMappings;
  return cudaSuccess;
}

cudaError_t cudaHostAlloc(void** hostPtr, size_t size, unsigned int flags) {
  if (cudaError_t e = enter("cudaHostAlloc")) return fail(e);
  const unsigned known = cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined;
  if (hostPtr == nullptr || (flags & ~known) != 0) return fail(cudaErrorInvalidValue);
  if (size == 0) {
    *hostPtr = nullptr;
    return cudaSuccess;
  }
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return fail(cudaErrorMemoryAllocation);
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mutex);
  rt.hostAllocations[reinterpret_cast<uintptr_t>(p)] = cudaemu::detail::HostAllocation{
      size, flags, cudaemu::detail::currentDevice()};
  ++rt.counters.liveHostAllocations;
  *hostPtr = p;
  return cudaSuccess;
}

cudaError_t cudaFreeHost(void* hostPtr) {
  if (cudaError_t e = enter("cudaFreeHost")) return fail(e);
  if (hostPtr == nullptr) return cudaSuccess;
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mutex);
  auto it = rt.hostAllocations.find(reinterpret_cast<uintptr_t>(hostPtr));
  if (it == rt.hostAllocations.end()) return fail(cudaErrorInvalidValue);
  munmap(hostPtr, it->second.bytes);
  rt.hostAllocations.erase(it);
  --rt.counters.liveHostAllocations;
  return cudaSuccess;
}

cudaError_t cudaHostGetDevicePointer(void** devPtr, void* hostPtr, unsigned int flags) {
  if (cudaError_t e = enter("cudaHostGetDevicePointer")) return fail(e);
  if (devPtr == nullptr || flags != 0) return fail(cudaErrorInvalidValue);
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mutex);
  const auto p = reinterpret_cast<uintptr_t>(hostPtr);
  auto it = rt.hostAllocations.upper_bound(p);
  if (it == rt.hostAllocations.begin()) return fail(cudaErrorInvalidValue);
  --it;
  // Only memory allocated by cudaHostAlloc with cudaHostAllocMapped has a device pointer.
  if (p >= it->first + it->second.bytes || (it->second.flags & cudaHostAllocMapped) == 0) {
    return fail(cudaErrorInvalidValue);
  }
  // Unified addressing: the device sees the mapped page at the host's address.
  *devPtr = hostPtr;
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  if (cudaError_t e = enter("cudaMemcpyAsync")) return fail(e);
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) {
    return fail(cudaErrorInvalidMemcpyDirection);
  }
  if (count == 0) return cudaSuccess;
  if (dst == nullptr || src == nullptr) return fail(cudaErrorInvalidValue);
  std::chrono::milliseconds delay{0};
  {
    // The side a kind names as the device's must be memory the device can reach.
    Runtime& rt = runtime();
    std::lock_guard<std::mutex> lock(rt.mutex);
    if (!cudaemu::detail::copyEndsAccessible(rt, kind, dst, count, src, count)) {
      return fail(cudaErrorInvalidValue);
    }
    if (kind == cudaMemcpyHostToDevice) delay = rt.config.hostToDeviceCopyDelay;
  }
  cudaError_t e = cudaemu::detail::submit(stream, [=] {
    // A busy copy engine (a test control): the copy, and what its stream orders after it,
    // lands this much later.
    if (delay.count() > 0) std::this_thread::sleep_for(delay);
    std::memmove(dst, src, count);
  });
  return e == cudaSuccess ? e : fail(e);
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  cudaError_t e = cudaMemcpyAsync(dst, src, count, kind, nullptr);
  if (e != cudaSuccess) return e;
  return cudaStreamSynchronize(nullptr);
}

cudaError_t cudaMemsetAsync(void* devPtr, int value, size_t count, cudaStream_t stream) {
  if (cudaError_t e = enter("cudaMemsetAsync")) return fail(e);
  if (count == 0) return cudaSuccess;
  {
    Runtime& rt = runtime();
    std::lock_guard<std::mutex> lock(rt.mutex);
    if (devPtr == nullptr || !deviceAccessible(rt, devPtr, count)) {
      return fail(cudaErrorInvalidValue);
    }
  }
  const unsigned char byte = static_cast<unsigned char>(value);
  cudaError_t e = cudaemu::detail::submit(stream, [=] { std::memset(devPtr, byte, count); });
  return e == cudaSuccess ? e : fail(e);
}
