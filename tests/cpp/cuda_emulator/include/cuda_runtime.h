// An emulated CUDA runtime for tests: the part of the CUDA Runtime API this project calls,
// implemented on the host (tests/cpp/cuda_emulator). Sources that include <cuda_runtime.h>
// compile against this header unchanged when the emulator's include directory comes first;
// the emulator is a test library and is never linked into the extension.
//
// What it models, each rule from the CUDA Runtime API documentation (see the README beside
// this folder for the page of each): streams that run their work in order on a host thread
// of their own, the legacy default stream's implicit ordering with blocking streams, events
// that capture a stream's position when recorded, device memory backed by shared memory so
// that an IPC handle maps the same bytes in another process, host-mapped memory, launches
// whose blocks wait for room on a device of a configurable size, the documented error codes,
// and a last error per host thread. Enum values are CUDA's own numbers, so a code printed by
// a test reads the same as one from a GPU. Test controls live in <cuda_emulator.h>.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

// ---- vector and index types -----------------------------------------------------------------
struct uint3 {
  unsigned int x = 0, y = 0, z = 0;
};
struct alignas(16) uint4 {
  unsigned int x, y, z, w;
};
struct dim3 {
  unsigned int x = 1, y = 1, z = 1;
  dim3() = default;
  dim3(unsigned int vx, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
};

// ---- error codes (CUDA's numbers) -----------------------------------------------------------
enum cudaError_t : int {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInitializationError = 3,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidDevicePointer = 17,
  cudaErrorInvalidMemcpyDirection = 21,
  cudaErrorInvalidDeviceFunction = 98,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorDeviceUninitialized = 201,
  cudaErrorMapBufferObjectFailed = 205,
  cudaErrorUnsupportedLimit = 215,
  cudaErrorPeerAccessUnsupported = 217,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorIllegalState = 401,
  cudaErrorNotReady = 600,
  cudaErrorLaunchOutOfResources = 701,
  cudaErrorPeerAccessAlreadyEnabled = 704,
  cudaErrorPeerAccessNotEnabled = 705,
  cudaErrorNotSupported = 801,
  cudaErrorStreamCaptureUnsupported = 900,
  cudaErrorStreamCaptureInvalidated = 901,
  cudaErrorStreamCaptureUnmatched = 903,
  cudaErrorStreamCaptureWrongThread = 908,
  cudaErrorUnknown = 999,
};
using cudaError = cudaError_t;

// ---- flags and enums (CUDA's numbers) -------------------------------------------------------
constexpr unsigned int cudaStreamDefault = 0x00;
constexpr unsigned int cudaStreamNonBlocking = 0x01;
constexpr unsigned int cudaEventDefault = 0x00;
constexpr unsigned int cudaEventBlockingSync = 0x01;
constexpr unsigned int cudaEventDisableTiming = 0x02;
constexpr unsigned int cudaEventInterprocess = 0x04;
constexpr unsigned int cudaHostAllocDefault = 0x00;
constexpr unsigned int cudaHostAllocPortable = 0x01;
constexpr unsigned int cudaHostAllocMapped = 0x02;
constexpr unsigned int cudaHostAllocWriteCombined = 0x04;
constexpr unsigned int cudaIpcMemLazyEnablePeerAccess = 0x01;

enum cudaMemcpyKind : int {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};
enum cudaLimit : int {
  cudaLimitStackSize = 0x00,
  cudaLimitPrintfFifoSize = 0x01,
  cudaLimitMallocHeapSize = 0x02,
};
enum cudaStreamCaptureStatus : int {
  cudaStreamCaptureStatusNone = 0,
  cudaStreamCaptureStatusActive = 1,
  cudaStreamCaptureStatusInvalidated = 2,
};
enum cudaStreamCaptureMode : int {
  cudaStreamCaptureModeGlobal = 0,
  cudaStreamCaptureModeThreadLocal = 1,
  cudaStreamCaptureModeRelaxed = 2,
};
enum cudaDeviceAttr : int {
  cudaDevAttrMaxThreadsPerBlock = 1,
  cudaDevAttrWarpSize = 10,
  cudaDevAttrMultiProcessorCount = 16,
  cudaDevAttrCanMapHostMemory = 19,
  cudaDevAttrMaxThreadsPerMultiProcessor = 39,
  cudaDevAttrUnifiedAddressing = 41,
  cudaDevAttrComputeCapabilityMajor = 75,
  cudaDevAttrComputeCapabilityMinor = 76,
  cudaDevAttrMaxBlocksPerMultiprocessor = 106,
};

// ---- handles and structs ----------------------------------------------------------------------
namespace cudaemu {
class StreamHandle;
class EventHandle;
class GraphHandle;
}  // namespace cudaemu
using cudaStream_t = cudaemu::StreamHandle*;  // nullptr: the legacy default stream
using cudaEvent_t = cudaemu::EventHandle*;
using cudaGraph_t = cudaemu::GraphHandle*;

struct cudaUUID_t {
  char bytes[16];
};
struct cudaIpcMemHandle_t {
  char reserved[64];
};
struct cudaDeviceProp {
  char name[256];
  cudaUUID_t uuid;
  size_t totalGlobalMem;
  size_t sharedMemPerBlock;
  int regsPerBlock;
  int warpSize;
  int maxThreadsPerBlock;
  int multiProcessorCount;
  int maxThreadsPerMultiProcessor;
  int maxBlocksPerMultiProcessor;
  int major;
  int minor;
  int canMapHostMemory;
  int unifiedAddressing;
  int pciDomainID;
  int pciBusID;
  int pciDeviceID;
};
struct cudaFuncAttributes {
  size_t sharedSizeBytes;
  size_t constSizeBytes;
  size_t localSizeBytes;
  int maxThreadsPerBlock;
  int numRegs;
};

// ---- the API ----------------------------------------------------------------------------------
const char* cudaGetErrorString(cudaError_t error);
const char* cudaGetErrorName(cudaError_t error);
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();

cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device);
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device);
cudaError_t cudaDeviceGetLimit(size_t* value, cudaLimit limit);
cudaError_t cudaDeviceSetLimit(cudaLimit limit, size_t value);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaDeviceCanAccessPeer(int* canAccessPeer, int device, int peerDevice);
cudaError_t cudaDeviceEnablePeerAccess(int peerDevice, unsigned int flags);

