// TCP transport between ranks on different hosts (or every rank, TORCH_RING_TRANSPORT=tcp).
//
// One TCP connection per pair of ranks and channel, opened by the lower rank and authenticated
// by the job token in both directions (tcp_handshake.h). One I/O thread per transport moves
// frames between the sockets and the links' slot FIFOs with non-blocking calls under epoll:
// it writes published send slots, and reads incoming frames into free receive slots. When a
// link's receive slots are all full it stops reading that socket, so TCP's own window holds the
// sender back: that is the flow control, and no frame is ever buffered outside a slot.
//
// Failure handling: the I/O thread never throws or exits the process.
//  - An invalid frame marks the group broken with a reason naming the peer rank and address.
//  - A connection closed without a goodbye, or an I/O error, ends that peer's links with such
//    a reason: a wait on them that the data already received cannot satisfy raises it, and so
//    does the next collective; waits on other peers go on, so that a rank that exits right
//    after its last collective does not fail the ranks still finishing theirs. The rank that
//    does depend on the lost peer fails, and its markBroken tells the whole group.
//  - markBroken sends the reason to every connected peer, so remote ranks fail with the first
//    rank's reason rather than at their timeout.
//  - A peer from which nothing has come for TcpOptions::silenceBound, not even the heartbeat
//    every live rank's I/O thread sends on an idle connection, ends its links the same way,
//    naming the ranks at its address and how long they have been silent (link_liveness.h).
//  - An orderly shutdown flushes every published frame, then says goodbye.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "transport/link.h"
#include "transport/store.h"
#include "transport/tcp/link_liveness.h"
#include "transport/tcp/tcp_handshake.h"
#include "transport/tcp/tcp_links.h"
#include "transport/tcp/wire.h"

namespace ring {

struct TcpOptions {
  std::string groupName = "default";
  int64_t slotBytes = 256 * 1024;
  int slots = 4;
  // Bounds set-up (store, connects, waiting for peers) and the flush at shutdown.
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  // A peer silent this long (not even a heartbeat) is dead, frozen or cut off: its links fail
  // naming it (link_liveness.h). 0: never judged; else at least kShortestSilenceBound.
  std::chrono::milliseconds silenceBound{5000};
  // Bounds each handshake, ours and strangers'.
  std::chrono::milliseconds handshakeTimeout{std::chrono::seconds(10)};
  // Address to listen on; empty: chooseListenAddress(TORCH_RING_SOCKET_IFNAME or
  // GLOO_SOCKET_IFNAME, MASTER_ADDR).
  std::string listenAddress;
  // Unauthenticated sockets held at once; beyond it the oldest is dropped.
  size_t maxPendingHandshakes = 64;
  // The job's secret (job_secret.h); unset: TORCH_RING_SECRET / TORCH_RING_SECRET_FILE. Tests
  // set it to give threads-as-ranks different secrets.
  std::optional<std::string> secret;
};

// Counters for tests and logs; read with stats().
struct TcpStats {
  int64_t rejectedHandshakes = 0;
  int64_t invalidFrames = 0;
  int64_t droppedPending = 0;
};

class TcpTransport : public Transport {
 public:
  // Whether TCP can link two ranks in transport `mode`: any two ranks, unless the mode is shm.
  static bool serves(const std::string& mode) { return mode != "shm"; }

  // Collective over the ranks in `peers` plus this one: listens, publishes "ip:port" through
  // `store`, learns the addresses of the lower peers, says it is ready, connects to the higher
  // peers (from its own published address), accepts the lower ones (each only from the address
  // it published), and returns when every link is authenticated, with the listener closed.
  // Rank 0 of the group creates the job token (it always takes part when any link of the
  // group is TCP).
  TcpTransport(Store& store, int rank, int size, const std::vector<int>& peers,
               const TcpOptions& opts);
  ~TcpTransport() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  SendLink& sendLink(Channel ch, int peer) override;
  RecvLink& recvLink(Channel ch, int peer) override;
  void checkHealth(int peer) override;
  void markBroken(const std::string& reason) override;
  void abortLocal(const std::string& reason) override;
  std::string describeLink(int peer) const override;

  // Wakes the I/O thread (links call it when they hand it work).
  void wakeIo();
  // Executor side of publish(): writes the frame just published on (channel, peer) straight to
  // the socket if nothing else is queued there. Returns true if the whole frame went out;
  // false leaves the frame (or its rest) to the I/O thread.
  bool tryWriteInline(int channel, int peer);
  // Executor side of receive(): reads the data frames already waiting on (channel, peer) into
  // free slots, up to frame `target` - 1, if the I/O thread is not reading that socket.
  void tryReadInline(int channel, int peer, uint64_t target);
  const std::string& listenAddress() const { return listenAddress_; }
  TcpStats stats() const;

