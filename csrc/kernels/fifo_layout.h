// Byte layout of one rank's device inbox: the FIFOs its ring predecessor writes into, and the
// counters both neighbours write. Pure arithmetic, compiled for host and device, so the host
// (allocation, tests) and the kernels agree on every offset by construction.
//
// Push model: rank r's kernel writes payload + header straight into rank r+1's inbox through
// a peer pointer and bumps r+1's `published` counter; r+1 polls that counter in its OWN
// memory (a local load, never a read across the link), and when it has consumed a slot it
// bumps `consumed`, which lives in rank r's inbox, for r to poll locally. So every poll is a
// local load and every write that crosses a link is a posted store.
//
//   offset 0                 control line: the kernel's error claim word (device-local)
//   line 1 + c               published[c]: messages rank r-1 has put into my FIFO of channel c
//   line 1 + C + c           consumed[c]:  messages of MY FIFO at rank r+1 that r+1 has consumed
//   headers                  [c][s]: 64-byte MessageHeader of slot s of channel c
//   payloads                 [c][s]: slotBytes of payload of slot s of channel c
//
// Counters are 64-bit and monotonic over the life of the communicator: message m of a channel
// always goes into slot m % slots, and a counter never returns to an earlier value, so a fast
// peer's next collective is never mistaken for the current one (no ABA).
#pragma once

#include <cstdint>

#include "common/hostdevice.h"

namespace ring {

// Upper bound on channels (CUDA blocks) per collective; sizes the per-channel start counters
// passed by value to each launch.
constexpr int kMaxCudaChannels = 32;
// One counter per 128-byte line: two counters written by different GPUs never share a line.
constexpr int64_t kFifoLineBytes = 128;
constexpr int64_t kFifoHeaderBytes = 64;
// Payload slots start on this boundary and their size is a multiple of it, so 16-byte vector
// accesses to a slot are always aligned.
constexpr int64_t kFifoPayloadAlign = 256;

struct FifoGeometry {
  int32_t channels;  // 1 .. kMaxCudaChannels
  int32_t slots;     // >= 2: a sender may run one message ahead without blocking (no deadlock)
  int64_t slotBytes; // payload bytes per slot, a multiple of kFifoPayloadAlign
};

RING_HOST_DEVICE int64_t fifoAlignUp(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

RING_HOST_DEVICE int64_t fifoClaimOffset() { return 0; }
RING_HOST_DEVICE int64_t fifoPublishedOffset(const FifoGeometry& g, int channel) {
  (void)g;
  return kFifoLineBytes * (1 + channel);
}
RING_HOST_DEVICE int64_t fifoConsumedOffset(const FifoGeometry& g, int channel) {
  return kFifoLineBytes * (1 + g.channels + channel);
}
RING_HOST_DEVICE int64_t fifoHeadersOffset(const FifoGeometry& g) {
  return fifoAlignUp(kFifoLineBytes * (1 + 2 * static_cast<int64_t>(g.channels)), kFifoPayloadAlign);
}
RING_HOST_DEVICE int fifoSlotOf(uint64_t message, int slots) {
  return static_cast<int>(message % static_cast<uint64_t>(slots));
}
RING_HOST_DEVICE int64_t fifoHeaderOffset(const FifoGeometry& g, int channel, int slot) {
  return fifoHeadersOffset(g) +
         (static_cast<int64_t>(channel) * g.slots + slot) * kFifoHeaderBytes;
}
RING_HOST_DEVICE int64_t fifoPayloadsOffset(const FifoGeometry& g) {
  return fifoAlignUp(fifoHeadersOffset(g) +
                         static_cast<int64_t>(g.channels) * g.slots * kFifoHeaderBytes,
                     kFifoPayloadAlign);
}
RING_HOST_DEVICE int64_t fifoPayloadOffset(const FifoGeometry& g, int channel, int slot) {
  return fifoPayloadsOffset(g) + (static_cast<int64_t>(channel) * g.slots + slot) * g.slotBytes;
}
// A message sits in its slot shifted by the address mod 16 of its data in the sender's buffer
// (0..15 bytes; the header carries it to the receiver), so that slot and buffer pointers share
// one alignment and the kernels can move 16-byte units after a short head (ring_kernels.cuh,
// moveStep), even when the user's tensor itself starts off a 16-byte boundary. A slot
// therefore carries at most slotBytes - kFifoMessageSlack payload bytes.
constexpr int64_t kFifoMessageSlack = 16;
RING_HOST_DEVICE int64_t fifoMessageShift(const void* data) {
  return static_cast<int64_t>(reinterpret_cast<uintptr_t>(data) & 15u);
}
RING_HOST_DEVICE int64_t fifoMessageCapacity(const FifoGeometry& g) {
  return g.slotBytes - kFifoMessageSlack;
}
// Bytes to allocate for one inbox.
RING_HOST_DEVICE int64_t fifoInboxBytes(const FifoGeometry& g) {
  return fifoPayloadsOffset(g) + static_cast<int64_t>(g.channels) * g.slots * g.slotBytes;
}
// Whether the geometry is one the kernels accept (the host checks before allocating).
RING_HOST_DEVICE bool fifoGeometryValid(const FifoGeometry& g) {
  return g.channels >= 1 && g.channels <= kMaxCudaChannels && g.slots >= 2 && g.slots <= 64 &&
         g.slotBytes >= kFifoPayloadAlign && g.slotBytes % kFifoPayloadAlign == 0 &&
         g.slotBytes <= (int64_t{64} << 20);
}

}  // namespace ring
