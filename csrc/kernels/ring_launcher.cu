// The host side of one ring-kernel launch: checks, the kernel's parameters, the world-size-1
// cases (no ring: the CPU path's local arithmetic, on the stream), and the running message
// counts per channel.
#include "kernels/ring_launcher.h"

#include "common/errors.h"
#include "kernels/cuda_api.h"
#include "kernels/reduce_kernels.h"
#include "kernels/ring_kernels.cuh"
#include "schedule/ring_walk.h"

namespace ring {
namespace {

std::string cudaText(const char* call, cudaError_t e) {
  return strCat(call, " failed: ", cudaGetErrorString(e), " (", cudaGetErrorName(e), ")");
}

std::string checkPeers(const RingCudaPeers& peers) {
  if (!fifoGeometryValid(peers.geometry)) {
    return strCat("invalid FIFO geometry: ", peers.geometry.channels, " channels x ",
                  peers.geometry.slots, " slots x ", peers.geometry.slotBytes, " bytes");
  }
  if (peers.nranks < 1 || peers.rank < 0 || peers.rank >= peers.nranks) {
    return strCat("invalid rank ", peers.rank, " of ", peers.nranks);
  }
  if (peers.nranks > 1 && (peers.ownInbox == nullptr || peers.nextInbox == nullptr ||
                           peers.prevInbox == nullptr || peers.control == nullptr)) {
    return "the ring's peer memory is not set up";
  }
  return {};
}

// Runs one ring collective: the kernel, then the counters it consumed.
std::string launchWalk(const RingCudaPeers& peers, ChannelCounters* counters, Collective kind,
                       const void* input, void* output, int64_t count, DType dtype, RedOp op,
                       ScaleFactor factor, int root, const Fingerprint& fp,
                       const RingWaitLimits& limits, void* stream) {
  const int64_t esize = static_cast<int64_t>(elementSize(dtype));
  RingKernelParams p;
  p.peers = peers;
  p.kind = kind;
  p.root = root;
  p.count = count;
  // Leaves room to place each message at its data's address mod 16 (fifoMessageShift).
  p.sliceElems = fifoMessageCapacity(peers.geometry) / esize;
  p.input = input;
  p.output = output;
  p.fp = fp;
  p.factor = factor;
  p.divisor = peers.nranks;
  p.limits = limits;
  p.start = *counters;
  cudaError_t e = launchRingKernel(dtype, op, p, static_cast<cudaStream_t>(stream));
  if (e != cudaSuccess) return cudaText("launching the ring kernel", e);
  // The kernel is queued: from now on the peers count on every message of this walk.
  WalkShape w{kind, peers.nranks, peers.rank, root, count, peers.geometry.channels, 0,
              p.sliceElems};
  for (int c = 0; c < peers.geometry.channels; ++c) {
    w.channel = c;
    int64_t sends = 0, receives = 0;
    walkMessages(w, &sends, &receives);
    counters->sent[c] += static_cast<uint64_t>(sends);
    counters->received[c] += static_cast<uint64_t>(receives);
  }
  return {};
}

std::string copyAsync(void* dst, const void* src, int64_t bytes, void* stream) {
  if (bytes <= 0 || dst == src) return {};
  cudaError_t e = cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice,
                                  static_cast<cudaStream_t>(stream));
  return e == cudaSuccess ? std::string() : cudaText("cudaMemcpyAsync", e);
}

}  // namespace

std::string prepareRingKernels(RingKernelFootprint* out) {
  RingKernelFootprint f;
  cudaError_t e = inspectRingKernels(&f);
  if (e != cudaSuccess) return cudaText("cudaFuncGetAttributes on the ring kernels", e);
  size_t stack = 0;
  e = cudaDeviceGetLimit(&stack, cudaLimitStackSize);
  if (e != cudaSuccess) return cudaText("cudaDeviceGetLimit(cudaLimitStackSize)", e);
  if (f.maxLocalBytes > stack) {
    // Now, while nothing of ours spins: growing it at a launch would wait for an idle device.
    e = cudaDeviceSetLimit(cudaLimitStackSize, f.maxLocalBytes);
    if (e != cudaSuccess) return cudaText("cudaDeviceSetLimit(cudaLimitStackSize)", e);
  }
  *out = f;
  return {};
}

std::string launchAllReduce(const RingCudaPeers& peers, ChannelCounters* counters, void* data,
                            int64_t count, DType dtype, RedOp op, ScaleFactor factor,
                            const Fingerprint& fp, const RingWaitLimits& limits, void* stream) {
  std::string bad = checkPeers(peers);
  if (!bad.empty()) return bad;
  if (peers.nranks == 1) {
    // As the host path on one rank (Communicator::run, then oneRank): scale in place, divide
    // by one.
    if (op == RedOp::PreMulSum) bad = launchScale(dtype, data, data, factor, count, stream);
    if (bad.empty() && op == RedOp::Avg) bad = launchDivide(dtype, data, 1, count, stream);
    return bad;
  }
  return launchWalk(peers, counters, Collective::AllReduce, data, data, count, dtype, op, factor,
                    -1, fp, limits, stream);
}

std::string launchReduceScatter(const RingCudaPeers& peers, ChannelCounters* counters,
                                const void* input, void* output, int64_t countPerRank,
                                DType dtype, RedOp op, ScaleFactor factor,
                                const Fingerprint& fp, const RingWaitLimits& limits,
                                void* stream) {
  std::string bad = checkPeers(peers);
  if (!bad.empty()) return bad;
  if (peers.nranks == 1) {
    // As the host path on one rank (Communicator::run, then oneRank): the (scaled) copy, then
    // divide by one.
    if (op == RedOp::PreMulSum) {
      bad = launchScale(dtype, output, input, factor, countPerRank, stream);
    } else {
      bad = copyAsync(output, input, countPerRank * static_cast<int64_t>(elementSize(dtype)),
                      stream);
    }
    if (bad.empty() && op == RedOp::Avg) bad = launchDivide(dtype, output, 1, countPerRank, stream);
    return bad;
  }
  return launchWalk(peers, counters, Collective::ReduceScatter, input, output, countPerRank,
                    dtype, op, factor, -1, fp, limits, stream);
}

std::string launchAllGather(const RingCudaPeers& peers, ChannelCounters* counters,
                            const void* input, void* output, int64_t countPerRank, DType dtype,
                            const Fingerprint& fp, const RingWaitLimits& limits, void* stream) {
  std::string bad = checkPeers(peers);
  if (!bad.empty()) return bad;
  if (peers.nranks == 1) {
    return copyAsync(output, input, countPerRank * static_cast<int64_t>(elementSize(dtype)),
                     stream);
  }
  return launchWalk(peers, counters, Collective::AllGather, input, output, countPerRank, dtype,
                    RedOp::Sum, 1.0, -1, fp, limits, stream);
}

std::string launchBroadcast(const RingCudaPeers& peers, ChannelCounters* counters, void* data,
                            int64_t count, DType dtype, int root, const Fingerprint& fp,
                            const RingWaitLimits& limits, void* stream) {
  std::string bad = checkPeers(peers);
  if (!bad.empty()) return bad;
  if (root < 0 || root >= peers.nranks) return strCat("invalid root ", root);
  if (peers.nranks == 1) return {};
  return launchWalk(peers, counters, Collective::Broadcast, data, data, count, dtype, RedOp::Sum,
                    1.0, root, fp, limits, stream);
}

}  // namespace ring
