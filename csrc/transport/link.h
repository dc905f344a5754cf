// What an algorithm sees of the network: one-directional links to peers, each a FIFO of
// fixed-size message slots. A transport implements them: shared memory within a host (shm/),
// TCP between hosts (tcp/), or both at once, one per peer (mixed_transport.h); select.h decides
// which serves each link.
//
// Protocol of a link, for the sender:   acquire -> fill header + payload -> publish
//                     for the receiver: receive -> read header + payload -> release
// The collectives do not fill or read headers themselves: they go through stamped_link.h,
// which numbers, stamps and checks every message of a collective.
// Messages on a link are delivered in order; a slot's payload is at most capacity() bytes.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "common/errors.h"
#include "protocol/message_header.h"
#include "transport/wait.h"

namespace ring {

struct OutSlot {
  MessageHeader* header;
  void* payload;
};

struct InSlot {
  const MessageHeader* header;
  const void* payload;
};

// Links come in two independent channels so that point-to-point traffic (served by its own
// thread) never interleaves with the collective stream on the same FIFO.
enum class Channel : int { Collective = 0, PointToPoint = 1 };
constexpr int kChannels = 2;

// Special `peer` values of Transport::checkHealth.
constexpr int kHealthBetweenCalls = -1;
constexpr int kHealthGroupOnly = -2;

class SendLink {
 public:
  virtual ~SendLink() = default;
  virtual int peer() const = 0;
  virtual int64_t capacity() const = 0;
  // Waits (bounded by ctx) until a slot is free.
  virtual OutSlot acquire(const WaitContext& ctx) = 0;
  // Returns false at once if no slot is free.
  virtual bool tryAcquire(OutSlot* slot) = 0;
  // Makes the acquired slot visible to the receiver.
  virtual void publish() = 0;
  // Messages published on this link so far (read on the sending thread): where a plan sends.
  virtual uint64_t messagesSent() const = 0;
  // Whether a copy into this link's slots streams past this core's cache
  // (transport/streaming_copy.h): where the receiver reads the slots themselves from another
  // core (shared memory) and the group's transport streams (Transport::setStreamCopies).
  virtual bool streamsCopies() const { return false; }

