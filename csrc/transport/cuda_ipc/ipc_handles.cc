#include "transport/cuda_ipc/ipc_handles.h"

#include <cuda_runtime.h>

#include <cstring>
#include <map>
#include <mutex>

#include "common/errors.h"

namespace ring {
namespace {

struct Opened {
  void* ptr;
  int refs;
};

std::mutex& cacheMutex() {
  static std::mutex m;
  return m;
}
// Keyed by the handle's bytes.
std::map<std::string, Opened>& cache() {
  static auto* c = new std::map<std::string, Opened>();  // never destroyed: used at exit
  return *c;
}

}  // namespace

void* openIpcHandle(const uint8_t* handle, std::string* error) {
  std::string key(reinterpret_cast<const char*>(handle), sizeof(cudaIpcMemHandle_t));
  std::lock_guard<std::mutex> lock(cacheMutex());
  auto it = cache().find(key);
  if (it != cache().end()) {
    ++it->second.refs;
    return it->second.ptr;
  }
  cudaIpcMemHandle_t h;
  std::memcpy(&h, handle, sizeof h);
  void* ptr = nullptr;
  // Lazy peer access: when the allocation lives on another GPU, the driver enables access
  // for this mapping; on the same GPU (several ranks on one device) none is needed.
  cudaError_t e = cudaIpcOpenMemHandle(&ptr, h, cudaIpcMemLazyEnablePeerAccess);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    *error = strCat("cudaIpcOpenMemHandle failed: ", cudaGetErrorString(e), " (",
                    cudaGetErrorName(e), ")");
    return nullptr;
  }
  cache().emplace(key, Opened{ptr, 1});
  return ptr;
}

void closeIpcHandle(void* ptr) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(cacheMutex());
  for (auto it = cache().begin(); it != cache().end(); ++it) {
    if (it->second.ptr != ptr) continue;
    if (--it->second.refs == 0) {
      (void)cudaIpcCloseMemHandle(ptr);
      (void)cudaGetLastError();
      cache().erase(it);
    }
    return;
  }
}

}  // namespace ring
