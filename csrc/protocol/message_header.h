// The wire protocol shared by every path: the header every message carries (who sent it, and
// for which collective) and the receiver's check of it. The bottom layer after common/: the CPU
// executor, the TCP wire format and the CUDA kernels all build on it.
//
// Why: ranks that disagree (a different collective, size, dtype, op or root, or the same calls
// in another order) would otherwise hang or reduce garbage. The receiver compares the header
// with what it expects for its own current collective and turns any difference into an error
// naming both sides. The check costs one 64-byte compare per slice.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "common/types.h"
#include "protocol/algorithms.h"

namespace ring {

constexpr uint32_t kMessageMagic = 0x52494e47u;  // "RING"

struct Fingerprint {
  uint64_t seq = 0;         // collective sequence number in the group (p2p: per-pair count)
  int64_t count = 0;        // elements of the collective as the sender sees it
  int32_t root = -1;        // root rank, or the tag for send/recv, or -1
  Collective collective = Collective::AllReduce;
  DType dtype = DType::UInt8;
  RedOp op = RedOp::Sum;
  // Every rank must choose the same plan (algorithms.h): ranks configured differently get a
  // mismatch error naming both, not a hang.
  Algorithm algorithm = Algorithm::Ring;

  bool operator==(const Fingerprint& o) const {
    return seq == o.seq && count == o.count && root == o.root && collective == o.collective &&
           dtype == o.dtype && op == o.op && algorithm == o.algorithm;
  }
  bool operator!=(const Fingerprint& o) const { return !(*this == o); }
};

// The fingerprint of one collective, as every sender stamps it and every receiver expects it.
inline Fingerprint makeFingerprint(Collective k, uint64_t seq, int64_t count, DType t, RedOp op,
                                   int root) {
  Fingerprint f;
  f.seq = seq;
  f.count = count;
  f.root = root;
  f.collective = k;
  f.dtype = t;
  f.op = op;
  return f;
}

// The fingerprint of every slot of one point-to-point message, as its sender stamps it and its
// receiver expects it: its index among the messages from that sender, its size in bytes, and
// its tag (in the root field).
inline Fingerprint pointToPointFingerprint(uint64_t seq, int64_t bytes, int tag) {
  return makeFingerprint(Collective::PointToPoint, seq, bytes, DType::UInt8, RedOp::Sum, tag);
}

// "all_reduce of 1000 float32 (op SUM), sequence 17", then the algorithm's description
// (algorithms.h: ", direct", ", two-level ring", ...)
std::string describe(const Fingerprint& f);

struct MessageHeader {
  uint32_t magic;
  int32_t sender;          // group rank of the sender
  int64_t step;            // index of this message within the collective on this link
  int64_t payloadBytes;    // bytes following the header in this slot
  Fingerprint fingerprint;
  uint8_t pad[64 - 24 - sizeof(Fingerprint) - 2];
  // 1: a lent message (transport/link.h, SendLink::lendsFrom): the payload is the address of the
  // data in the sender's memory, which the receiver reads itself; payloadBytes is the data's
  // size. CPU ring steps only; 0 elsewhere.
  uint8_t lent;
  // CUDA ring kernels only (0 elsewhere): how many bytes past its slot's start the payload
  // begins, 0..15, chosen by the sender from its data's address (ring_kernels.cuh). After the
  // padding because the CPU mailbox carries a header only up to `pad` (shm_mailbox.cc).
  uint8_t slotShift;
};
static_assert(sizeof(MessageHeader) == 64, "one cache line per header");
static_assert(std::is_trivially_copyable<MessageHeader>::value,
              "headers are copied between processes as bytes");

// The header of message `step` (payload `bytes`) of the collective `fp`, sent by `sender`.
inline MessageHeader makeHeader(int sender, int64_t step, int64_t bytes, const Fingerprint& fp) {
  MessageHeader h{};
  h.magic = kMessageMagic;
  h.sender = sender;
  h.step = step;
  h.payloadBytes = bytes;
  h.fingerprint = fp;
  return h;
}

// The receiver's check of a header against its own collective: the right magic, the same
// fingerprint, the expected sender, message index and size. On any difference throws CommError
// naming both sides (the CPU executor, the p2p engine, and the words for a CUDA kernel's
// mismatch record all come here, so every path says the same thing).
//
// Inline: every message of every collective passes here, and a match is a few comparisons; the
// words of a mismatch are built out of line (refuseHeader).
[[noreturn]] void refuseHeader(const MessageHeader& h, int myRank, int expectedSender,
                               int64_t expectedStep, int64_t expectedBytes,
                               const Fingerprint& expected);
inline void verifyHeader(const MessageHeader& h, int myRank, int expectedSender,
                         int64_t expectedStep, int64_t expectedBytes, const Fingerprint& expected) {
  if (h.magic == kMessageMagic && h.fingerprint == expected && h.sender == expectedSender &&
      h.step == expectedStep && h.payloadBytes == expectedBytes) {
    return;
  }
  refuseHeader(h, myRank, expectedSender, expectedStep, expectedBytes, expected);
}

}  // namespace ring