  // Single-copy messages: the smallest message (bytes) that this link lends instead of copying,
  // or -1 where it never does. A lent message carries only where its data lies in the sender's
  // memory; the receiver copies the data from there itself (RecvLink::readLent), and releases
  // the slot once it has. So the data is copied once instead of twice (into a slot, out of it),
  // as Open MPI's shared-memory transport does with its large messages (smsc/cma).
  // The sender must leave lent data unchanged until the receiver has released it: see
  // waitAllReleased. Where the receiver cannot read this process's memory, -1.
  virtual int64_t lendsFrom() const { return -1; }
  // Waits (bounded by ctx) until the receiver has released every message published on this
  // link: after it, nothing this side lent is read any more.
  virtual void waitAllReleased(const WaitContext& ctx) { (void)ctx; }
};

class RecvLink {
 public:
  virtual ~RecvLink() = default;
  virtual int peer() const = 0;
  // Waits (bounded by ctx) for the next message.
  virtual InSlot receive(const WaitContext& ctx) = 0;
  // Returns false at once if no message is waiting.
  virtual bool tryReceive(InSlot* slot) = 0;
  // Hands the slot received last back to the sender.
  virtual void release() = 0;
  // Copies the data of a lent message (SendLink::lendsFrom): `bytes` from `address` in the
  // sender's memory into `dst`. Throws CommError naming the peer where the read fails.
  virtual void readLent(uint64_t address, void* dst, int64_t bytes, const WaitContext& ctx);
};

// One round of small messages among ranks that all share memory: every rank posts one message
// into a buffer of its own mailbox, and every peer reads it from there.
//
// Why: a small message through a FIFO makes a chain of dependent cache-line transfers between
// cores (the slot's credit, the payload, the `published` counter beside it, the receiver's
// release; measured in docs/notes/latency_cpu.md), and on a 2-core machine each transfer can
// cost as much as the copy. A mailbox message carries its flag in its own head line, published
// after the payload (a message of up to 8 bytes lies in that line too), and needs no credit handed
// back: each rank alternates between two buffers, and writes one again only two rounds later,
// when every peer has provably finished reading it (to finish the round in between, the writer
// read every peer's next message, which each peer posted after reading everything of the round
// before). So a peer's message can be read where it lies, without a copy.
//
// So every rank must take part in every round, posting once and then receiving from every
// peer, in the same order of rounds; a message is tagged with its round's number and carries
// its collective's fingerprint, and a reader checks both.
class Mailbox {
 public:
  virtual ~Mailbox() = default;
  // Largest message of a round, in bytes.
  virtual int64_t capacity() const = 0;
  // Posts this rank's message of the next round: `bytes` (<= capacity) from `data`, for the
  // collective `fp`. Never waits.
  virtual void post(const void* data, int64_t bytes, const Fingerprint& fp) = 0;
  // Waits (bounded by ctx) for `peer`'s message of the round this rank posted last, checks
  // that it is `bytes` for the collective `fp` (CommError naming both calls if not), and
  // returns where its bytes lie: readable until this rank posts its next round.
  virtual const void* receive(int peer, int64_t bytes, const Fingerprint& fp,
                              const WaitContext& ctx) = 0;
  // Whether `peer` has posted the round this rank posted last (or a later one): what receive
  // would find without waiting. Never waits, checks nothing else.
  virtual bool arrived(int peer) const = 0;
  // For a rank that waits on `peer` on another path (a FIFO) while running `fp`, between its
  // sleeps: throws CommError naming both calls once `peer` has been seen twice in a mailbox
  // round this rank has not reached, with nothing else changed: it has gone on without doing
  // what this rank waits for, and waits in that round for a post that does not come.
  virtual void checkPeerNotAhead(int peer, const Fingerprint& fp) const = 0;
};

// A link that lends nothing (TCP, a peer that cannot be read) is never lent anything either.
inline void RecvLink::readLent(uint64_t address, void* dst, int64_t bytes,
                               const WaitContext& ctx) {
  (void)address;
  (void)dst;
  throw CommError(strCat("ring: rank ", peer(), " lent a message of ", bytes,
                         " bytes on a link that cannot read its memory; in ",
                         ctx.describe ? ctx.describe() : std::string("a collective")));
}

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual SendLink& sendLink(Channel ch, int peer) = 0;
  virtual RecvLink& recvLink(Channel ch, int peer) = 0;
  // Throws CommError if the group is broken or aborted, or if a rank of the group died.
  // `peer`: the rank whose link the caller is waiting on; kHealthBetweenCalls before a
  // collective (every peer counts); kHealthGroupOnly while waiting on a link of another
  // transport of the same group (only the group-wide state counts).
  virtual void checkHealth(int peer) = 0;
  // Records the first failure of the group so that every rank's next wait raises it.
  virtual void markBroken(const std::string& reason) = 0;
  // Wakes every local waiter and makes waits raise (abort()).
  virtual void abortLocal(const std::string& reason) = 0;
  virtual std::string describeLink(int peer) const = 0;

  // Whether copies into memory another core reads next (slots, mailbox messages) stream past
  // the cache (transport/streaming_copy.h): the group's choice for the call it runs now
  // (executor/copy_choice.h), set before each prepared call on the thread that runs it. Either
  // way is correct; only the speed differs.
  virtual void setStreamCopies(bool on) { streamCopies_.store(on, std::memory_order_relaxed); }
  bool streamCopies() const { return streamCopies_.load(std::memory_order_relaxed); }

  // Whether every link of this rank is in shared memory: no thread of the transport moves the
  // data, so a waiter that spins takes CPU time only from the ranks themselves.
  virtual bool onlySharedMemory() const { return false; }

  // The mailbox rounds of small messages (Mailbox), where every rank of the group shares memory
  // and they are enabled (TORCH_RING_LL_BYTES); null otherwise.
  virtual Mailbox* mailbox() { return nullptr; }

  // Issue announcements: each rank counts the collectives it has issued on the group, so that
  // a rank can tell that every peer has issued one (then it may run it on the caller's thread:
  // backend/work_queue.h). A transport that cannot tell cheaply says announces() false, and
  // nobody asks it the rest.
  virtual bool announces() const { return false; }
  virtual void announceIssued(uint64_t count) { (void)count; }
  virtual bool allIssued(uint64_t count) const {
    (void)count;
    return false;
  }
  // How many collectives `peer` has issued on the group, into *count; false where announces()
  // is. What a report of a rank that went missing can say it was last doing.
  virtual bool issuedBy(int peer, uint64_t* count) const {
    (void)peer;
    (void)count;
    return false;
  }
  // When each rank issued collective `seq` (ns of one steady clock shared by all the ranks),
  // into (*ns)[rank]. False when that is not known: a rank has not issued it yet, it is older
  // than the transport keeps, or the ranks share no clock (other hosts).
  virtual bool issueTimes(uint64_t seq, std::vector<int64_t>* ns) const {
    (void)seq;
    (void)ns;
    return false;
  }

 private:
  std::atomic<bool> streamCopies_{true};
};

}  // namespace ring
