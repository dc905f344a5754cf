// One collective's messages on one link, with their headers: what every algorithm of the host
// path sends and receives through.
//
// Why here and not at each call site: every message of a collective carries who sent it, its
// number among that collective's messages on this link, its size and the collective's
// fingerprint, and the receiver checks all four (protocol/message_header.h). When each
// algorithm stamped and checked headers itself, each kept its own step counter, and a plan
// that forgot a check or counted differently agreed with itself. Here the counters live with
// the link, so the ring steps, the direct round, the two-level plans, all_to_all and the
// recursive rounds all number and check messages the same way.
//
//   sender:   acquire -> fill payload (copyIn) -> publish(bytes)      (stamps message `step`, then ++)
//   receiver: receive(bytes) -> read payload -> release      (checks message `step`, then ++)
//
// A lent message (SendLink::lendsFrom) is stamped the same way and flagged: its payload is the
// data's address in the sender's memory. Only the ring steps lend and accept one
// (receiveMaybeLent); every other receive refuses it, naming the sender.
#pragma once

#include <cstdint>
#include <cstring>

#include "protocol/message_header.h"
#include "transport/link.h"
#include "transport/streaming_copy.h"

namespace ring {

class StampedSender {
 public:
  // `firstStep`: the number of this collective's first message on the link (0 unless the
  // collective numbers its rounds itself, as the direct round does).
  StampedSender(SendLink& link, int me, const Fingerprint& fp, int64_t firstStep = 0)
      : link_(link), me_(me), step_(firstStep), fp_(fp), streams_(link.streamsCopies()),
        lendsFrom_(link.lendsFrom()) {}

  int64_t capacity() const { return link_.capacity(); }
  // Waits (bounded by ctx) for a free slot; its payload is the caller's to fill.
  void* acquire(const WaitContext& ctx) {
    slot_ = link_.acquire(ctx);
    return slot_.payload;
  }
  // Copies `bytes` into the acquired slot's payload: streamed where the link says so
  // (streaming_copy.h; its fence orders the bytes before publish's stores).
  void copyIn(void* payload, const void* from, int64_t bytes) const {
    if (streams_) {
      copyForPeer(payload, from, static_cast<size_t>(bytes));
    } else if (bytes > 0) {
      std::memcpy(payload, from, static_cast<size_t>(bytes));
    }
  }
  // Stamps the acquired slot as the next message, `bytes` long, and hands it to the receiver.
  void publish(int64_t bytes) {
    *slot_.header = makeHeader(me_, step_++, bytes, fp_);
    link_.publish();
  }

  // Whether a message of `bytes` may go lent on this link (SendLink::lendsFrom).
  bool lends(int64_t bytes) const { return lendsFrom_ >= 0 && bytes >= lendsFrom_; }
  // Publishes the acquired slot as the next message, lent: `bytes` at `data`, which must stay
  // unchanged until waitLentRead has returned.
  void publishLent(const void* data, int64_t bytes) {
    RING_ASSERT(link_.capacity() >= static_cast<int64_t>(sizeof(uint64_t)), "a lent message's "
                "address needs 8 bytes of slot, the link has ", link_.capacity());
    const uint64_t address = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(data));
    std::memcpy(slot_.payload, &address, sizeof address);
    MessageHeader h = makeHeader(me_, step_++, bytes, fp_);
    h.lent = 1;
    *slot_.header = h;
    lent_ = true;
    link_.publish();
  }
  // Waits (bounded by ctx) until the receiver has read everything this sender lent it; at once
  // where it lent nothing.
  void waitLentRead(const WaitContext& ctx) {
    if (lent_) link_.waitAllReleased(ctx);
    lent_ = false;
  }
  // Whether something was lent since the last waitLentRead (the receiver may still read it).
  bool lentUnread() const { return lent_; }

 private:
  SendLink& link_;
  const int me_;
  int64_t step_;
  const Fingerprint fp_;
  const bool streams_;  // the link's streamsCopies(), asked once per collective
  const int64_t lendsFrom_;  // the link's lendsFrom(), asked once per collective
  bool lent_ = false;        // a message was lent since the last waitLentRead
  OutSlot slot_{nullptr, nullptr};
};

class CheckedReceiver {
 public:
  CheckedReceiver(RecvLink& link, int me, const Fingerprint& fp, int64_t firstStep = 0)
      : link_(link), me_(me), peer_(link.peer()), step_(firstStep), fp_(fp) {}

  // Waits (bounded by ctx) for the next message and checks its header: the link's peer sent
  // it, it is message `step` of this collective, `bytes` long. Throws CommError naming both
  // sides on any difference. The header is read after the acquire inside receive(): the
  // sender wrote it before its publish.
  const void* receive(const WaitContext& ctx, int64_t bytes) {
    bool lent = false;
    const void* payload = receiveMaybeLent(ctx, bytes, &lent);
    if (lent) refuseLent(ctx, bytes);
    return payload;
  }
  // The same where a lent message is welcome (the ring's copying steps): *lent says whether it
  // is one; then its data is read with readLent.
  const void* receiveMaybeLent(const WaitContext& ctx, int64_t bytes, bool* lent) {
    const InSlot in = link_.receive(ctx);
    verifyHeader(*in.header, me_, peer_, step_++, bytes, fp_);
    *lent = in.header->lent != 0;
    return in.payload;
  }
  // Copies a lent message's `bytes` (payload: what receiveMaybeLent returned) into `dst`.
  void readLent(const void* payload, void* dst, int64_t bytes, const WaitContext& ctx) {
    uint64_t address = 0;
    std::memcpy(&address, payload, sizeof address);
    link_.readLent(address, dst, bytes, ctx);
  }
  // A lent message where the step reduces (or any other receive): the ranks run different
  // code, since a ring sender lends only what its receiver copies.
  [[noreturn]] void refuseLent(const WaitContext& ctx, int64_t bytes) const {
    throw CommError(strCat("ring: rank ", me_, " received a lent message of ", bytes,
                           " bytes from rank ", peer_, " (message ", step_ - 1,
                           ") where it takes only copied ones; in ",
                           ctx.describe ? ctx.describe() : std::string("a collective")));
  }
  // The same for a message of at most `bytes`, cut where its sender chose (its own capacity):
  // returns the payload and sets *got to its size. An empty message ends a transfer.
  const void* receiveAtMost(const WaitContext& ctx, int64_t bytes, int64_t* got) {
    const InSlot in = link_.receive(ctx);
    const int64_t sent = in.header->payloadBytes;
    // Checked as `sent` only when it fits; otherwise as `bytes`, so the error says so.
    verifyHeader(*in.header, me_, peer_, step_++, sent >= 0 && sent <= bytes ? sent : bytes, fp_);
    if (in.header->lent != 0) refuseLent(ctx, sent);
    *got = sent;
    return in.payload;
  }
  // Hands the message received last back to the sender.
  void release() { link_.release(); }

 private:
  RecvLink& link_;
  const int me_;
  const int peer_;
  int64_t step_;
  const Fingerprint fp_;
};

}  // namespace ring
