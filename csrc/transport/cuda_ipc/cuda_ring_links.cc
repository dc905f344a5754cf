#include "transport/cuda_ipc/cuda_ring_links.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/errors.h"
#include "common/logging.h"
#include "kernels/host_control.h"
#include "schedule/partition.h"
#include "transport/cuda_ipc/cuda_check.h"
#include "transport/cuda_ipc/device_scope.h"
#include "transport/cuda_ipc/ipc_handles.h"
#include "transport/cuda_ipc/peer_info.h"

namespace ring {
namespace {

// The ordinal under which this process sees the GPU with `uuid`, or -1.
int localOrdinalOf(const uint8_t* uuid) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, d) != cudaSuccess) {
      (void)cudaGetLastError();
      continue;
    }
    if (std::memcmp(prop.uuid.bytes, uuid, 16) == 0) return d;
  }
  return -1;
}

// Ranks that are threads of one process on one GPU share its context, and a ring kernel of one
// spins until the others' run: anything that waits for the whole device meanwhile waits for a
// kernel that waits for it. CUDA's lazy module loading (CUDA_MODULE_LOADING=LAZY: CUDA's default
// since 12.2, and torch's) may synchronise the context when a kernel is first loaded (the CUDA
// Programming Guide says so of spinning kernels), and cudaFree (torch.cuda.empty_cache, or the
// caching allocator freeing its cache when an allocation finds the memory full) synchronises
// it. Not refused (it works when nothing of the kind happens mid-collective), but said once.
void warnOfImplicitSynchronization(int ranks, int device) {
  const char* loading = std::getenv("CUDA_MODULE_LOADING");
  const bool eager = loading != nullptr && std::string(loading) == "EAGER";
  static std::once_flag once;
  std::call_once(once, [&] {
    RING_LOG(kLogWarn, ranks, " ranks of this process share cuda:", device,
             ": a ring kernel of one waits for the others' kernels, so whatever synchronises "
             "the device meanwhile waits for it until the group's timeout: ",
             eager ? "" : "the first launch of a torch kernel under lazy module loading "
                          "(CUDA_MODULE_LOADING is not EAGER), ",
             "cudaFree (torch.cuda.empty_cache(), or the caching allocator when memory runs "
             "out). ",
             eager ? "" : "Set CUDA_MODULE_LOADING=EAGER before CUDA starts, ",
             "keep empty_cache() and out-of-memory retries out of the collectives' way, or run "
             "the ranks as processes (one per rank, as torchrun does).");
  });
}

std::string infoKey(int rank) { return strCat("ring/cuda/info/", rank); }
std::string verdictKey(int rank) { return strCat("ring/cuda/verdict/", rank); }
std::string closedKey() { return "ring/cuda/closed"; }
std::string declinedKey() { return "ring/cuda/declined"; }

void copyProblem(CudaPeerInfo* info, const std::string& text) {
  std::strncpy(info->problem, text.c_str(), sizeof info->problem - 1);
  info->problem[sizeof info->problem - 1] = '\0';
}

}  // namespace

