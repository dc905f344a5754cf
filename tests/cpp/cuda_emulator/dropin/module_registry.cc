// The device code that libraries built by nvcc (torch's) register when they load, and what
// becomes of it: nothing of it can run on the emulated device, so every launch of it fails
// loudly, naming the kernel.
//
// How nvcc's host code reaches the runtime (crt/host_runtime.h, crt/device_functions.h): at
// load, __cudaRegisterFatBinary, then __cudaRegisterFunction per kernel (its host stub's address
// and its device name) and __cudaRegisterVar per __device__ variable, then
// __cudaRegisterFatBinaryEnd; a launch written kernel<<<grid, block, shared, stream>>>(...)
// pushes its configuration (__cudaPushCallConfiguration), and the stub pops it and calls
// __cudaLaunchKernel with the handle __cudaGetKernel gave for its address; library code may
// also call cudaLaunchKernel and its variants with the stub's address directly.
#include <cuda_runtime.h>
#include <cxxabi.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime.h"

using cudaemu::detail::enter;
using cudaemu::detail::fail;

namespace {

struct RegisteredKernel {
  const void* hostStub;
  std::string deviceName;  // mangled, as registered
};

struct RegisteredVar {
  std::string deviceName;
  size_t bytes;
  void* storage = nullptr;  // allocated on first use (cudaGetSymbolAddress)
};

struct Registry {
  std::mutex mutex;
  std::vector<std::unique_ptr<void*>> modules;  // the handles __cudaRegisterFatBinary gave
  std::unordered_map<const void*, std::unique_ptr<RegisteredKernel>> kernels;
  std::unordered_map<const void*, RegisteredVar> vars;
  std::set<std::string> refusedOnce;  // kernels whose refusal has been printed
};

Registry& registry() {
  // Never destroyed: libraries unregister from their own destructors at exit, in any order.
  static Registry* r = new Registry();
  return *r;
}

std::string readable(const std::string& mangled) {
  int status = 0;
  char* d = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
  if (status != 0 || d == nullptr) return mangled;
  std::string out(d);
  std::free(d);
  return out.size() > 400 ? out.substr(0, 400) + "..." : out;
}

// The device name registered for `stub`, else what the dynamic linker calls the address.
std::string kernelName(const void* stub) {
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.kernels.find(stub);
    if (it != r.kernels.end()) return readable(it->second->deviceName);
  }
  Dl_info info{};
  if (dladdr(stub, &info) != 0 && info.dli_sname != nullptr) return readable(info.dli_sname);
  char text[64];
  std::snprintf(text, sizeof text, "the unregistered function at %p", stub);
  return text;
}

// A kernel compiled for a GPU cannot run here: the error a GPU gives for a kernel with no image
// for its architecture, and one line on stderr per kernel naming it (never a silent no-op).
cudaError_t refuseGpuKernel(const void* stub, const char* api) {
  const std::string name = kernelName(stub);
  bool first = false;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    first = r.refusedOnce.insert(name).second;
  }
  if (first) {
    std::fprintf(stderr,
                 "cuda emulator: %s refused the GPU kernel %s: only host-compiled kernels run "
                 "on the emulated device (cudaErrorNoKernelImageForDevice)\n",
                 api, name.c_str());
    std::fflush(stderr);
  }
  return fail(cudaErrorNoKernelImageForDevice);
}

// Per host thread: the configurations pushed by <<<...>>> and not yet popped by the stub.
struct CallConfiguration {
  dim3 grid;
  dim3 block;
  size_t sharedMem;
  void* stream;
};
thread_local std::vector<CallConfiguration> gPushed;

}  // namespace

extern "C" {

void** __cudaRegisterFatBinary(void* fatCubin) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.modules.push_back(std::make_unique<void*>(fatCubin));
  return r.modules.back().get();
}

void __cudaRegisterFatBinaryEnd(void** /*fatCubinHandle*/) {}

void __cudaUnregisterFatBinary(void** /*fatCubinHandle*/) {
  // Kept: a kernel's name may still be asked for while other libraries unload.
}

char __cudaInitModule(void** /*fatCubinHandle*/) { return 1; }

void __cudaRegisterFunction(void** /*fatCubinHandle*/, const char* hostFun, char* /*deviceFun*/,
                            const char* deviceName, int /*threadLimit*/, uint3* /*tid*/,
                            uint3* /*bid*/, dim3* /*bDim*/, dim3* /*gDim*/, int* /*wSize*/) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto kernel = std::make_unique<RegisteredKernel>();
  kernel->hostStub = hostFun;
  kernel->deviceName = deviceName != nullptr ? deviceName : "";
  r.kernels[hostFun] = std::move(kernel);
}

void __cudaRegisterVar(void** /*fatCubinHandle*/, char* hostVar, char* /*deviceAddress*/,
                       const char* deviceName, int /*ext*/, size_t size, int /*constant*/,
                       int /*global*/) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.vars[hostVar] = RegisteredVar{deviceName != nullptr ? deviceName : "", size, nullptr};
}

unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem,
                                     struct CUstream_st* stream) {
  gPushed.push_back(CallConfiguration{gridDim, blockDim, sharedMem, stream});
  return 0;
}

cudaError_t __cudaPopCallConfiguration(dim3* gridDim, dim3* blockDim, size_t* sharedMem,
                                       void* stream) {
  if (gPushed.empty()) return fail(cudaErrorInvalidConfiguration);
  const CallConfiguration c = gPushed.back();
  gPushed.pop_back();
  *gridDim = c.grid;
  *blockDim = c.block;
  *sharedMem = c.sharedMem;
  *static_cast<void**>(stream) = c.stream;
  return cudaSuccess;
}

cudaError_t __cudaGetKernel(cudaKernel_t* kernel, const void* hostStub) {
  if (kernel == nullptr) return fail(cudaErrorInvalidValue);
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.kernels.find(hostStub);
  if (it == r.kernels.end()) return fail(cudaErrorInvalidDeviceFunction);
  // The handle is the registration itself: a launch through it can name the kernel.
  *kernel = reinterpret_cast<cudaKernel_t>(it->second.get());
  return cudaSuccess;
}

cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3, dim3, void**, size_t, cudaStream_t) {
  if (cudaError_t e = enter("__cudaLaunchKernel")) return fail(e);
  if (kernel == nullptr) return fail(cudaErrorInvalidDeviceFunction);
  return refuseGpuKernel(reinterpret_cast<const RegisteredKernel*>(kernel)->hostStub,
                         "__cudaLaunchKernel");
}

cudaError_t cudaLaunchKernel(const void* func, dim3, dim3, void**, size_t, cudaStream_t) {
  if (cudaError_t e = enter("cudaLaunchKernel")) return fail(e);
  if (func == nullptr) return fail(cudaErrorInvalidDeviceFunction);
  return refuseGpuKernel(func, "cudaLaunchKernel");
}

cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t* config, const void* func, void**) {
  if (cudaError_t e = enter("cudaLaunchKernelExC")) return fail(e);
  if (config == nullptr || func == nullptr) return fail(cudaErrorInvalidValue);
  return refuseGpuKernel(func, "cudaLaunchKernelExC");
}

cudaError_t cudaLaunchCooperativeKernel(const void* func, dim3, dim3, void**, size_t,
                                        cudaStream_t) {
  if (cudaError_t e = enter("cudaLaunchCooperativeKernel")) return fail(e);
  if (func == nullptr) return fail(cudaErrorInvalidDeviceFunction);
  return refuseGpuKernel(func, "cudaLaunchCooperativeKernel");
}

// Attributes of registered kernels are accepted (they only tune a launch that will be refused).
cudaError_t cudaFuncSetAttribute(const void* func, enum cudaFuncAttribute, int) {
  if (cudaError_t e = enter("cudaFuncSetAttribute")) return fail(e);
  return func == nullptr ? fail(cudaErrorInvalidDeviceFunction) : cudaSuccess;
}

cudaError_t cudaKernelSetAttributeForDevice(cudaKernel_t kernel, enum cudaFuncAttribute, int,
                                            int device) {
  if (cudaError_t e = enter("cudaKernelSetAttributeForDevice")) return fail(e);
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || device < 0 || device >= count) {
    return fail(cudaErrorInvalidDevice);
  }
  return kernel == nullptr ? fail(cudaErrorInvalidDeviceFunction) : cudaSuccess;
}

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int* numBlocks,
                                                                   const void* func,
                                                                   int blockSize,
                                                                   size_t dynamicSMemSize,
                                                                   unsigned int) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(numBlocks, func, blockSize,
                                                       dynamicSMemSize);
}

// A __device__ variable's storage: zeroed memory of its registered size, reachable by copies.
cudaError_t cudaGetSymbolAddress(void** devPtr, const void* symbol) {
  if (cudaError_t e = enter("cudaGetSymbolAddress")) return fail(e);
  if (devPtr == nullptr) return fail(cudaErrorInvalidValue);
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.vars.find(symbol);
  if (it == r.vars.end()) return fail(cudaErrorInvalidSymbol);
  if (it->second.storage == nullptr) {
    void* p = nullptr;
    if (cudaHostAlloc(&p, it->second.bytes == 0 ? 1 : it->second.bytes, 0) != cudaSuccess) {
      return fail(cudaErrorMemoryAllocation);
    }
    std::memset(p, 0, it->second.bytes);
    it->second.storage = p;
  }
  *devPtr = it->second.storage;
  return cudaSuccess;
}

cudaError_t cudaMemcpyToSymbol(const void* symbol, const void* src, size_t count, size_t offset,
                               enum cudaMemcpyKind kind) {
  void* base = nullptr;
  if (cudaError_t e = cudaGetSymbolAddress(&base, symbol)) return e;
  return cudaMemcpy(static_cast<char*>(base) + offset, src, count, kind);
}

}  // extern "C"
