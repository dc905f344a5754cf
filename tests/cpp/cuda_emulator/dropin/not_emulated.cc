// The runtime calls torch's libraries import that the emulated device does not model: each
// exists (so that the libraries load), and fails with cudaErrorNotSupported, naming itself once
// on stderr. What is behind them: the stream-ordered allocator and its pools (torch uses them
// only with PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync), interprocess events, graphs built
// node by node or captured into a given graph or dumped as dot files, user objects, and device
// code loaded at run time (torch's jit, Triton).
#include <cuda_runtime.h>

#include <cstdio>
#include <mutex>
#include <set>
#include <string>

#include "runtime.h"

namespace {

cudaError_t notEmulated(const char* api) {
  if (cudaError_t e = cudaemu::detail::enter(api)) return cudaemu::detail::fail(e);
  static std::mutex mutex;
  static std::set<std::string> said;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (said.insert(api).second) {
      std::fprintf(stderr, "cuda emulator: %s is not emulated (cudaErrorNotSupported)\n", api);
      std::fflush(stderr);
    }
  }
  return cudaemu::detail::fail(cudaErrorNotSupported);
}

}  // namespace

#define RING_NOT_EMULATED(name, params) \
  cudaError_t name params { return notEmulated(#name); }

extern "C" {
RING_NOT_EMULATED(cudaMallocAsync, (void**, size_t, cudaStream_t))
RING_NOT_EMULATED(cudaFreeAsync, (void*, cudaStream_t))
RING_NOT_EMULATED(cudaDeviceGetDefaultMemPool, (cudaMemPool_t*, int))
RING_NOT_EMULATED(cudaMemPoolGetAttribute, (cudaMemPool_t, enum cudaMemPoolAttr, void*))
RING_NOT_EMULATED(cudaMemPoolSetAttribute, (cudaMemPool_t, enum cudaMemPoolAttr, void*))
RING_NOT_EMULATED(cudaMemPoolSetAccess, (cudaMemPool_t, const struct cudaMemAccessDesc*, size_t))
RING_NOT_EMULATED(cudaMemPoolTrimTo, (cudaMemPool_t, size_t))
RING_NOT_EMULATED(cudaDeviceGetGraphMemAttribute, (int, enum cudaGraphMemAttributeType, void*))
RING_NOT_EMULATED(cudaDeviceSetGraphMemAttribute, (int, enum cudaGraphMemAttributeType, void*))
RING_NOT_EMULATED(cudaIpcGetEventHandle, (cudaIpcEventHandle_t*, cudaEvent_t))
RING_NOT_EMULATED(cudaIpcOpenEventHandle, (cudaEvent_t*, cudaIpcEventHandle_t))
RING_NOT_EMULATED(cudaGraphAddNode, (cudaGraphNode_t*, cudaGraph_t, const cudaGraphNode_t*,
                                     const cudaGraphEdgeData*, size_t,
                                     struct cudaGraphNodeParams*))
RING_NOT_EMULATED(cudaGraphConditionalHandleCreate, (cudaGraphConditionalHandle*, cudaGraph_t,
                                                     unsigned int, unsigned int))
RING_NOT_EMULATED(cudaGraphNodeGetDependencies, (cudaGraphNode_t, cudaGraphNode_t*,
                                                 cudaGraphEdgeData*, size_t*))
RING_NOT_EMULATED(cudaGraphRetainUserObject, (cudaGraph_t, cudaUserObject_t, unsigned int,
                                              unsigned int))
RING_NOT_EMULATED(cudaUserObjectCreate, (cudaUserObject_t*, void*, cudaHostFn_t, unsigned int,
                                         unsigned int))
RING_NOT_EMULATED(cudaUserObjectRelease, (cudaUserObject_t, unsigned int))
RING_NOT_EMULATED(cudaStreamBeginCaptureToGraph, (cudaStream_t, cudaGraph_t,
                                                  const cudaGraphNode_t*,
                                                  const cudaGraphEdgeData*, size_t,
                                                  enum cudaStreamCaptureMode))
RING_NOT_EMULATED(cudaStreamUpdateCaptureDependencies, (cudaStream_t, cudaGraphNode_t*,
                                                        const cudaGraphEdgeData*, size_t,
                                                        unsigned int))
RING_NOT_EMULATED(cudaLibraryLoadData, (cudaLibrary_t*, const void*, enum cudaJitOption*,
                                        void**, unsigned int, enum cudaLibraryOption*, void**,
                                        unsigned int))
RING_NOT_EMULATED(cudaLibraryGetKernel, (cudaKernel_t*, cudaLibrary_t, const char*))
RING_NOT_EMULATED(cudaLibraryUnload, (cudaLibrary_t))
// torch 2.11's libtorch_cuda imports it (CUDAGraph::debug_dump); later releases no longer do.
RING_NOT_EMULATED(cudaGraphDebugDotPrint, (cudaGraph_t, const char*, unsigned int))
}  // extern "C"
