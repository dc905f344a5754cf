// The ring kernel: one launch runs a whole collective; block c is channel c, an independent
// ring over its own part of the buffer (ring_walk.h) and its own FIFO of slots in each
// neighbour's inbox (fifo_layout.h).
//
// Why this shape:
//  - One launch per collective, so the host only enqueues; the kernel waits on its peers by
//    polling counters in its own memory (never reading across the link).
//  - Each block walks the SAME step list as the CPU executor (walkStep = the per-step functions
//    of ring_steps.h): the bytes that go where are decided by host-tested code, and the GPU run
//    only has to prove the memory protocol.
//  - Per step, thread 0 does the waiting (for the message, then for a free slot at the next
//    rank) and checks the received header; the whole block then moves the data, in 16-byte
//    units between a short head and tail (moveStep); thread 0 then publishes.
//  - The same source builds for the GPU and, under kernels/host_shim.h, for the host, where the
//    tests run it with threads as ranks and under ThreadSanitizer: only the primitives of
//    cuda_api.h / device_flags.cuh differ, never this file's logic.
//  - Reduction order is the CPU path's: incoming (op) local, each chunk completed once at one
//    rank and then copied verbatim, so every rank ends with the same bits.
//
// Protocol of one step on channel c (sent / received: this channel's running message counts):
//   1. thread 0: wait own.published[c] >= received + 1      (the message is in my slot)
//                check the slot's header against this collective's fingerprint
//                wait own.consumed[c] >= sent + 1 - slots    (next's slot is free)
//   2. all:      read my slot / local input, reduce, write output and next's slot (peer memory)
//   3. thread 0: write the header into next's header slot
//      barrier   (every thread's payload stores are ordered before thread 0's fence)
//   4. thread 0: system fence (payload and header reach next's memory before the counter)
//                st.release.sys next.published[c] = sent + 1
//                st.release.sys prev.consumed[c]  = received + 1
// At the end, thread 0 waits own.consumed[c] == sent: nobody writes into this rank's memory for
// this collective after its kernel ends, so the next collective starts from settled counters.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/cuda_api.h"

#include "kernels/device_flags.cuh"
#include "kernels/fifo_layout.h"
#include "reduce/reduce_ops.h"
#include "kernels/ring_launcher.h"
#include "kernels/scale_factor.h"
#include "schedule/ring_walk.h"

