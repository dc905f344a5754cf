// cudaGetDriverEntryPointByVersion: the runtime asks the driver library for the function, as
// CUDA's runtime does (through cuGetProcAddress in libcuda.so.1; here the emulated driver,
// dropin/driver/libcuda.cc). Without a driver library every symbol is "not found".
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include "runtime.h"

using cudaemu::detail::enter;
using cudaemu::detail::fail;

namespace {

using GetProcAddress = CUresult (*)(const char*, void**, int, cuuint64_t,
                                    CUdriverProcAddressQueryResult*);

GetProcAddress driverLookup() {
  static const GetProcAddress lookup = [] {
    void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (driver == nullptr) return GetProcAddress{nullptr};
    return reinterpret_cast<GetProcAddress>(dlsym(driver, "cuGetProcAddress_v2"));
  }();
  return lookup;
}

}  // namespace

extern "C" cudaError_t cudaGetDriverEntryPointByVersion(
    const char* symbol, void** funcPtr, unsigned int cudaVersion, unsigned long long flags,
    enum cudaDriverEntryPointQueryResult* driverStatus) {
  if (cudaError_t e = enter("cudaGetDriverEntryPointByVersion")) return fail(e);
  if (symbol == nullptr || funcPtr == nullptr) return fail(cudaErrorInvalidValue);
  *funcPtr = nullptr;
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  if (GetProcAddress lookup = driverLookup()) {
    (void)lookup(symbol, funcPtr, static_cast<int>(cudaVersion), flags, &status);
  }
  // Not found is not an error of the call (CUDA Runtime API, cudaGetDriverEntryPointByVersion).
  if (driverStatus != nullptr) {
    *driverStatus = status == CU_GET_PROC_ADDRESS_SUCCESS ? cudaDriverEntryPointSuccess
                                                          : cudaDriverEntryPointSymbolNotFound;
  }
  return cudaSuccess;
}