cudaError_t cudaMalloc(void** devPtr, size_t size);
cudaError_t cudaFree(void* devPtr);
cudaError_t cudaHostAlloc(void** hostPtr, size_t size, unsigned int flags);
cudaError_t cudaFreeHost(void* hostPtr);
cudaError_t cudaHostGetDevicePointer(void** devPtr, void* hostPtr, unsigned int flags);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind,
                            cudaStream_t stream = nullptr);
cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind);
cudaError_t cudaMemsetAsync(void* devPtr, int value, size_t count, cudaStream_t stream = nullptr);

cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t* handle, void* devPtr);
cudaError_t cudaIpcOpenMemHandle(void** devPtr, cudaIpcMemHandle_t handle, unsigned int flags);
cudaError_t cudaIpcCloseMemHandle(void* devPtr);

cudaError_t cudaStreamCreate(cudaStream_t* stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamQuery(cudaStream_t stream);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags = 0);
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status);
cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);

cudaError_t cudaEventCreate(cudaEvent_t* event);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = nullptr);
cudaError_t cudaEventQuery(cudaEvent_t event);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventDestroy(cudaEvent_t event);

// Function attributes and occupancy of a kernel, named by its address.
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attr, const void* func);
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* numBlocks, const void* func,
                                                          int blockSize, size_t dynamicSMemSize);
template <typename T>
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attr, T* entry) {
  return cudaFuncGetAttributes(attr, reinterpret_cast<const void*>(entry));
}
template <typename T>
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* numBlocks, T* func, int blockSize,
                                                          size_t dynamicSMemSize) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      numBlocks, reinterpret_cast<const void*>(func), blockSize, dynamicSMemSize);
}

// ---- launches ----------------------------------------------------------------------------------
namespace cudaemu {

// One block of a launch, as the emulated device hands it to the code that runs device
// functions on host threads.
struct BlockLaunch {
  dim3 grid;
  dim3 block;
  uint3 blockIdx;
  void (*threadMain)(const void* launch);  // runs the kernel once, as one CUDA thread
  const void* launch;                      // the launch (its copied arguments)
};

// Runs every thread of one block and returns when they have all returned. The emulator does
// not define it: the host build of the device code does (kernels/host_shim.cc in this
// project, the test's own in the emulator's tests), as on a GPU the compiler supplies the
// device side of a launch and the runtime only schedules it. Referenced only by a launch.
void runBlockThreads(const BlockLaunch& block);

// The arguments of one launch, copied when it is enqueued (a launch may outlive the caller's
// argument variables, as on a GPU).
class KernelLaunch {
 public:
  virtual ~KernelLaunch() = default;
  virtual void runThread() const = 0;
};

template <typename... P>
class TypedKernelLaunch final : public KernelLaunch {
 public:
  template <size_t... I>
  TypedKernelLaunch(void (*kernel)(P...), void** args, std::index_sequence<I...>)
      : kernel_(kernel), args_(*static_cast<std::decay_t<P>*>(args[I])...) {}
  void runThread() const override {
    // Every thread gets its own copy of the parameters, as each CUDA thread reads its own.
    std::tuple<std::decay_t<P>...> mine = args_;
    std::apply(kernel_, mine);
  }

 private:
  void (*kernel_)(P...);
  std::tuple<std::decay_t<P>...> args_;
};

cudaError_t enqueueLaunch(const void* kernel, dim3 grid, dim3 block, size_t sharedMem,
                          cudaStream_t stream, std::shared_ptr<const KernelLaunch> launch,
                          void (*runBlock)(const BlockLaunch&));

}  // namespace cudaemu

// cudaLaunchKernel's typed form: the arguments are copied now; the grid runs later on the
// stream's host thread, each block once the device has room for it.
template <typename... P>
cudaError_t cudaLaunchKernel(void (*kernel)(P...), dim3 grid, dim3 block, void** args,
                             size_t sharedMem = 0, cudaStream_t stream = nullptr) {
  std::shared_ptr<const cudaemu::KernelLaunch> launch;
  if (kernel != nullptr && (args != nullptr || sizeof...(P) == 0)) {
    launch = std::make_shared<cudaemu::TypedKernelLaunch<P...>>(kernel, args,
                                                                std::index_sequence_for<P...>{});
  }
  return cudaemu::enqueueLaunch(reinterpret_cast<const void*>(kernel), grid, block, sharedMem,
                                stream, std::move(launch), &cudaemu::runBlockThreads);
}
