// Host API of the CUDA ring kernels: one launch per collective on a caller's stream. Torch-free
// and free of CUDA headers (streams travel as void*), so the backend and the tests include it
// anywhere.
//
// The host object that owns the memory (transport/cuda_ipc/cuda_ring_links.h) fills a
// RingCudaPeers; each launch passes it by value to the kernel, with the collective's shape, its
// fingerprint and where each channel's counters stand.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "common/types.h"
#include "kernels/device_error.h"
#include "kernels/fifo_layout.h"
#include "kernels/scale_factor.h"
#include "protocol/message_header.h"

namespace ring {

// Device pointers to the three inboxes a rank touches (fifo_layout.h). For two ranks `next`
// and `prev` are the same inbox.
struct RingCudaPeers {
  FifoGeometry geometry;
  int32_t rank;
  int32_t nranks;
  char* ownInbox;    // this rank's inbox: FIFOs it receives on, and its `consumed` counters
  char* nextInbox;   // rank+1's inbox (peer pointer): slots, headers, `published` it writes
  char* prevInbox;   // rank-1's inbox (peer pointer): the `consumed` counters it writes
  HostMappedControl* control;  // device pointer of this rank's host-mapped abort word + record
};
static_assert(std::is_trivially_copyable<RingCudaPeers>::value,
              "passed by value to every kernel launch");

// Messages each channel has sent to the next rank and received from the previous one since the
// communicator was created: the start values of the next launch. The launcher advances them
// after each successful launch by the walk's message counts (ring_walk.h).
struct ChannelCounters {
  uint64_t sent[kMaxCudaChannels];
  uint64_t received[kMaxCudaChannels];
};
static_assert(std::is_trivially_copyable<ChannelCounters>::value, "passed by value to kernels");

// Bounds every wait inside the kernels.
struct RingWaitLimits {
  uint64_t spinLimitNs;  // one wait gives up after this long (set above the group timeout)
};

// What set-up learns of the ring kernels before any of them runs (prepareRingKernels).
struct RingKernelFootprint {
  size_t maxLocalBytes = 0;  // the largest per-thread stack (local memory) of any instantiation
  int minBlocksPerSm = -1;   // the fewest ring-kernel blocks one SM holds at once
};

// Loads every instantiation of the ring kernels on the current device now, and raises the
// device's stack limit to what they need. Why: CUDA loads kernels lazily by default (since
// 12.2), and loading a module or growing the stack at a later launch can wait for the device
// to go idle, which it never does while a peer's ring kernel spins waiting for this rank: a
// deadlock until the watchdog. Call once per device at set-up, before any ring kernel runs.
// "" on success, else the CUDA error.
std::string prepareRingKernels(RingKernelFootprint* out);

// dst may alias src for the in-place collectives; element counts; `fp` is what every header
// of this collective carries and what every received header must equal.
std::string launchAllReduce(const RingCudaPeers& peers, ChannelCounters* counters, void* data,
                            int64_t count, DType dtype, RedOp op, ScaleFactor factor,
                            const Fingerprint& fp, const RingWaitLimits& limits, void* stream);

// input: nranks * countPerRank elements (not modified, must not overlap output); output:
// countPerRank elements, the reduction of every rank's block `rank`.
std::string launchReduceScatter(const RingCudaPeers& peers, ChannelCounters* counters,
                                const void* input, void* output, int64_t countPerRank,
                                DType dtype, RedOp op, ScaleFactor factor,
                                const Fingerprint& fp,
                                const RingWaitLimits& limits, void* stream);

// input: countPerRank elements (may be block `rank` of output itself); output: nranks times that.
std::string launchAllGather(const RingCudaPeers& peers, ChannelCounters* counters,
                            const void* input, void* output, int64_t countPerRank, DType dtype,
                            const Fingerprint& fp, const RingWaitLimits& limits, void* stream);

// In place, from `root`.
std::string launchBroadcast(const RingCudaPeers& peers, ChannelCounters* counters, void* data,
                            int64_t count, DType dtype, int root, const Fingerprint& fp,
                            const RingWaitLimits& limits, void* stream);

}  // namespace ring
