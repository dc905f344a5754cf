// How the messages of a direct round travel (direct_collectives.h): the protocol under the one
// algorithm, as NCCL's protocols sit under its one ring (a template parameter, not a fork).
//
// A round: every member sends its message (or each member a block of its own) to every other
// member, reads every other member's where it lies, and hands those back (release). Two
// protocols serve it:
//   FifoRound     the pairwise FIFOs of the group's transport (transport/link.h): one slot per
//                 message and per peer, stamped and checked by stamped_link.h; any group, any
//                 link (shared memory or TCP), a long message cut into rounds of a slot each.
//   MailboxRound  the mailboxes (transport/link.h, Mailbox), where every rank of the group
//                 shares memory: one post that every peer reads in place, no credit handed back
//                 (why that is faster for a small message: Mailbox). One message for all
//                 members, so no round of a block each (no reduce_scatter).
// Both give the algorithm the same four operations (members, capacity, send, receive,
// release), so the direct all_reduce, all_gather, reduce_scatter and barrier are each written
// once, and a small call takes the mailbox by its plan alone (plan_choice.h, mailboxRound).
#pragma once

#include <cstdint>

#include "common/errors.h"
#include "protocol/message_header.h"
#include "transport/link.h"
#include "transport/wait.h"

namespace ring {

// Some ranks of the group as a direct round sees them: `size` members, this rank at `pos`;
// ranks null means members 0 .. size-1 are group ranks 0 .. size-1.
struct DirectMembers {
  const int* ranks;
  int size;
  int pos;
  int rankAt(int i) const { return ranks ? ranks[i] : i; }
};

class FifoRound {
 public:
  // `m`: the members, this rank at m.pos (checked).
  FifoRound(Transport& t, const DirectMembers& m);
  const DirectMembers& members() const { return m_; }
  // Largest message of a round: a slot of the link to the next member.
  int64_t capacity() const;
  // Message `step` on each link to a member: to member i, `bytes` from blocks + i * blockBytes
  // (blockBytes 0: the same bytes for every member). The next member first, as the ring would:
  // it usually waits for it first. A slot stays acquired only for its copy.
  void send(const char* blocks, int64_t blockBytes, int64_t bytes, int64_t step,
            const Fingerprint& fp, const WaitContext& ctx);
  // Member `from`'s message `step`, checked (the collective fp, `bytes` long): its payload,
  // readable until release(from).
  const void* receive(int from, int64_t bytes, int64_t step, const Fingerprint& fp,
                      const WaitContext& ctx);
  void release(int from);

 private:
  Transport& t_;
  const DirectMembers m_;
};

class MailboxRound {
 public:
  // The whole group: `size` ranks, this one `rank`. `posted`: this rank's message of the first
  // round went out already, ahead of the call (Communicator::post); its first send is skipped.
  MailboxRound(Mailbox& box, int rank, int size, bool posted)
      : box_(box), m_{nullptr, size, rank}, posted_(posted) {}
  const DirectMembers& members() const { return m_; }
  int64_t capacity() const { return box_.capacity(); }
  // Posts this rank's message of the next round (one for every member: blockBytes must be 0).
  // `step` is not sent: the mailbox numbers its rounds itself. Never waits: the buffer it
  // writes was read by every peer two rounds ago (Mailbox).
  void send(const char* blocks, int64_t blockBytes, int64_t bytes, int64_t step,
            const Fingerprint& fp, const WaitContext& ctx) {
    (void)step;
    (void)ctx;
    RING_ASSERT(blockBytes == 0, "a mailbox round carries one message for every member, not a "
                "block of ", blockBytes, " bytes each");
    // Why skipped once: the caller posted this round's message before it asked whether the
    // peers had issued the call (Communicator::post); posting it again would start a round
    // the peers never run.
    if (posted_) {
      posted_ = false;
      return;
    }
    box_.post(blocks, bytes, fp);
  }
  // Member `from`'s message of the round this rank posted last, checked: where it lies,
  // readable until this rank's next post (release has nothing to hand back).
  const void* receive(int from, int64_t bytes, int64_t step, const Fingerprint& fp,
                      const WaitContext& ctx) {
    (void)step;
    return box_.receive(from, bytes, fp, ctx);
  }
  void release(int from) { (void)from; }

 private:
  Mailbox& box_;
  const DirectMembers m_;
  bool posted_;
};

}  // namespace ring