CudaRingLinks::CudaRingLinks(Store& store, int rank, int size, const CudaLinkOptions& opts)
    : rank_(rank), size_(size), device_(opts.device) {
  peers_.geometry = opts.geometry;
  peers_.rank = rank;
  peers_.nranks = size;
  if (size == 1) {
    // No links: the launcher runs a group of one without kernels or memory.
    usable_ = true;
    description_ = "a group of one rank: no CUDA links";
    return;
  }
  RING_ASSERT(fifoGeometryValid(opts.geometry), "FIFO geometry ", opts.geometry.channels, "x",
              opts.geometry.slots, "x", opts.geometry.slotBytes);

  CudaPeerInfo mine;
  std::memset(&mine, 0, sizeof mine);
  mine.version = kCudaPeerInfoVersion;
  mine.enabled = opts.enabled ? 1 : 0;
  mine.pid = static_cast<int32_t>(getpid());
  mine.processToken = processToken();
  mine.device = opts.device;
  mine.geometry = opts.geometry;

  if (opts.enabled) {
    try {
      requireCurrentDevice(device_, "setting up the CUDA links");
      allocate(rank);
      mine.ready = 1;
      mine.inboxAddress = reinterpret_cast<uint64_t>(inbox_);
      cudaDeviceProp prop;
      RING_CUDA_CHECK(cudaGetDeviceProperties(&prop, device_), "rank ", rank);
      std::memcpy(mine.uuid, prop.uuid.bytes, sizeof mine.uuid);
      if (exported_) {
        mine.exported = 1;
        std::memcpy(mine.ipcHandle, ipcHandle_, sizeof mine.ipcHandle);
      }
    } catch (const RingError& e) {
      problem_ = e.what();
      mine.ready = 0;
    }
    if (!problem_.empty()) copyProblem(&mine, problem_);
  } else {
    copyProblem(&mine, opts.disabledBecause);
  }
  store.set(infoKey(rank), encodePeerInfo(opts.hostId, mine));

  // Every rank's record (a store timeout here means a peer never arrived: throws). A record
  // that does not decode declines the links to that rank.
  std::vector<std::string> hosts(static_cast<size_t>(size));
  std::vector<CudaPeerInfo> infos(static_cast<size_t>(size));
  std::vector<std::string> unreadable(static_cast<size_t>(size));
  const std::vector<std::string> records =
      readEveryRank(store, rank, size, infoKey, std::string(), opts.timeout);
  for (int r = 0; r < size; ++r) {
    if (r == rank) {
      hosts[r] = opts.hostId;
      infos[r] = mine;
      continue;
    }
    try {
      decodePeerInfo(records[static_cast<size_t>(r)], &hosts[r], &infos[r]);
    } catch (const RingError& e) {
      unreadable[r] = e.what();
      std::memset(&infos[r], 0, sizeof infos[r]);
    }
  }

  // Refused outright (every rank says so, with the same words): more blocks than fit.
  std::string fatal;
  if (mine.ready) {
    const int sharing = ranksSharingGpuInProcess(infos, mine);
    fatal = coResidencyProblem(sharing, opts.geometry.channels, smCount_,
                               footprint_.minBlocksPerSm);
    if (fatal.empty() && sharing > 1) warnOfImplicitSynchronization(sharing, device_);
  }

  // This rank's verdict on its own two links (one when next == prev).
  const int next = ringNext(rank, size);
  const int prev = ringPrev(rank, size);
  std::string verdict;
  char* nextPtr = nullptr;
  char* prevPtr = nullptr;
  for (int peer : {next, prev}) {
    if (!verdict.empty() || !fatal.empty()) break;
    if (peer == prev && prev == next && nextPtr != nullptr) {
      prevPtr = nextPtr;  // two ranks: one neighbour, one mapping
      break;
    }
    if (!unreadable[peer].empty()) {
      verdict = strCat("rank ", rank, " -> rank ", peer, ": ", unreadable[peer]);
      break;
    }
    const CudaPeerInfo& theirs = infos[peer];
    int theirLocal = -1;
    int canAccess = 0;
    if (mine.ready && theirs.ready && std::memcmp(mine.uuid, theirs.uuid, 16) != 0) {
      theirLocal = localOrdinalOf(theirs.uuid);
      if (theirLocal >= 0 && cudaDeviceCanAccessPeer(&canAccess, device_, theirLocal) != cudaSuccess) {
        (void)cudaGetLastError();
        canAccess = 0;
      }
    }
    PathChoice choice = choosePeerPath(opts.hostId, mine, hosts[peer], theirs, theirLocal, canAccess != 0);
    std::string how;
    void* ptr = nullptr;
    if (choice.path == PeerPath::Direct) {
      if (choice.needsPeerAccess) {
        cudaError_t e = cudaDeviceEnablePeerAccess(theirLocal, 0);
        if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) {
          choice.path = PeerPath::Declined;
          choice.reason = strCat("cudaDeviceEnablePeerAccess(", theirLocal, ") failed: ",
                                 cudaGetErrorString(e));
        }
        (void)cudaGetLastError();
      }
      ptr = reinterpret_cast<void*>(theirs.inboxAddress);
      how = choice.needsPeerAccess ? strCat("direct pointer (threads of one process, cuda:",
                                            device_, " -> cuda:", theirLocal, ", peer access)")
                                   : "direct pointer (threads of one process, same GPU)";
    } else if (choice.path == PeerPath::Ipc) {
      std::string error;
      ptr = openIpcHandle(theirs.ipcHandle, &error);
      if (ptr == nullptr) {
        choice.path = PeerPath::Declined;
        choice.reason = error;
      } else {
        opened_.push_back(ptr);
      }
      const bool sameGpu = std::memcmp(mine.uuid, theirs.uuid, 16) == 0;
      how = sameGpu ? std::string("CUDA IPC (same GPU)")
                    : theirLocal < 0
                          ? strCat("CUDA IPC (cuda:", device_, " -> a GPU this process cannot see)")
                          : strCat("CUDA IPC (cuda:", device_, " -> cuda:", theirLocal, ")");
    }
    if (choice.path == PeerPath::Declined) {
      verdict = strCat("rank ", rank, " -> rank ", peer, ": ", choice.reason);
      break;
    }
    description_ += strCat(description_.empty() ? "" : "; ", "rank ", rank, " <-> rank ", peer,
                           ": ", how);
    if (peer == next) nextPtr = static_cast<char*>(ptr);
    if (peer == prev) prevPtr = static_cast<char*>(ptr);
  }
  const std::string myVerdict =
      !fatal.empty() ? "err:" + fatal : (verdict.empty() ? std::string("ok") : "no:" + verdict);
  store.set(verdictKey(rank), myVerdict);

  // Every rank reads every verdict: the same answer everywhere, and the same first reason.
  usable_ = true;
  std::string firstFatal;
  const std::vector<std::string> verdicts =
      readEveryRank(store, rank, size, verdictKey, myVerdict, opts.timeout);
  for (int r = 0; r < size; ++r) {
    const std::string& v = verdicts[static_cast<size_t>(r)];
    if (v.rfind("err:", 0) == 0 && firstFatal.empty()) firstFatal = strCat("rank ", r, ": ", v.substr(4));
    if (v != "ok" && usable_) {
      usable_ = false;
      declineReason_ = v.size() > 3 ? v.substr(v.find(':') + 1) : v;
    }
  }
  // Refused or declined: no kernel ever ran, so nothing writes into this memory; but a peer
  // whose own links were fine has already opened this rank's inbox, and freeing an exported
  // allocation before every importer closed it is undefined in CUDA. So unmap, meet every
  // rank at the store (they all reach this same verdict), then free.
  if (!firstFatal.empty() || !usable_) {
    if (unmapThenMeet(store, declinedKey(), opts.timeout)) release();
    if (!firstFatal.empty()) throw RingError(firstFatal);
    description_ = "declined: " + declineReason_;
    return;
  }
  peers_.ownInbox = inbox_;
  peers_.nextInbox = nextPtr;
  peers_.prevInbox = prevPtr;
  void* deviceControl = nullptr;
  RING_CUDA_CHECK(cudaHostGetDevicePointer(&deviceControl, hostControl_, 0), "rank ", rank);
  peers_.control = static_cast<HostMappedControl*>(deviceControl);
}

