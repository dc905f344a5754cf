// The driver library beside the emulated runtime: a stand-in libcuda.so.1. torch reaches the
// driver two ways, and both end here: through the runtime's cudaGetDriverEntryPointByVersion
// (c10::cuda::DriverAPI), which the emulated runtime answers with this library's
// cuGetProcAddress, as CUDA's runtime asks the driver; and by dlopen("libcuda.so.1") + dlsym
// (ATen's lazily bound driver calls, e.g. cuDevicePrimaryCtxGetState).
//
// What the device is comes from the emulated runtime (the same process's libcudart.so.13). The
// functions that are not emulated exist (so that callers that must find them do), fail with
// CUDA_ERROR_NOT_SUPPORTED and name themselves once on stderr; any other name is not found, as
// an older driver would answer.
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>
#include <string>

namespace cudaemu {
bool hasContext(int device);  // cuda_emulator.h, exported by the emulated runtime
}

#define RING_DRIVER_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

CUresult refused(const char* name) {
  static std::mutex mutex;
  static std::set<std::string> said;
  std::lock_guard<std::mutex> lock(mutex);
  if (said.insert(name).second) {
    std::fprintf(stderr, "cuda emulator: the driver function %s is not emulated "
                 "(CUDA_ERROR_NOT_SUPPORTED)\n", name);
    std::fflush(stderr);
  }
  return CUDA_ERROR_NOT_SUPPORTED;
}

// The runtime's errors that can come back here have the driver's numbers (invalid value,
// invalid device, no device).
CUresult fromRuntime(cudaError_t e) {
  (void)cudaGetLastError();
  return static_cast<CUresult>(e);
}

CUresult validDevice(CUdevice dev) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return fromRuntime(cudaErrorNoDevice);
  return dev >= 0 && dev < count ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

}  // namespace

RING_DRIVER_EXPORT CUresult cuInit(unsigned int flags) {
  return flags == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

RING_DRIVER_EXPORT CUresult cuDriverGetVersion(int* version) {
  return fromRuntime(cudaDriverGetVersion(version));
}

RING_DRIVER_EXPORT CUresult cuGetErrorString(CUresult error, const char** text) {
  if (text == nullptr) return CUDA_ERROR_INVALID_VALUE;
  switch (error) {
    case CUDA_SUCCESS: *text = "no error"; break;
    case CUDA_ERROR_INVALID_VALUE: *text = "invalid argument"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *text = "out of memory"; break;
    case CUDA_ERROR_NOT_INITIALIZED: *text = "initialization error"; break;
    case CUDA_ERROR_NO_DEVICE: *text = "no CUDA-capable device is detected"; break;
    case CUDA_ERROR_INVALID_DEVICE: *text = "invalid device ordinal"; break;
    case CUDA_ERROR_NOT_FOUND: *text = "named symbol not found"; break;
    case CUDA_ERROR_NOT_SUPPORTED: *text = "operation not supported"; break;
    default:
      // Not a code this emulation returns: CUDA's answer for an invalid code.
      *text = nullptr;
      return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

RING_DRIVER_EXPORT CUresult cuDeviceGetCount(int* count) {
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const cudaError_t e = cudaGetDeviceCount(count);
  if (e == cudaErrorNoDevice) {
    *count = 0;  // the driver says "none", not an error
    (void)cudaGetLastError();
    return CUDA_SUCCESS;
  }
  return fromRuntime(e);
}

RING_DRIVER_EXPORT CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = validDevice(ordinal)) return r;
  *device = ordinal;
  return CUDA_SUCCESS;
}

// CU_DEVICE_ATTRIBUTE_X has the number of cudaDevAttrX.
RING_DRIVER_EXPORT CUresult cuDeviceGetAttribute(int* value, CUdevice_attribute attribute,
                                                 CUdevice device) {
  return fromRuntime(
      cudaDeviceGetAttribute(value, static_cast<cudaDeviceAttr>(attribute), device));
}

RING_DRIVER_EXPORT CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice device) {
  if (uuid == nullptr) return CUDA_ERROR_INVALID_VALUE;
  cudaDeviceProp prop;
  if (cudaError_t e = cudaGetDeviceProperties(&prop, device)) return fromRuntime(e);
  std::memcpy(uuid->bytes, prop.uuid.bytes, sizeof uuid->bytes);
  return CUDA_SUCCESS;
}

// Whether the device's primary context exists in this process (the runtime makes it on a
// thread's first call that needs one, or at cudaSetDevice). It never asks for one.
RING_DRIVER_EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice device, unsigned int* flags,
                                                       int* active) {
  if (flags == nullptr || active == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = validDevice(device)) return r;
  *flags = 0;
  *active = cudaemu::hasContext(device) ? 1 : 0;
  return CUDA_SUCCESS;
}

