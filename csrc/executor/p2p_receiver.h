// The receiving side of point-to-point: matches each posted receive with a message by (source,
// tag), as torch defines recv: a receive takes the oldest message from its source (any source
// for recv_anysource) that carries its tag. Messages from one source with one tag are taken in
// the order they were sent, receives in the order they were posted (as MPI's non-overtaking
// rule, and gloo's behaviour).
//
// Why messages are read off the link ahead of their receive: a link is a FIFO, so a receive
// for tag 2 whose sender first sent a message with tag 1 can only reach its message by taking
// the tag-1 message off the link first. That message is kept ("held") until a receive for it
// is posted; held messages are only read while some posted receive still looks for a message
// from that link, so with receives posted in send order nothing is ever copied twice.
//
// Driven by the P2PEngine's thread only; nothing here locks.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <vector>

#include "transport/link.h"

namespace ring {

class P2PReceiver {
 public:
  // One posted receive. Owned by the caller, which must keep it in place until done or forget().
  struct Receive {
    int peer = -1;  // -1: any source
    int tag = 0;
    void* data = nullptr;
    int64_t bytes = 0;
    int source = -1;  // the sender, once matched
    bool done = false;
  };

  explicit P2PReceiver(Transport& transport);
  ~P2PReceiver();

  void post(Receive* r);
  // Drops a receive that ended otherwise (timeout, failure); its message, if partly read, is
  // held again for the next receive that matches it.
  void forget(Receive* r);
  // Matches receives with messages and moves every slot that is there. True if anything moved.
  // Throws CommError for a message that breaks the protocol or a receive of the wrong size.
  bool progress();
  // The link a sleeping engine should wait on for the oldest unfinished receive, or -1.
  int linkToWaitOn() const;

 private:
  struct Message;
  void match();
  bool wanted(int src) const;
  bool startMessage(int src);
  bool readFrom(int src);
  void attach(Receive* r, Message* m);
  void deliver(Message* m);

  Transport& transport_;
  const int me_;
  int64_t capacity_ = 0;
  std::vector<uint64_t> messagesFrom_;  // per source: messages started so far (header seq)
  uint64_t arrivals_ = 0;
  std::list<Receive*> posted_;                  // unmatched receives, in post order
  std::list<std::unique_ptr<Message>> messages_;  // started and not delivered, by arrival
  std::vector<Message*> reading_;               // per source: the message on its link now
};

}  // namespace ring
