// What each rank publishes about its CUDA inbox, and the pure decision of how (or whether) a
// rank reaches a neighbour's inbox. No CUDA calls here: the caller supplies what it learnt
// from the runtime (the peer GPU's local ordinal, peer access), so every branch is unit-tested.
//
// Paths, in order of preference:
//   Direct - the peer is a thread of this process: its device pointer is valid here as is
//            (opening one's own IPC handle fails, so this case must not use IPC).
//   Ipc    - another process on this host: open its exported handle (cudaIpcOpenMemHandle).
//            Several ranks on ONE GPU work this way without any peer access.
//            A peer on a GPU this process cannot see (CUDA_VISIBLE_DEVICES) takes IPC too:
//            the handle opens all the same, and an open that fails declines the link.
//   Declined (with a reason) - the caller stages through pinned host memory over the CPU
//            transport instead: a different host, another GPU without peer access, IPC
//            unsupported or failing, CUDA disabled, or differing FIFO geometry.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/fifo_layout.h"

namespace ring {

struct CudaPeerInfo {
  uint32_t version;        // kCudaPeerInfoVersion
  int32_t enabled;         // 1: this rank wants the CUDA kernels (TORCH_RING_CUDA_KERNELS)
  int32_t ready;           // 1: inbox allocated (else `problem` says why not)
  int32_t exported;        // 1: ipcHandle is valid (else `problem` says why not)
  int32_t pid;
  uint64_t processToken;   // random per process: equal tokens = threads of one process
  int32_t device;           // CUDA ordinal in the publishing process
  uint8_t uuid[16];        // the GPU's UUID: the same GPU seen from any process
  uint8_t ipcHandle[64];   // cudaIpcMemHandle_t of the inbox allocation's base
  uint64_t inboxAddress;   // the inbox's device pointer (meaningful within its own process)
  FifoGeometry geometry;
  char problem[160];       // NUL-terminated: why !ready or !exported
};
static_assert(std::is_trivially_copyable<CudaPeerInfo>::value, "exchanged as raw bytes");

constexpr uint32_t kCudaPeerInfoVersion = 1;

// Store values: the host identity, a newline, the struct in hex.
std::string encodePeerInfo(const std::string& hostId, const CudaPeerInfo& info);
// Throws CommError on a malformed value (a different version of this library on the peer).
void decodePeerInfo(const std::string& value, std::string* hostId, CudaPeerInfo* info);

enum class PeerPath { Direct, Ipc, Declined };

struct PathChoice {
  PeerPath path = PeerPath::Declined;
  bool needsPeerAccess = false;  // Direct between two GPUs: enable peer access first
  std::string reason;            // Declined: why, in words a user can act on
};

// `theirLocalOrdinal`: the ordinal, in THIS process, of the GPU with the peer's UUID, or -1 if
// this process cannot see it. `canAccessPeer`: cudaDeviceCanAccessPeer(mine, theirs) when the
// two GPUs differ (ignored when they are the same GPU).
PathChoice choosePeerPath(const std::string& myHost, const CudaPeerInfo& me,
                          const std::string& theirHost, const CudaPeerInfo& them,
                          int theirLocalOrdinal, bool canAccessPeer);

// How many of `all` (every rank's record, this rank's included) are threads of the same process
// as `me` on the same GPU with their inbox ready: their ring kernels run at the same time.
int ranksSharingGpuInProcess(const std::vector<CudaPeerInfo>& all, const CudaPeerInfo& me);

// Ring kernels that spin waiting for each other must all be resident on the GPU at once, or
// the ones waiting hold the SMs the awaited ones need: a deadlock. Kernels of several ranks in
// one process run concurrently (several processes on one GPU time-slice instead). "" when
// `ranks` x `channels` blocks fit on `smCount` SMs of `blocksPerSm` ring-kernel blocks each;
// otherwise the error, with the numbers and what to change.
std::string coResidencyProblem(int ranks, int channels, int smCount, int blocksPerSm);

// A random 64-bit token, the same for every call in this process.
uint64_t processToken();

}  // namespace ring