 private:
  struct Connection;
  struct Control;

  // set-up
  // `published`: the peer's listening address from its ready key.
  void connectToPeer(Store& store, int peer, const std::string& published, int channel,
                     Clock::time_point deadline);
  void learnLowerPeerAddresses(Store& store, Clock::time_point deadline);
  void waitForAllConnected(Store& store, Clock::time_point deadline);
  void closeListener(Clock::time_point deadline);
  void stopIo();
  bool admit(int peer, int channel, const std::string& from, std::string* why);
  // I/O thread (tcp_io_loop.cc; the reads and writes of frames: tcp_connection_io.cc)
  void ioRegisterFixed();
  void ioLoop();
  void ioStep();
  void queueBrokenNotices();
  void closeAll();
  void acceptAll();
  void ioCloseListener();
  void onPendingReadable(uint64_t id);
  void expirePending();
  void establish(int fd, int peer, int channel, const std::string& address);
  void adoptNew();
  void writeConnection(Connection& c);
  void writeLocked(Connection& c, std::string* failure);
  void readConnection(Connection& c);
  // How readLocked left a connection; acted on once the read lock is released.
  struct ReadEnd {
    enum Kind { Open, Closed, Failed } kind = Open;
    std::string what;           // Failed: why, after "rank N (address) "
    bool invalidFrame = false;  // the peer broke the protocol: the whole group is broken
  };
  void readLocked(Connection& c, ReadEnd* end);
  void updateInterest(Connection& c);
  void closeConnection(Connection& c);
  // `log`: say it at WARN (once per peer is enough when all its connections fail at once).
  void connectionFailed(Connection& c, const std::string& what, bool log = true);
  void queueControl(Connection& c, uint32_t magic, const std::string& text);
  // liveness (tcp_liveness.cc): heartbeats out, silent peers judged; once per kLivenessPass
  void watchLiveness();
  void sendHeartbeatIfIdle(Connection& c, Clock::time_point now);
  void failSilentPeers(const std::vector<int>& silent, Clock::time_point now);
  bool stopStep();
  void reject(const std::string& address, const std::string& why);
  void recordBroken(const std::string& reason, bool propagate);
  Connection& conn(int channel, int peer) { return *conns_[channel * size_ + peer]; }

  int rank_;
  int size_;
  TcpOptions opts_;
  std::vector<int> peers_;
  std::vector<char> isPeer_;  // [rank] 1 if connected over TCP by this transport
  HandshakeIdentity identity_;
  std::string listenAddress_;
  std::vector<std::unique_ptr<TcpSendLink>> send_;  // [channel * size + peer]
  std::vector<std::unique_ptr<TcpRecvLink>> recv_;  // [channel * size + peer]
  std::vector<std::unique_ptr<Connection>> conns_;  // [channel * size + peer], I/O thread's

  int listenFd_ = -1;  // closed by the I/O thread once every link is up (ioCloseListener)
  int epollFd_ = -1;
  int wakeFd_ = -1;
  std::thread io_;

  // Shared between the I/O thread and the others; guarded by mutex_.
  mutable std::mutex mutex_;
  std::condition_variable established_;
  std::vector<char> connected_;           // [channel * size + peer]
  std::deque<std::pair<int, std::pair<int, int>>> adopt_;  // fd, (peer, channel) to take over
  std::string brokenReason_;
  std::string abortReason_;
  std::string firstPeerFailure_;  // "rank 3 (10.0.0.2:41234) closed its connection ..."
  TcpStats stats_;
  // [rank] the IP a lower peer published (empty until learned): its connections must come from
  // there. Filled by the set-up thread before this rank says it is ready.
  std::vector<std::string> publishedIp_;
  bool listenerClosed_ = false;
  std::condition_variable listenerClosedCv_;

  std::atomic<bool> broken_{false};
  std::atomic<bool> propagate_{false};  // a broken notice waits to be sent
  std::atomic<bool> aborted_{false};
  std::atomic<bool> peerFailed_{false};  // a connection ended without a goodbye
  std::atomic<bool> stopping_{false};
  std::atomic<bool> closeListenerRequested_{false};  // every link is up: no more accepts

  // I/O thread only.
  LinkLiveness liveness_;
  Clock::time_point lastLivenessPass_{};
  std::map<uint64_t, std::unique_ptr<PendingHandshake>> pending_;
  uint64_t nextPendingId_ = 0;
  int64_t rejectLogs_ = 0;
  Clock::time_point stopDeadline_;
};

}  // namespace ring
