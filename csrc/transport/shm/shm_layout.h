// Memory layout of a rank's shared-memory inbox. Every rank maps every inbox; the inbox of rank
// d holds one FIFO per (channel, sender), none for d itself. Only plain, lock-free atomics and bytes live here:
// the memory is shared between processes.
#pragma once

#include <atomic>
#include <cstdint>

#include "protocol/message_header.h"

namespace ring {

constexpr uint64_t kSegmentMagic = 0x746f7263685f7267ull;  // "torch_rg"
constexpr uint32_t kLayoutVersion = 8;  // 3: SegmentHeader::issued; 4: issue times; 5: mailboxes;
                                        // 6: heartbeat; 7: no FIFO from the owner to itself;
                                        // 8: single-copy messages (probeAddress, readsSender)
// How many of the owner's latest collectives keep their issue time (SegmentHeader::issueTimes).
constexpr int kIssueHistory = 64;
constexpr size_t kReasonBytes = 1024;

static_assert(std::atomic<uint64_t>::is_always_lock_free, "counters are shared across processes");
static_assert(std::atomic<uint32_t>::is_always_lock_free, "flags are shared across processes");

// Group-wide failure record; only rank 0's copy is used. A rank that fails claims it (CAS
// 0 -> 1), writes the reason, then sets 2 with release so that readers that see 2 (acquire)
// also see the whole reason.
struct GroupControl {
  std::atomic<uint32_t> brokenState;
  int32_t brokenBy;
  char reason[kReasonBytes];
};

struct SegmentHeader {
  uint64_t magic;
  uint32_t version;
  int32_t nranks;
  int32_t owner;
  int32_t ownerPid;
  int64_t slotBytes;
  int32_t slots;
  // ShmGeometry::mailboxBytes (TORCH_RING_LL_BYTES): every rank must have the same.
  int64_t mailboxBytes;
  // 1 once the owner has shut the group down in order (its transport's destructor, not an
  // abort): its process may exit without that being a failure, and a wait for data it never
  // sent fails with that reason. Release-stored after the owner's last publish.
  std::atomic<int32_t> closedInOrder;
  // The owner's start time (field 22 of /proc/<pid>/stat): with the pid it identifies the
  // process even after its pid is reused.
  uint64_t ownerStartTime;
  // Where the owner's kPeerProbeValue lies in its own address space (peer_memory.h): the word a
  // peer reads at set-up to learn whether it may read the owner's memory.
  uint64_t probeAddress;
  GroupControl control;
  // Collectives the owner has issued on the group (Transport::announceIssued). Only a hint for
  // where to run the next one, never a guard on data: release/acquire keeps it monotonic as
  // seen by the peers, nothing more. Its own cache line: the owner writes it on every call.
  alignas(64) std::atomic<uint64_t> issued;
  // When the owner issued each of its last kIssueHistory collectives (steady clock, ns: one
  // clock for every process of the host), so that any rank can tell who the others waited for
  // (executor/straggler_stats.h). Entry seq % kIssueHistory; a seqlock per entry, because the
  // owner overwrites it 64 collectives later: `tag` is 0 while `ns` is being written, then
  // seq + 1.
  struct IssueTime {
    std::atomic<uint64_t> tag;
    std::atomic<int64_t> ns;
  };
  alignas(64) IssueTime issueTimes[kIssueHistory];
  // The owner process's heartbeat (heartbeat.h): advanced every 250 ms by a thread of its own
  // while the process runs. Peers only compare it with what they saw before. Its own line: it
  // changes while the group is idle.
  alignas(64) std::atomic<uint64_t> heartbeat;
};

// One FIFO's counters, each on its own cache line so that sender and receiver do not
// invalidate each other's line on every update.
struct FifoControl {
  alignas(64) std::atomic<uint64_t> published;  // messages made visible by the sender
  alignas(64) std::atomic<uint64_t> consumed;   // messages handed back by the receiver
  alignas(64) std::atomic<uint32_t> receiverSleepers;  // receivers asleep on `published`
  std::atomic<uint32_t> senderSleepers;                // senders asleep on `consumed`
  // 1: the receiver reads the sender's memory itself (peer_memory.h), so the sender may lend
  // it a message instead of copying it into a slot. Written by the receiver at set-up, before
  // it says it has mapped every inbox; read by the sender after every rank has said so.
  std::atomic<uint32_t> readsSender;
};

// The head of one mailbox buffer (transport/link.h, Mailbox; shm/shm_mailbox.h): seven words of
// the message's header (and, for a message of at most 8 bytes, the message itself) and, last,
// the tag: the number of rounds its owner had posted with this one (1 for the first), published
// after everything else of the message. Words, not bytes: a peer that looks for a mismatch
// (ShmMailbox::checkPeerNotAhead) reads a head without waiting for a round of its own, so
// every access is atomic (plain moves on x86-64).
struct alignas(64) MailboxHead {
  static constexpr int kWords = 7;
  std::atomic<uint64_t> word[kWords];
  std::atomic<uint64_t> tag;
};
static_assert(sizeof(MailboxHead) == 64, "a mailbox head is one cache line");

// The start of a rank's mailbox region; its two buffers follow.
struct MailboxControl {
  // Readers asleep on one of this mailbox's tags (the owner wakes them when it posts).
  alignas(64) std::atomic<uint32_t> sleepers;
};

struct ShmGeometry {
  int nranks;
  int64_t slotBytes;
  int slots;
  // Largest message of a mailbox round (TORCH_RING_LL_BYTES); 0: no mailbox.
  int64_t mailboxBytes = 0;
  // Smallest ring message lent instead of copied (TORCH_RING_SINGLE_COPY_BYTES;
  // transport/link.h, SendLink::lendsFrom); 0: none, and this rank reads no peer's memory.
  // Not part of the layout: each side of a link keeps its own.
  int64_t singleCopyBytes = 0;