namespace ring {

constexpr int kRingThreads = 512;

// Everything one launch needs, passed by value (a __grid_constant__ parameter: no copy into
// local memory when indexed by channel).
struct RingKernelParams {
  RingCudaPeers peers;
  Collective kind;
  int32_t root;
  int64_t count;       // as WalkShape::count
  int64_t sliceElems;  // slot bytes / element size
  const void* input;
  void* output;
  Fingerprint fp;
  ScaleFactor factor;  // PREMUL_SUM's: a value, or an element in device memory read here
  int64_t divisor;     // AVG: the group size
  RingWaitLimits limits;
  ChannelCounters start;  // per channel: messages sent / received before this collective
};
static_assert(std::is_trivially_copyable<RingKernelParams>::value, "a kernel parameter");
static_assert(sizeof(RingKernelParams) <= 4000, "kernel parameters are limited to 4 KiB");

namespace dev {

// ---- loads and stores of 1..16-byte units ------------------------------------------------------

template <int Bytes> struct RawWord;
template <> struct RawWord<1> { using type = unsigned char; };
template <> struct RawWord<2> { using type = unsigned short; };
template <> struct RawWord<4> { using type = unsigned int; };
template <> struct RawWord<8> { using type = unsigned long long; };
template <> struct RawWord<16> { using type = uint4; };

// N elements moved as one unit: N = 1 (any alignment) or 16 bytes' worth (16-byte aligned).
template <typename T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};

template <typename P>
__device__ __forceinline__ P loadPlain(const P* p) {
  using R = typename RawWord<sizeof(P)>::type;
  R r = *reinterpret_cast<const R*>(p);
  P out;
  memcpy(&out, &r, sizeof(P));
  return out;
}

// For slot memory that another GPU or process wrote: ld.global.cv fetches it again from
// memory instead of trusting an L1 line left from this slot's previous use.
template <typename P>
__device__ __forceinline__ P loadFresh(const P* p) {
  using R = typename RawWord<sizeof(P)>::type;
  R r = __ldcv(reinterpret_cast<const R*>(p));
  P out;
  memcpy(&out, &r, sizeof(P));
  return out;
}

template <typename P>
__device__ __forceinline__ void storePlain(P* p, const P& v) {
  using R = typename RawWord<sizeof(P)>::type;
  R r;
  memcpy(&r, &v, sizeof(P));
  *reinterpret_cast<R*>(p) = r;
}

// ---- per-element arithmetic: the CPU functors of reduce_ops.h, applied to registers -------------

template <DType D, RedOp Op>
struct ElementOps {
  using T = typename StorageOf<D>::type;
  // This rank's contribution: PREMUL_SUM scales it exactly as the CPU path's scaled copy does
  // (scaleRange, one element), at the one place each local element is read.
  __device__ __forceinline__ static T local(T x, double factor) {
    if (Op == RedOp::PreMulSum) {
      T scaled;
      scaleRange<D>(&scaled, &x, factor, 0, 1);
      return scaled;
    }
    return x;
  }
  // incoming (op) local: the operand order of the CPU executor's combine(dst, in, src).
  __device__ __forceinline__ static T combine(T incoming, T mine) {
    return Combine<D, Op>::apply(incoming, mine);
  }
  // AVG divides a chunk once, when it becomes final (divideRange, one element).
  __device__ __forceinline__ static T finalize(T v, int64_t divisor) {
    if (Op == RedOp::Avg) divideRange<D>(&v, divisor, 0, 1);
    return v;
  }
};

// Applies one primitive to `units` units of N elements. src/dst: this rank's input/output at
// the step's offsets; in: my slot's payload; out: the next rank's slot payload (peer memory).
template <DType D, RedOp Op, int N>
__device__ __forceinline__ void movePrim(Prim prim, const void* srcV, void* dstV, const void* inV,
                                         void* outV, int64_t units, double factor,
                                         int64_t divisor) {
  using T = typename StorageOf<D>::type;
  using P = Pack<T, N>;
  using E = ElementOps<D, Op>;
  const P* src = static_cast<const P*>(srcV);
  P* dst = static_cast<P*>(dstV);
  const P* in = static_cast<const P*>(inV);
  P* out = static_cast<P*>(outV);
  const int64_t first = threadIdx.x, stride = blockDim.x;
  switch (prim) {
    case Prim::Send:
      for (int64_t u = first; u < units; u += stride) {
        P x = loadPlain(src + u);
#pragma unroll
        for (int k = 0; k < N; ++k) x.v[k] = E::local(x.v[k], factor);
        storePlain(out + u, x);
      }
      break;
    case Prim::RecvReduceSend:
      for (int64_t u = first; u < units; u += stride) {
        P a = loadFresh(in + u);
        P b = loadPlain(src + u);
#pragma unroll
        for (int k = 0; k < N; ++k) a.v[k] = E::combine(a.v[k], E::local(b.v[k], factor));
        storePlain(out + u, a);
      }
      break;
    case Prim::RecvReduceCopySend:
    case Prim::RecvReduceCopy: {
      const bool forward = prim == Prim::RecvReduceCopySend;
      for (int64_t u = first; u < units; u += stride) {
        P a = loadFresh(in + u);
        P b = loadPlain(src + u);
#pragma unroll
        for (int k = 0; k < N; ++k) {
          a.v[k] = E::finalize(E::combine(a.v[k], E::local(b.v[k], factor)), divisor);
        }
        storePlain(dst + u, a);
        // The final value is sent exactly as stored: every rank receives the same bits.
        if (forward) storePlain(out + u, a);
      }
      break;
    }
    case Prim::RecvCopySend:
      for (int64_t u = first; u < units; u += stride) {
        P a = loadFresh(in + u);
        storePlain(dst + u, a);
        storePlain(out + u, a);
      }
      break;
    case Prim::Recv:
      for (int64_t u = first; u < units; u += stride) storePlain(dst + u, loadFresh(in + u));
      break;
    case Prim::Copy:
      // All-gather's own block: a plain copy (not a contribution, never scaled). An input that
      // is a view of its own output block has nothing to move.
      if (srcV != dstV) {
        for (int64_t u = first; u < units; u += stride) storePlain(dst + u, loadPlain(src + u));
      }
      break;
  }
}

// The misalignment modulo 16 that every non-null pointer of a step shares, or -1 if they differ.
__device__ __forceinline__ int64_t sharedMisalignment(const void* a, const void* b, const void* c,
                                                      const void* d) {
  const void* ptrs[4] = {a, b, c, d};
  int64_t m = -1;
  for (int i = 0; i < 4; ++i) {
    if (ptrs[i] == nullptr) continue;
    const int64_t mi = static_cast<int64_t>(reinterpret_cast<uintptr_t>(ptrs[i]) & 15u);
    if (m < 0) {
      m = mi;
    } else if (mi != m) {
      return -1;
    }
  }
  return m < 0 ? 0 : m;
}

// Moves one step's elements: a head of single elements up to the next 16-byte boundary, a body
// of 16-byte units, a tail of single elements.
// Why the head: a ring chunk starts wherever the partition puts it (1000 floats over 3 ranks:
// element 334, byte 1336 = 8 mod 16), and each message sits in its slot at the address mod 16
// of its data (fifoMessageShift; the header tells the receiver), so when the ranks' buffers
// share one alignment (16-byte aligned, or all offset alike, as a view at the same element on
// every rank) every pointer of a step shares one misalignment and only the head and tail go
// element by element. Pointers that still disagree mod 16 (an input and output offset
// differently, an all-gather block whose size is not a multiple of 16 bytes copied from the
// input) move every element singly. The choice is the same for every thread of the block.
template <DType D, RedOp Op>
__device__ __forceinline__ void moveStep(Prim prim, const char* src, char* dst, const char* in,
                                         char* out, int64_t count, double factor,
                                         int64_t divisor) {
  using T = typename StorageOf<D>::type;
  constexpr int64_t kEsize = static_cast<int64_t>(sizeof(T));
  constexpr int kVec = static_cast<int>(16 / kEsize);
  const int64_t mis = sharedMisalignment(src, dst, in, out);
  int64_t head = count;
  if (mis >= 0 && ((16 - mis) & 15) % kEsize == 0) {
    head = ((16 - mis) & 15) / kEsize;
    if (head > count) head = count;
  }
  movePrim<D, Op, 1>(prim, src, dst, in, out, head, factor, divisor);
  if (head == count) return;
  const int64_t units = (count - head) / kVec;
#if defined(RING_HOST_KERNELS)
  // Counted once per block (thread 0), so tests can see which steps took 16-byte units.
  if (threadIdx.x == 0) hostshim::vectorUnits.fetch_add(static_cast<uint64_t>(units));
#endif
  int64_t off = head * kEsize;
  movePrim<D, Op, kVec>(prim, src ? src + off : src, dst ? dst + off : dst, in ? in + off : in,
                        out ? out + off : out, units, factor, divisor);
  const int64_t done = head + units * kVec;
  if (done < count) {
    off = done * kEsize;
    movePrim<D, Op, 1>(prim, src ? src + off : src, dst ? dst + off : dst, in ? in + off : in,
                       out ? out + off : out, count - done, factor, divisor);
  }
}

// ---- headers -------------------------------------------------------------------------------------

__device__ __forceinline__ MessageHeader loadHeaderFresh(const MessageHeader* h) {
  static_assert(sizeof(MessageHeader) == 64, "four 16-byte words");
  uint4 w[4];
  const uint4* p = reinterpret_cast<const uint4*>(h);
#pragma unroll
  for (int i = 0; i < 4; ++i) w[i] = __ldcv(p + i);
  MessageHeader out;
  memcpy(&out, w, sizeof out);
  return out;
}

__device__ __forceinline__ void storeHeader(MessageHeader* dst, const MessageHeader& h) {
  uint4 w[4];
  memcpy(w, &h, sizeof h);
  uint4* p = reinterpret_cast<uint4*>(dst);
#pragma unroll
  for (int i = 0; i < 4; ++i) p[i] = w[i];
}

__device__ __forceinline__ bool sameFingerprint(const Fingerprint& a, const Fingerprint& b) {
  return a.seq == b.seq && a.count == b.count && a.root == b.root &&
         a.collective == b.collective && a.dtype == b.dtype && a.op == b.op &&
         a.algorithm == b.algorithm;
}

// ---- stopping ------------------------------------------------------------------------------------

// Thread 0 of a block that must stop: the first such block of this rank (ever: a stopped
// kernel leaves the counters out of step, so the communicator is finished) fills the
// host-mapped record; every stopping block then raises the abort word so that the other blocks
// leave their waits too.
inline __device__ __noinline__ void recordStop(const RingKernelParams& p, DeviceStatus status,
                                        DeviceWait wait, int channel, int peer, int64_t step,
                                        int64_t bytes, uint64_t seen, uint64_t target,
                                        const MessageHeader* got) {
  unsigned int* claim = reinterpret_cast<unsigned int*>(p.peers.ownInbox + fifoClaimOffset());
  // Device-scope CAS on device memory: only blocks of this rank's kernels contend for it.
  if (atomicCAS(claim, 0u, 1u) == 0u) {
    DeviceErrorRecord r;
    memset(&r, 0, sizeof r);
    r.status = kDeviceOk;  // the real status is stored last, below
    r.wait = wait;
    r.channel = channel;
    r.peer = peer;
    r.expectedStep = step;
    r.expectedBytes = bytes;
    r.counterSeen = seen;
    r.counterTarget = target;
    r.expected = p.fp;
    if (got != nullptr) r.got = *got;
    DeviceErrorRecord* dst = &p.peers.control->record;
    const int32_t* words = reinterpret_cast<const int32_t*>(&r);
    int32_t* out = reinterpret_cast<int32_t*>(dst);
    for (size_t i = 1; i < sizeof r / sizeof(int32_t); ++i) storeRelaxedSys(out + i, words[i]);
    // Release: the record's fields above reach host memory before its status does, so a host
    // that reads a non-zero status (with acquire) reads a whole record.
    storeReleaseSys(&dst->status, static_cast<int32_t>(status));
  }
  storeRelaxedSys(&p.peers.control->abort, 1);
  // Push the abort word out now rather than whenever the write buffer drains.
  __threadfence_system();
}

}  // namespace dev

