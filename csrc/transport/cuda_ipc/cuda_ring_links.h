// The CUDA transport of one group: this rank's device inbox, the peer pointers to its two ring
// neighbours' inboxes, and the host-mapped abort word + error record. Torch-free.
//
// Set-up is collective (every rank constructs it at the same point of its collective
// sequence) and never half-succeeds: each rank publishes what it has (CudaPeerInfo), decides
// for its own two links (peer_info.h), publishes its verdict, and reads every rank's verdict.
// The kernels are used only if EVERY link of the ring has a path; otherwise every rank
// declines with the same first reason and the caller stages through host memory. So the ranks
// always agree on which path a collective takes.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "kernels/ring_launcher.h"
#include "transport/store.h"

namespace ring {

struct CudaLinkOptions {
  int device = 0;                 // this rank's CUDA ordinal
  FifoGeometry geometry{};
  bool enabled = true;            // false: take part in set-up, then decline
  std::string disabledBecause = "TORCH_RING_CUDA_KERNELS=0";  // the reason when !enabled
  std::string hostId;             // ranks with equal ids share a host (hostIdentity())
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};  // store waits
};

class CudaRingLinks {
 public:
  // Collective. Throws CommError only when the store itself fails (a peer never arrived);
  // every CUDA problem becomes a declined ring (usable() false, declineReason()).
  CudaRingLinks(Store& store, int rank, int size, const CudaLinkOptions& opts);
  // Frees the inbox unless keepMemory() was called (see there).
  ~CudaRingLinks();
  CudaRingLinks(const CudaRingLinks&) = delete;
  CudaRingLinks& operator=(const CudaRingLinks&) = delete;

  bool usable() const { return usable_; }
  // "rank 2 -> rank 3: the ranks are on different hosts ...": the first declining link.
  const std::string& declineReason() const { return declineReason_; }
  // One line per link for the log: "rank 0 -> rank 1: CUDA IPC (same GPU)".
  std::string describe() const { return description_; }
  int device() const { return device_; }

  // Device pointers for the kernels (valid only when usable()).
  const RingCudaPeers& peers() const { return peers_; }

  // Stops every running and future kernel of this rank at its next check: the host-mapped
  // abort word. Irreversible: the FIFO counters are then out of step.
  void requestAbort();
  bool abortRequested() const;
  // The record the first stopping block wrote (status kDeviceOk if none). Read only after the
  // kernel in question has ended (its event completed): then the record is complete.
  DeviceErrorRecord errorRecord() const;

  // After an abort a peer's kernel may still write into this inbox: leak it (and the control
  // block) instead of freeing memory a peer could write into.
  void keepMemory() { keepMemory_ = true; }

  // Collective, at shutdown, after this rank's kernels have ended: unmaps the neighbours'
  // inboxes, then waits (through the store, at most `timeout`) until every rank has, so that
  // the destructor frees an inbox no peer maps or writes any more. A rank that never arrives
  // leaves the inbox allocated instead (keepMemory).
  void closeCollectively(Store& store, std::chrono::milliseconds timeout);

 private:
  void allocate(int rank);
  void release();
  // Closes this rank's IPC mappings, then waits (at most `timeout`) until all `size` ranks
  // have added themselves to `key`: after that no peer maps this rank's inbox. False (and the
  // memory marked kept, with a warning) when some rank never came.
  bool unmapThenMeet(Store& store, const std::string& key, std::chrono::milliseconds timeout);

  int rank_;
  int size_;
  int device_;
  bool usable_ = false;
  bool keepMemory_ = false;
  std::string declineReason_;
  std::string description_;
  RingCudaPeers peers_{};
  char* inbox_ = nullptr;                  // own allocation
  HostMappedControl* hostControl_ = nullptr;  // host view of the control block
  std::vector<void*> opened_;              // IPC mappings to close
  std::string problem_;                    // why this rank cannot take part, if it cannot
  RingKernelFootprint footprint_;          // of the ring kernels on this device
  int smCount_ = 0;
  bool exported_ = false;
  unsigned char ipcHandle_[64] = {};
};

}  // namespace ring