  static constexpr size_t kHeaderBytes = 4096;
  size_t slotStride() const { return sizeof(MessageHeader) + static_cast<size_t>(slotBytes); }
  size_t fifoBytes() const {
    size_t raw = sizeof(FifoControl) + static_cast<size_t>(slots) * slotStride();
    return (raw + 4095) / 4096 * 4096;
  }
  // A mailbox buffer: its head, then room for the message, whole cache lines.
  size_t mailboxBufferBytes() const {
    return sizeof(MailboxHead) + (static_cast<size_t>(mailboxBytes) + 63) / 64 * 64;
  }
  size_t mailboxRegionBytes() const {
    if (mailboxBytes <= 0) return 0;
    return sizeof(MailboxControl) + 2 * mailboxBufferBytes();
  }
  // FIFOs per channel in one inbox: one per sender, the owner excepted.
  int sendersPerInbox() const { return nranks > 1 ? nranks - 1 : 0; }
  size_t mailboxOffset() const {
    return kHeaderBytes +
           static_cast<size_t>(kChannelsInLayout) * sendersPerInbox() * fifoBytes();
  }
  size_t segmentBytes() const { return mailboxOffset() + mailboxRegionBytes(); }
  // What every local rank's inbox takes together: the host's share of /dev/shm for the group.
  size_t hostBytes() const { return static_cast<size_t>(nranks) * segmentBytes(); }
  // The FIFO that `sender` (a local index) writes in the inbox of `owner` (another one).
  size_t fifoOffset(int channel, int sender, int owner) const {
    const int place = sender < owner ? sender : sender - 1;
    return kHeaderBytes +
           (static_cast<size_t>(channel) * sendersPerInbox() + place) * fifoBytes();
  }
  static constexpr int kChannelsInLayout = 2;
};

static_assert(sizeof(SegmentHeader) <= ShmGeometry::kHeaderBytes, "header fits its page");

}  // namespace ring