template <DType D, RedOp Op>
__global__ void __launch_bounds__(kRingThreads) ringKernel(const __grid_constant__ RingKernelParams p) {
  using T = typename StorageOf<D>::type;
  const int c = blockIdx.x;
  const FifoGeometry g = p.peers.geometry;
  const int n = p.peers.nranks;
  const int me = p.peers.rank;
  const int prev = ringPrev(me, n);
  const int64_t esize = static_cast<int64_t>(sizeof(T));
  const dev::WaitBounds bounds{&p.peers.control->abort, p.limits.spinLimitNs};
  // Read once per thread, before any step: a device-resident factor was written on the
  // caller's stream, which the comm stream waited for before this launch.
  const double factor = Op == RedOp::PreMulSum ? scaleFactorValue<D>(p.factor) : 1.0;

  char* own = p.peers.ownInbox;
  char* next = p.peers.nextInbox;
  const uint64_t* ownPublished = reinterpret_cast<const uint64_t*>(own + fifoPublishedOffset(g, c));
  const uint64_t* ownConsumed = reinterpret_cast<const uint64_t*>(own + fifoConsumedOffset(g, c));
  uint64_t* nextPublished = reinterpret_cast<uint64_t*>(next + fifoPublishedOffset(g, c));
  uint64_t* prevConsumed = reinterpret_cast<uint64_t*>(p.peers.prevInbox + fifoConsumedOffset(g, c));

  WalkShape w;
  w.kind = p.kind;
  w.nranks = n;
  w.rank = me;
  w.root = p.root;
  w.count = p.count;
  w.channels = static_cast<int>(gridDim.x);
  w.channel = c;
  w.sliceElems = p.sliceElems;

  // Running counts of this channel, identical in every thread (uniform control flow).
  uint64_t sent = p.start.sent[c];
  uint64_t received = p.start.received[c];
  int64_t sendIndex = 0, recvIndex = 0;  // message index within this collective (header.step)

  int aborted = 0;
  if (threadIdx.x == 0) {
    // A kernel queued behind an abort must not start exchanging: the counters are out of step.
    if (dev::loadRelaxedSys(&p.peers.control->abort) != 0) {
      dev::recordStop(p, kDeviceAborted, kWaitNone, c, -1, 0, 0, 0, 0, nullptr);
      aborted = 1;
    }
  }
  // Thread 0's verdict reaches the whole block through the barrier's OR.
  if (__syncthreads_or(aborted)) return;

  const int64_t length = walkLength(w);
  for (int64_t k = 0; k < length; ++k) {
    const Step s = walkStep(w, k);
    const bool receives = primReceives(s.prim);
    const bool sends = primSends(s.prim);
    const int64_t bytes = s.count * esize;
    const int inSlot = fifoSlotOf(received, g.slots);
    const int outSlot = fifoSlotOf(sent, g.slots);

    // ---- 1. thread 0 waits for the message and for room at the next rank ----
    int status = kDeviceOk;
    if (threadIdx.x == 0) {
      if (receives) {
        dev::WaitResult r = dev::waitAtLeast(ownPublished, received + 1, bounds);
        if (r.status != kDeviceOk) {
          dev::recordStop(p, r.status, kWaitMessage, c, prev, recvIndex, bytes, r.seen,
                          received + 1, nullptr);
          status = r.status;
        } else {
          // Read after the acquire above: the sender wrote the header before its release.
          const MessageHeader h = dev::loadHeaderFresh(
              reinterpret_cast<const MessageHeader*>(own + fifoHeaderOffset(g, c, inSlot)));
          if (h.magic != kMessageMagic || !dev::sameFingerprint(h.fingerprint, p.fp) ||
              h.sender != prev || h.step != recvIndex || h.payloadBytes != bytes ||
              h.slotShift >= kFifoMessageSlack) {
            dev::recordStop(p, kDeviceMismatch, kWaitMessage, c, prev, recvIndex, bytes, r.seen,
                            received + 1, &h);
            status = kDeviceMismatch;
          }
        }
      }
      if (status == kDeviceOk && sends && sent + 1 > static_cast<uint64_t>(g.slots)) {
        // Slot (sent % slots) is free once the next rank consumed message sent - slots.
        const uint64_t target = sent + 1 - static_cast<uint64_t>(g.slots);
        dev::WaitResult r = dev::waitAtLeast(ownConsumed, target, bounds);
        if (r.status != kDeviceOk) {
          dev::recordStop(p, r.status, kWaitSlot, c, ringNext(me, n), sendIndex, bytes, r.seen,
                          target, nullptr);
          status = r.status;
        }
      }
    }
    // Hands thread 0's verdict to the block and, with thread 0's acquire before it, orders
    // every thread's reads of the slot after the sender's writes.
    if (__syncthreads_or(status != kDeviceOk)) return;

    // ---- 2. the whole block moves the data ----
    // Only the pointers the primitive uses (the others are null): they decide the alignment.
    const bool readsLocal = s.prim != Prim::RecvCopySend && s.prim != Prim::Recv;
    const bool writesLocal = s.prim != Prim::Send && s.prim != Prim::RecvReduceSend;
    const char* src = readsLocal ? static_cast<const char*>(p.input) + s.src * esize : nullptr;
    char* dst = writesLocal ? static_cast<char*>(p.output) + s.dst * esize : nullptr;
    // A message I send sits at the address mod 16 of its data in my buffer (the input for
    // reduce-scatter, else the output: walkDataPosition); one I receive where its sender put
    // it, as its header says (thread 0 checked the header before the barrier above, and the
    // slot is not rewritten before this step publishes `consumed`).
    const int64_t outShift =
        sends ? fifoMessageShift(
                    (p.kind == Collective::ReduceScatter ? static_cast<const char*>(p.input)
                                                         : static_cast<const char*>(p.output)) +
                    walkDataPosition(w, s) * esize)
              : 0;
    const int64_t inShift =
        receives ? static_cast<int64_t>(dev::loadFresh(&reinterpret_cast<const MessageHeader*>(
                                                            own + fifoHeaderOffset(g, c, inSlot))
                                                            ->slotShift))
                 : 0;
    const char* in = receives ? own + fifoPayloadOffset(g, c, inSlot) + inShift : nullptr;
    char* out = sends ? next + fifoPayloadOffset(g, c, outSlot) + outShift : nullptr;
    dev::moveStep<D, Op>(s.prim, src, dst, in, out, s.count, factor, p.divisor);

    // ---- 3. header, fence, barrier ----
    if (sends) {
      if (threadIdx.x == 0) {
        MessageHeader h;
        memset(&h, 0, sizeof h);
        h.magic = kMessageMagic;
        h.sender = me;
        h.step = sendIndex;
        h.payloadBytes = bytes;
        h.fingerprint = p.fp;
        h.slotShift = static_cast<uint8_t>(outShift);
        dev::storeHeader(reinterpret_cast<MessageHeader*>(next + fifoHeaderOffset(g, c, outSlot)),
                         h);
      }
    }
    // Every thread has finished reading my slot and writing next's slot: the barrier orders
    // all of the block's payload stores (and thread 0's header) before what thread 0 does next.
    __syncthreads();

    // ---- 4. publish ----
    if (threadIdx.x == 0) {
      if (sends) {
        // One system-scope fence for the whole block: fences are cumulative, so the block's
        // stores ordered before it by the barrier reach the next rank's memory before the
        // counter below (what NCCL's one-thread fence after its barrier relies on too). A
        // fence in every thread would cost a system-wide fence per thread per step.
        __threadfence_system();
        // Release: the payload and header written above are visible to the next rank before
        // it can observe the new count.
        dev::storeReleaseSys(nextPublished, sent + 1);
      }
      // Release: all reads of my slot are complete (their values were stored before the
      // barrier) before the previous rank may overwrite it.
      if (receives) dev::storeReleaseSys(prevConsumed, received + 1);
    }
    if (sends) {
      ++sent;
      ++sendIndex;
    }
    if (receives) {
      ++received;
      ++recvIndex;
    }
  }

  // ---- drain: the next rank has consumed every message of this channel ----
  // After this, nobody writes into this rank's inbox for this collective: the previous rank's
  // messages were all received above, and the next rank's last `consumed` store has landed.
  if (threadIdx.x == 0 && sendIndex > 0) {
    dev::WaitResult r = dev::waitAtLeast(ownConsumed, sent, bounds);
    if (r.status != kDeviceOk) {
      dev::recordStop(p, r.status, kWaitDrain, c, ringNext(me, n), sendIndex, 0, r.seen, sent,
                      nullptr);
    }
  }
}