void CudaRingLinks::allocate(int rank) {
  // Every ring kernel loaded now, with the stack it needs (see prepareRingKernels), and what
  // the co-residency check needs to know.
  std::string unprepared = prepareRingKernels(&footprint_);
  if (!unprepared.empty()) throw RingError(strCat("rank ", rank, ": ", unprepared));
  RING_CUDA_CHECK(cudaDeviceGetAttribute(&smCount_, cudaDevAttrMultiProcessorCount, device_),
                  "rank ", rank);
  const int64_t bytes = fifoInboxBytes(peers_.geometry);
  void* p = nullptr;
  RING_CUDA_CHECK(cudaMalloc(&p, static_cast<size_t>(bytes)), "rank ", rank, ": the CUDA inbox of ",
                  bytes, " bytes on cuda:", device_);
  inbox_ = static_cast<char*>(p);
  // Counters start at zero before any peer can see the allocation (the handle is published
  // only after this completes). A private non-blocking stream: no implicit wait on other work.
  cudaStream_t s = nullptr;
  RING_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "rank ", rank);
  cudaError_t e = cudaMemsetAsync(inbox_, 0, static_cast<size_t>(bytes), s);
  if (e == cudaSuccess) e = cudaStreamSynchronize(s);
  (void)cudaStreamDestroy(s);
  RING_CUDA_CHECK(e, "rank ", rank, ": zeroing the CUDA inbox");
  void* host = nullptr;
  // Mapped: kernels read the abort word and write the record in place. Portable: valid in
  // every CUDA context of the process.
  RING_CUDA_CHECK(cudaHostAlloc(&host, sizeof(HostMappedControl),
                                cudaHostAllocMapped | cudaHostAllocPortable),
                  "rank ", rank, ": the host-mapped control block");
  std::memset(host, 0, sizeof(HostMappedControl));
  hostControl_ = static_cast<HostMappedControl*>(host);
  // The export may fail (e.g. IPC unsupported on this platform): threads of one process can
  // still use the inbox directly, so that is a per-link decision, not a failure here.
  cudaIpcMemHandle_t h;
  e = cudaIpcGetMemHandle(&h, inbox_);
  if (e == cudaSuccess) {
    std::memcpy(ipcHandle_, &h, sizeof ipcHandle_);
    exported_ = true;
  } else {
    (void)cudaGetLastError();
    problem_ = strCat("cudaIpcGetMemHandle failed on rank ", rank, ": ", cudaGetErrorString(e),
                      " (", cudaGetErrorName(e), ")");
  }
  static_assert(sizeof(cudaIpcMemHandle_t) == 64, "CudaPeerInfo carries 64 handle bytes");
}

