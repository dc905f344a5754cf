// Point-to-point sends and receives, progressed by one thread of their own.
//
// Why a progress engine rather than blocking calls: batch_isend_irecv and ring exchanges post
// a send to a peer that is itself sending to us. Blocking in the first send until the peer
// receives would deadlock once a message exceeds the FIFO. Instead every pending operation
// moves forward whenever its link allows, one slot at a time.
//
// Matching: sends to one peer go out in the order they were posted; a receive takes the oldest
// message from its source (any source for recv_anysource) that carries its tag, as torch and
// gloo define it (p2p_receiver.h).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <list>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "executor/p2p_receiver.h"
#include "transport/link.h"

namespace ring {

struct P2POp {
  bool isSend = true;
  int peer = -1;  // -1: receive from any source
  int tag = 0;
  void* data = nullptr;
  int64_t bytes = 0;
  std::chrono::milliseconds timeout{0};
  // Called on the engine thread when the operation ends: error (or null), and the source rank.
  std::function<void(std::exception_ptr, int)> done;
};

class P2PEngine {
 public:
  // spinMicros: how long the engine busy-polls after its last progress before it sleeps (the
  // collectives' budget, Communicator::spinMicros).
  P2PEngine(Transport& transport, std::string groupName, int spinMicros = 0);
  ~P2PEngine();
  void post(P2POp op);
  // Fails every pending operation with `reason` (abort / shutdown).
  void failAll(const std::string& reason);
  // Blocks until every operation posted so far has ended (each is bounded by its timeout).
  void waitIdle();

 private:
  struct Pending {
    P2POp op;
    Clock::time_point start;
    // A send: its sequence among the sends to its peer, and how far it has gone.
    uint64_t pairSeq = 0;
    int64_t moved = 0;
    int64_t step = 0;
    // A receive: what the receiver matches and fills.
    P2PReceiver::Receive recv;
  };
  void run();
  bool progressSend(Pending& p);       // true if anything moved
  bool blockedByEarlier(const Pending& p, const std::list<Pending>& before) const;
  void finish(Pending& p, std::exception_ptr error);
  void ended();  // one operation fewer is open
  // Nothing could move: spin, then sleep until a message may have arrived or an op was posted.
  void idle(Clock::duration idleFor);
  // Fails every pending operation if the group is broken, aborted or a peer died.
  bool failPendingIfUnhealthy();

  Transport& transport_;
  std::string groupName_;
  std::chrono::microseconds spin_;
  std::vector<uint64_t> sendSeq_;  // per peer, sends begun
  P2PReceiver receiver_;          // engine thread only
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<P2POp> incoming_;
  std::list<Pending> pending_;  // engine thread only
  std::condition_variable idle_;  // an operation ended
  size_t open_ = 0;               // posted and not yet ended (guarded by mutex_)
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace ring
