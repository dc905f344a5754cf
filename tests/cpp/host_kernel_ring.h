// A ring of host-run CUDA kernels for tests: every rank's device inbox and host-mapped control
// block are host memory, wired the way CudaRingLinks wires threads of one process on a GPU
// (direct pointers to the neighbours' inboxes). The kernels then run through the same
// ring_launcher entry points as on a GPU, with host threads as CUDA threads (host_shim.h).
#pragma once

#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/fifo_layout.h"
#include "kernels/host_control.h"
#include "kernels/ring_launcher.h"
#include "schedule/partition.h"

namespace ring {
namespace testing_support {

class HostKernelRing {
 public:
  HostKernelRing(int nranks, FifoGeometry geometry) : n_(nranks), geometry_(geometry) {
    for (int r = 0; r < n_; ++r) {
      const size_t bytes = static_cast<size_t>(fifoInboxBytes(geometry_));
      // As cudaMalloc: 256-byte aligned, zeroed before any peer can see it.
      char* inbox = static_cast<char*>(std::aligned_alloc(256, (bytes + 255) / 256 * 256));
      std::memset(inbox, 0, bytes);
      inboxes_.push_back(inbox);
      auto* control = static_cast<HostMappedControl*>(
          std::aligned_alloc(128, (sizeof(HostMappedControl) + 127) / 128 * 128));
      std::memset(control, 0, sizeof(HostMappedControl));
      controls_.push_back(control);
    }
    counters_.assign(static_cast<size_t>(n_), ChannelCounters{});
  }
  ~HostKernelRing() {
    for (char* p : inboxes_) std::free(p);
    for (HostMappedControl* c : controls_) std::free(c);
  }
  HostKernelRing(const HostKernelRing&) = delete;
  HostKernelRing& operator=(const HostKernelRing&) = delete;

  int size() const { return n_; }
  const FifoGeometry& geometry() const { return geometry_; }

  RingCudaPeers peers(int rank) const {
    RingCudaPeers p{};
    p.geometry = geometry_;
    p.rank = rank;
    p.nranks = n_;
    p.ownInbox = inboxes_[rank];
    p.nextInbox = inboxes_[ringNext(rank, n_)];
    p.prevInbox = inboxes_[ringPrev(rank, n_)];
    p.control = controls_[rank];
    return p;
  }
  ChannelCounters* counters(int rank) { return &counters_[rank]; }
  HostMappedControl* control(int rank) { return controls_[rank]; }
  char* inbox(int rank) { return inboxes_[rank]; }

  // The counter words in rank's inbox (read after every kernel has ended).
  uint64_t published(int rank, int channel) const { return word(rank, fifoPublishedOffset(geometry_, channel)); }
  uint64_t consumed(int rank, int channel) const { return word(rank, fifoConsumedOffset(geometry_, channel)); }

 private:
  uint64_t word(int rank, int64_t offset) const {
    uint64_t v;
    std::memcpy(&v, inboxes_[rank] + offset, sizeof v);
    return v;
  }

  int n_;
  FifoGeometry geometry_;
  std::vector<char*> inboxes_;
  std::vector<HostMappedControl*> controls_;
  std::vector<ChannelCounters> counters_;
};

}  // namespace testing_support
}  // namespace ring