void CudaRingLinks::release() {
  for (void* p : opened_) closeIpcHandle(p);
  opened_.clear();
  if (keepMemory_) {
    if (inbox_ != nullptr) {
      RING_LOG(kLogWarn, "keeping the CUDA inbox of an aborted group allocated "
                         "(a peer's kernel may still write into it)");
    }
    return;
  }
  // Errors ignored: this may run at interpreter exit, after the CUDA runtime began unloading.
  if (inbox_ != nullptr) (void)cudaFree(inbox_);
  if (hostControl_ != nullptr) (void)cudaFreeHost(hostControl_);
  (void)cudaGetLastError();
  inbox_ = nullptr;
  hostControl_ = nullptr;
}

CudaRingLinks::~CudaRingLinks() { release(); }

void CudaRingLinks::closeCollectively(Store& store, std::chrono::milliseconds timeout) {
  if (size_ == 1 || !usable_ || inbox_ == nullptr) return;
  // Called after this rank's kernels have ended; the destructor frees the inbox only once
  // every rank has unmapped it (or keeps it, if some rank never came).
  (void)unmapThenMeet(store, closedKey(), timeout);
}

bool CudaRingLinks::unmapThenMeet(Store& store, const std::string& key,
                                  std::chrono::milliseconds timeout) {
  // 1. Unmap the neighbours' inboxes: this rank will write into them no more.
  for (void* p : opened_) closeIpcHandle(p);
  opened_.clear();
  // 2. Wait until every rank has done the same, so no peer maps or writes this rank's inbox
  //    any longer...
  store.add(key, 1);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (store.add(key, 0) < size_) {
    if (std::chrono::steady_clock::now() >= deadline) {
      // ... and if some rank never comes (it died, or left without shutting down), keep the
      // memory rather than free what it might still write into.
      RING_LOG(kLogWarn, "not every rank of the group closed its CUDA links "
               "within ", timeout.count(), " ms; keeping this rank's CUDA inbox allocated");
      keepMemory_ = true;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  // 3. Now freeing is safe (release() frees it).
  return true;
}

void CudaRingLinks::requestAbort() {
  if (hostControl_ != nullptr) raiseAbort(hostControl_);
}

bool CudaRingLinks::abortRequested() const {
  return hostControl_ != nullptr && abortRaised(hostControl_);
}

DeviceErrorRecord CudaRingLinks::errorRecord() const {
  return hostControl_ == nullptr ? DeviceErrorRecord{} : readErrorRecord(hostControl_);
}

}  // namespace ring