// The driver functions torch's libraries look up and the emulated device does not model: the
// virtual memory management calls (expandable segments, symmetric memory), stream memory
// operations, modules compiled at run time and their launches, and contexts by handle.
#define RING_REFUSED(name, params) \
  RING_DRIVER_EXPORT CUresult name params { return refused(#name); }
RING_REFUSED(cuMemGetAddressRange_v2, (CUdeviceptr*, size_t*, CUdeviceptr))
RING_REFUSED(cuMemAddressReserve, (CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long))
RING_REFUSED(cuMemRelease, (CUmemGenericAllocationHandle))
RING_REFUSED(cuMemMap, (CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                        unsigned long long))
RING_REFUSED(cuMemAddressFree, (CUdeviceptr, size_t))
RING_REFUSED(cuMemSetAccess, (CUdeviceptr, size_t, const CUmemAccessDesc*, size_t))
RING_REFUSED(cuMemUnmap, (CUdeviceptr, size_t))
RING_REFUSED(cuMemCreate, (CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*,
                           unsigned long long))
RING_REFUSED(cuMemGetAllocationGranularity, (size_t*, const CUmemAllocationProp*,
                                             CUmemAllocationGranularity_flags))
RING_REFUSED(cuMemExportToShareableHandle, (void*, CUmemGenericAllocationHandle,
                                            CUmemAllocationHandleType, unsigned long long))
RING_REFUSED(cuMemImportFromShareableHandle, (CUmemGenericAllocationHandle*, void*,
                                              CUmemAllocationHandleType))
RING_REFUSED(cuMemRetainAllocationHandle, (CUmemGenericAllocationHandle*, void*))
RING_REFUSED(cuMemGetAllocationPropertiesFromHandle, (CUmemAllocationProp*,
                                                      CUmemGenericAllocationHandle))
RING_REFUSED(cuMemsetD32Async, (CUdeviceptr, unsigned int, size_t, CUstream))
RING_REFUSED(cuStreamWriteValue32_v2, (CUstream, CUdeviceptr, cuuint32_t, unsigned int))
RING_REFUSED(cuModuleLoadData, (CUmodule*, const void*))
RING_REFUSED(cuModuleGetFunction, (CUfunction*, CUmodule, const char*))
RING_REFUSED(cuModuleUnload, (CUmodule))
RING_REFUSED(cuLaunchKernel, (CUfunction, unsigned int, unsigned int, unsigned int, unsigned int,
                              unsigned int, unsigned int, unsigned int, CUstream, void**,
                              void**))
RING_REFUSED(cuCtxGetCurrent, (CUcontext*))
RING_REFUSED(cuDevicePrimaryCtxRetain, (CUcontext*, CUdevice))
#undef RING_REFUSED

namespace {

struct Entry {
  const char* name;  // as cuGetProcAddress is asked for it: without a _v2 suffix
  void* function;
};
#define RING_ENTRY(name, fn) {name, reinterpret_cast<void*>(&fn)}
const Entry kEntries[] = {
    RING_ENTRY("cuInit", cuInit),
    RING_ENTRY("cuDriverGetVersion", cuDriverGetVersion),
    RING_ENTRY("cuGetErrorString", cuGetErrorString),
    RING_ENTRY("cuDeviceGetCount", cuDeviceGetCount),
    RING_ENTRY("cuDeviceGet", cuDeviceGet),
    RING_ENTRY("cuDeviceGetAttribute", cuDeviceGetAttribute),
    RING_ENTRY("cuDeviceGetUuid", cuDeviceGetUuid_v2),
    RING_ENTRY("cuDevicePrimaryCtxGetState", cuDevicePrimaryCtxGetState),
    RING_ENTRY("cuMemGetAddressRange", cuMemGetAddressRange_v2),
    RING_ENTRY("cuMemAddressReserve", cuMemAddressReserve),
    RING_ENTRY("cuMemRelease", cuMemRelease),
    RING_ENTRY("cuMemMap", cuMemMap),
    RING_ENTRY("cuMemAddressFree", cuMemAddressFree),
    RING_ENTRY("cuMemSetAccess", cuMemSetAccess),
    RING_ENTRY("cuMemUnmap", cuMemUnmap),
    RING_ENTRY("cuMemCreate", cuMemCreate),
    RING_ENTRY("cuMemGetAllocationGranularity", cuMemGetAllocationGranularity),
    RING_ENTRY("cuMemExportToShareableHandle", cuMemExportToShareableHandle),
    RING_ENTRY("cuMemImportFromShareableHandle", cuMemImportFromShareableHandle),
    RING_ENTRY("cuMemRetainAllocationHandle", cuMemRetainAllocationHandle),
    RING_ENTRY("cuMemGetAllocationPropertiesFromHandle", cuMemGetAllocationPropertiesFromHandle),
    RING_ENTRY("cuMemsetD32Async", cuMemsetD32Async),
    RING_ENTRY("cuStreamWriteValue32", cuStreamWriteValue32_v2),
    RING_ENTRY("cuCtxGetCurrent", cuCtxGetCurrent),
};
#undef RING_ENTRY

}  // namespace

// How a runtime finds the driver's functions (CUDA Driver API, cuGetProcAddress): by base name;
// a name this driver does not have is CUDA_ERROR_NOT_FOUND with the status saying so.
RING_DRIVER_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion,
                                                cuuint64_t flags,
                                                CUdriverProcAddressQueryResult* status) {
  (void)cudaVersion;
  (void)flags;
  if (symbol == nullptr || pfn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pfn = nullptr;
  for (const Entry& e : kEntries) {
    if (std::strcmp(e.name, symbol) == 0) {
      *pfn = e.function;
      if (status != nullptr) *status = CU_GET_PROC_ADDRESS_SUCCESS;
      return CUDA_SUCCESS;
    }
  }
  if (status != nullptr) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return CUDA_ERROR_NOT_FOUND;
}
