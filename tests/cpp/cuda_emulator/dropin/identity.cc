// What the runtime says of itself and of the devices' place on the bus: versions, PCI ids, and
// the profiler switches (no profiler is attached, so they change nothing, as on a GPU).
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include <cstdio>

#include "runtime.h"

using cudaemu::detail::enter;
using cudaemu::detail::fail;

extern "C" {

// A driver for the CUDA release whose headers this runtime was built against: torch refuses to
// start under a driver older than its CUDA.
cudaError_t cudaDriverGetVersion(int* driverVersion) {
  if (cudaError_t e = enter("cudaDriverGetVersion")) return fail(e);
  if (driverVersion == nullptr) return fail(cudaErrorInvalidValue);
  *driverVersion = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* runtimeVersion) {
  if (cudaError_t e = enter("cudaRuntimeGetVersion")) return fail(e);
  if (runtimeVersion == nullptr) return fail(cudaErrorInvalidValue);
  *runtimeVersion = CUDART_VERSION;
  return cudaSuccess;
}

// "[domain]:[bus]:[device].[function]", from the device's properties.
cudaError_t cudaDeviceGetPCIBusId(char* pciBusId, int len, int device) {
  if (cudaError_t e = enter("cudaDeviceGetPCIBusId")) return fail(e);
  if (pciBusId == nullptr || len <= 0) return fail(cudaErrorInvalidValue);
  cudaDeviceProp prop;
  if (cudaError_t e = cudaGetDeviceProperties(&prop, device)) return e;
  std::snprintf(pciBusId, static_cast<size_t>(len), "%08x:%02x:%02x.0", prop.pciDomainID,
                prop.pciBusID, prop.pciDeviceID);
  return cudaSuccess;
}

cudaError_t cudaProfilerStart() { return enter("cudaProfilerStart"); }
cudaError_t cudaProfilerStop() { return enter("cudaProfilerStop"); }

}  // extern "C"
