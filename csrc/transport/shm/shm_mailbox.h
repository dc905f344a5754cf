// Mailbox rounds (transport/link.h, Mailbox) in the shared-memory segments: each rank's segment
// ends with its mailbox, two buffers that only their owner writes and every peer reads.
//
// A buffer is a head line (MailboxHead: the first 48 bytes of the MessageHeader, the message
// itself if it has at most 8 bytes, the tag) and room for a longer message, contiguous. The
// owner writes the message, then the head, and publishes the tag last with the release store
// and futex wake of FIFOs' `published`: a reader waits on that one line, the last the owner
// writes, and never polls lines the owner is about to write (each poll would cost the owner
// one more transfer of that line).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "transport/link.h"
#include "transport/shm/shm_layout.h"

namespace ring {

class ShmMailbox : public Mailbox {
 public:
  // regions[i]: the mailbox region of group rank ranks[i] (ShmGeometry::mailboxOffset in its
  // segment). `owner`: the transport whose collective FIFOs a waiting receive looks at (a peer
  // that sends there runs another collective).
  ShmMailbox(Transport* owner, int rank, int nranks, const std::vector<int>& ranks,
             const std::vector<char*>& regions, const ShmGeometry& g);

  int64_t capacity() const override { return capacity_; }
  void post(const void* data, int64_t bytes, const Fingerprint& fp) override;
  const void* receive(int peer, int64_t bytes, const Fingerprint& fp,
                      const WaitContext& ctx) override;
  bool arrived(int peer) const override;
  void checkPeerNotAhead(int peer, const Fingerprint& fp) const override;

 private:
  MailboxControl* control(int rank) const;
  MailboxHead* head(int rank, uint64_t round) const;
  // Where a message of `bytes` lies in the buffer whose head is `h`.
  static char* payload(MailboxHead* h, int64_t bytes);
  // "collective mismatch: rank <peer> has gone on to <theirs> ... while rank r runs <mine>".
  std::string mismatch(int peer, const Fingerprint& theirs, const Fingerprint& mine) const;
  // Throws CommError if `peer` has sent a collective message into this rank's FIFO: it runs
  // something else than the round of `fp` (the LinkCheck of a receive's wait).
  void checkFifoQuiet(int peer, const Fingerprint& fp, const MailboxHead& h) const;
  static void checkFifoQuietThunk(const void* self, int peer);

  Transport* owner_;
  int rank_;
  int64_t capacity_;
  size_t bufferBytes_;
  std::vector<char*> regionOf_;  // [group rank]: that rank's region, or null (not on this host)
  // Rounds this rank has posted; its next round writes buffer rounds_ % 2.
  uint64_t rounds_ = 0;
  // checkPeerNotAhead's last sighting of a peer ahead of this rank (its tag), while this
  // rank ran `seq` after `rounds` rounds; only the thread running this group's collectives
  // calls it.
  struct Suspect {
    int peer = -1;
    uint64_t tag = 0;
    uint64_t seq = 0;
    uint64_t rounds = 0;
    bool operator==(const Suspect& o) const {
      return peer == o.peer && tag == o.tag && seq == o.seq && rounds == o.rounds;
    }
  };
  mutable Suspect suspect_;
  // What a receive waits for, for its LinkCheck.
  struct Waiting {
    const ShmMailbox* box;
    const Fingerprint* fp;
    const MailboxHead* head;
  };
};

}  // namespace ring