// Launches ringKernel<D, op> with gridDim.x = channels. Defined here, instantiated for each
// dtype in the ring_kernels_*.cu files (a link error names any dtype left out).
template <DType D>
cudaError_t launchRingKernelFor(RedOp op, const RingKernelParams& p, cudaStream_t stream) {
  void* args[] = {const_cast<RingKernelParams*>(&p)};
  const dim3 grid(static_cast<unsigned>(p.peers.geometry.channels));
  const dim3 block(kRingThreads);
  switch (op) {
#define RING_LAUNCH_OP(OP)                                                      \
  case RedOp::OP:                                                               \
    return launchKernel(&ringKernel<D, RedOp::OP>, grid, block, args, stream);
    RING_FOR_EACH_OP(RING_LAUNCH_OP)
#undef RING_LAUNCH_OP
    default:
      return cudaErrorInvalidValue;
  }
}

// Asks the runtime about every op's instantiation for dtype D, which also loads it now (see
// prepareRingKernels): the largest per-thread stack, and the fewest blocks one SM holds at once.
template <DType D>
cudaError_t inspectRingKernelsFor(RingKernelFootprint* f) {
  cudaFuncAttributes attr;
  int blocks = 0;
  cudaError_t e = cudaSuccess;
// The runtime's C entries name a kernel by its address (CUDA's typed wrappers of them exist for
// nvcc only, and a host build may compile against CUDA's headers).
#define RING_INSPECT_OP(OP)                                                                   \
  e = cudaFuncGetAttributes(&attr, reinterpret_cast<const void*>(&ringKernel<D, RedOp::OP>)); \
  if (e != cudaSuccess) return e;                                                             \
  if (attr.localSizeBytes > f->maxLocalBytes) f->maxLocalBytes = attr.localSizeBytes;         \
  e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(                                         \
      &blocks, reinterpret_cast<const void*>(&ringKernel<D, RedOp::OP>), kRingThreads, 0);    \
  if (e != cudaSuccess) return e;                                                             \
  if (f->minBlocksPerSm < 0 || blocks < f->minBlocksPerSm) f->minBlocksPerSm = blocks;
  RING_FOR_EACH_OP(RING_INSPECT_OP)
#undef RING_INSPECT_OP
  return cudaSuccess;
}

#define RING_INSTANTIATE_RING_KERNELS(TYPE)                                             \
  template cudaError_t launchRingKernelFor<DType::TYPE>(RedOp, const RingKernelParams&, \
                                                        cudaStream_t);                  \
  template cudaError_t inspectRingKernelsFor<DType::TYPE>(RingKernelFootprint*);

// The one dispatch over every dtype (ring_kernels.cu).
cudaError_t launchRingKernel(DType dtype, RedOp op, const RingKernelParams& p,
                             cudaStream_t stream);
// Every instantiation of every dtype (ring_kernels.cu).
cudaError_t inspectRingKernels(RingKernelFootprint* f);

}  // namespace ring
