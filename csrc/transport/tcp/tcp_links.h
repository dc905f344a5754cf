// The two ends of a TCP link that the executor sees: FIFOs of slots in this process's own
// memory, with the same monotonic counters as the shared-memory FIFOs. The other end of each
// FIFO is the transport's I/O thread, which writes published send slots to the socket and reads
// frames from the socket into free receive slots.
//
//   send:  executor  acquire -> fill -> publish (published++)   I/O thread: write, written++
//          (publish writes the frame itself when nothing is queued on the socket: see
//          TcpTransport::tryWriteInline; the I/O thread takes over what it cannot finish)
//   recv:  I/O thread: read a whole frame, arrived++             executor: receive -> release
//          (receive reads data frames itself when they are waiting:      (consumed++)
//          TcpTransport::tryReadInline; control frames, errors and the end of the stream
//          stay with the I/O thread)
// A slot is [MessageHeader | payload of slotBytes], so a frame on the wire is one contiguous
// range of a slot: header and the payloadBytes after it.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "transport/link.h"

namespace ring {

class TcpTransport;

// How a link's connection ended, as seen by the I/O thread.
enum class LinkEnd : uint8_t { Open = 0, Goodbye = 1, Failed = 2 };

// State the I/O thread shares with one link's waiters about the connection under it.
struct LinkEndState {
  // Set (release) after every frame of the connection was published, so a waiter that sees it
  // (acquire) sees the link's final counter.
  std::atomic<LinkEnd> end{LinkEnd::Open};
  std::string reason;  // written once before `end` becomes Failed
};

// One wait on a link's counter, checked between sleeps (waitUntil's LinkCheck): it tells "the
// peer's connection ended and this wait can never be satisfied" from "it ended after sending
// all we wait for", so that a rank that exits right after its last collective fails nobody who
// still finishes.
struct TcpLinkWait {
  int myRank;
  const std::atomic<uint64_t>* word;
  uint64_t target;
  const LinkEndState* state;
  // Throws CommError if the connection under the link ended short of `target`.
  static void checkEnded(const void* self, int peer);
  LinkCheck asCheck() const { return LinkCheck{&TcpLinkWait::checkEnded, this}; }
};

// `slots` slots of 64 + slotBytes bytes in anonymous memory: pages that a link never uses
// (most point-to-point links) are never touched, so they cost no RAM.
class SlotRing {
 public:
  SlotRing(int slots, int64_t slotBytes);
  ~SlotRing();
  SlotRing(const SlotRing&) = delete;
  SlotRing& operator=(const SlotRing&) = delete;

  char* slot(uint64_t index) const {
    return base_ + (index % static_cast<uint64_t>(slots_)) * stride_;
  }
  int slots() const { return slots_; }
  int64_t slotBytes() const { return slotBytes_; }

 private:
  char* base_ = nullptr;
  size_t bytes_ = 0;
  size_t stride_;
  int slots_;
  int64_t slotBytes_;
};

class TcpSendLink : public SendLink {
 public:
  TcpSendLink(TcpTransport* owner, int rank, int peer, int channel, int slots, int64_t slotBytes)
      : owner_(owner), rank_(rank), peer_(peer), channel_(channel), ring_(slots, slotBytes) {}
  int peer() const override { return peer_; }
  int64_t capacity() const override { return ring_.slotBytes(); }
  OutSlot acquire(const WaitContext& ctx) override;
  bool tryAcquire(OutSlot* slot) override;
  void publish() override;
  uint64_t messagesSent() const override { return next_; }

  // ---- I/O thread side ----
  const SlotRing& ring() const { return ring_; }
  std::atomic<uint64_t> published{0};  // frames the executor handed over
  std::atomic<uint64_t> written{0};    // frames fully written to the socket (slot free again)
  std::atomic<uint32_t> writtenSleepers{0};    // executor threads asleep on `written`
  std::atomic<uint32_t> publishedSleepers{0};  // always 0: the I/O thread sleeps in epoll
  // Set by the I/O thread when it has written everything and stops watching this link;
  // a publish() that could not write its frame itself claims it back (exchange) and wakes the
  // I/O thread.
  std::atomic<bool> ioIdle{true};
  LinkEndState endState;

 private:
  OutSlot slotAt(uint64_t index) const;
  TcpTransport* owner_;
  int rank_;
  int peer_;
  int channel_;
  SlotRing ring_;
  uint64_t next_ = 0;  // executor side: frames published so far
};

class TcpRecvLink : public RecvLink {
 public:
  TcpRecvLink(TcpTransport* owner, int rank, int peer, int channel, int slots, int64_t slotBytes)
      : owner_(owner), rank_(rank), peer_(peer), channel_(channel), ring_(slots, slotBytes) {}
  int peer() const override { return peer_; }
  InSlot receive(const WaitContext& ctx) override;
  bool tryReceive(InSlot* slot) override;
  void release() override;

  // ---- I/O thread side ----
  const SlotRing& ring() const { return ring_; }
  std::atomic<uint64_t> arrived{0};   // whole frames read into slots
  std::atomic<uint64_t> consumed{0};  // frames released by the executor
  std::atomic<uint32_t> arrivedSleepers{0};   // executor threads asleep on `arrived`
  std::atomic<uint32_t> consumedSleepers{0};  // always 0: the I/O thread sleeps in epoll
  // Set by the I/O thread when every slot is full and it stops reading the socket (TCP's
  // window then holds the sender back); the next release() clears it and wakes the thread.
  std::atomic<bool> ioPaused{false};
  LinkEndState endState;

 private:
  InSlot slotAt(uint64_t index) const;
  TcpTransport* owner_;
  int rank_;
  int peer_;
  int channel_;
  SlotRing ring_;
  uint64_t received_ = 0;  // executor side: frames released so far
};

}  // namespace ring
