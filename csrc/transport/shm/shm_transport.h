// Shared-memory transport between the ranks of one host: every pair of ranks is connected by
// a FIFO of slots in the receiver's inbox segment, with monotonic published/consumed counters.
// In a group that spans hosts it links only the group's ranks on this host (the others are
// reached over TCP); links are still addressed by group rank.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "transport/link.h"
#include "transport/store.h"
#include "transport/shm/shm_layout.h"
#include "transport/shm/shm_mailbox.h"
#include "transport/shm/shm_segment.h"

namespace ring {

class ShmTransport;

class ShmSendLink : public SendLink {
 public:
  // lendsFrom: SendLink::lendsFrom, decided at set-up (the receiver's probe and this rank's
  // TORCH_RING_SINGLE_COPY_BYTES).
  ShmSendLink(ShmTransport* owner, FifoControl* fifo, char* slots, const ShmGeometry& g, int peer,
              int64_t lendsFrom)
      : owner_(owner), fifo_(fifo), slots_(slots), geometry_(g), peer_(peer),
        lendsFrom_(lendsFrom) {}
  int peer() const override { return peer_; }
  int64_t capacity() const override { return geometry_.slotBytes; }
  OutSlot acquire(const WaitContext& ctx) override;
  bool tryAcquire(OutSlot* slot) override;
  void publish() override;
  uint64_t messagesSent() const override { return sent_; }
  bool streamsCopies() const override;
  int64_t lendsFrom() const override { return lendsFrom_; }
  void waitAllReleased(const WaitContext& ctx) override;

 private:
  OutSlot slotAt(uint64_t index) const;
  ShmTransport* owner_;
  FifoControl* fifo_;
  char* slots_;
  ShmGeometry geometry_;
  int peer_;
  int64_t lendsFrom_;
  uint64_t sent_ = 0;  // messages this side has published (mirrors fifo_->published)
};

class ShmRecvLink : public RecvLink {
 public:
  // senderPid: the peer's process, whose memory readLent reads.
  ShmRecvLink(ShmTransport* owner, FifoControl* fifo, char* slots, const ShmGeometry& g, int peer,
              int senderPid)
      : owner_(owner), fifo_(fifo), slots_(slots), geometry_(g), peer_(peer),
        senderPid_(senderPid) {}
  int peer() const override { return peer_; }
  InSlot receive(const WaitContext& ctx) override;
  bool tryReceive(InSlot* slot) override;
  void release() override;
  void readLent(uint64_t address, void* dst, int64_t bytes, const WaitContext& ctx) override;
  // Lent messages this side has read so far (on the receiving thread): what a test asks to know
  // that a call took the single-copy path.
  uint64_t lentRead() const { return lentRead_; }

 private:
  InSlot slotAt(uint64_t index) const;
  ShmTransport* owner_;
  FifoControl* fifo_;
  char* slots_;
  ShmGeometry geometry_;
  int peer_;
  int senderPid_;
  uint64_t lentRead_ = 0;
  uint64_t received_ = 0;  // messages this side has released (mirrors fifo_->consumed)
};

class ShmTransport : public Transport {
 public:
  // Whether shared memory can link a rank on host `mine` with one on `theirs` in transport
  // `mode`: the same host and namespaces (segments and pids must be visible), mode not tcp.
  static bool serves(const std::string& mode, const std::string& mine, const std::string& theirs) {
    return mode != "tcp" && mine == theirs;
  }

  // Collective across the group: every rank creates its inbox, publishes its name through
  // `store`, maps every peer's inbox, and unlinks its own once all ranks have mapped it.
  // Every rank of the group is on this host.
  ShmTransport(Store& store, int rank, int nranks, const ShmGeometry& geometry,
               std::chrono::milliseconds timeout);
  // Only `localRanks` (group ranks on this host, including `rank`) take part, and only they
  // must construct it; geometry.nranks must be localRanks.size().
  // inboxNode >= 0: this rank's inbox (which only it reads) is allocated preferring that NUMA
  // node (ShmSegment::create), the node its thread is bound to (TORCH_RING_CPU_BIND=numa).
  ShmTransport(Store& store, int rank, int nranks, std::vector<int> localRanks,
               const ShmGeometry& geometry, std::chrono::milliseconds timeout,
               int inboxNode = -1);
  ~ShmTransport() override;

  int rank() const override { return rank_; }
  int size() const override { return nranks_; }
  SendLink& sendLink(Channel ch, int peer) override;
  RecvLink& recvLink(Channel ch, int peer) override;
  void checkHealth(int peer) override;
  void markBroken(const std::string& reason) override;
  void abortLocal(const std::string& reason) override;
  std::string describeLink(int peer) const override;
  bool onlySharedMemory() const override { return static_cast<int>(local_.size()) == nranks_; }
  // Only where every rank of the group is on this host (a round needs every rank).
  Mailbox* mailbox() override { return mailbox_.get(); }
  // Announcements live in each rank's segment header; every rank of the group must be here.
  bool announces() const override { return onlySharedMemory(); }
  bool issuedBy(int peer, uint64_t* count) const override;
  void announceIssued(uint64_t count) override;
  bool allIssued(uint64_t count) const override;
  bool issueTimes(uint64_t seq, std::vector<int64_t>* ns) const override;
  // What set-up found of single-copy messages, for the set-up log: "off
  // (TORCH_RING_SINGLE_COPY_BYTES=0)", "from 65536 bytes to ranks 1, 2", or why a peer's
  // memory could not be read.
  const std::string& singleCopyReport() const { return singleCopyReport_; }
  // Whether the group is broken, aborted, or being marked broken (a rank is writing its
  // reason): what a lent read looks at after it (ShmRecvLink::readLent).
  bool breaking() const {
    return aborted_.load(std::memory_order_acquire) ||
           control().brokenState.load(std::memory_order_acquire) != 0;
  }

 private:
  // Single-copy set-up, before this rank says it has mapped every inbox: reads each peer's
  // probe word and writes the answer into the FIFOs that peer sends through (readsSender).
  void probePeers();
  // After every rank has: the report above (probeRefused_ and the peers' readsSender).
  void reportSingleCopy();
  // Segments are indexed by position in local_ (the FIFO layout's sender index too).
  SegmentHeader* header(int localIndex) const {
    return static_cast<SegmentHeader*>(segments_[localIndex].data());
  }
  // The FIFO of channel `ch` that local rank `sender` sends through into local rank `owner`'s
  // inbox: its control block, then its slots.
  char* fifoAt(int ch, int sender, int owner) const {
    return static_cast<char*>(segments_[owner].data()) + geometry_.fifoOffset(ch, sender, owner);
  }
  // The group-wide failure record lives in the first local rank's segment.
  GroupControl& control() const { return header(0)->control; }
  void checkPeersAlive();
  // The reason to give up on local peer `i` (rank r, pid): its heartbeat has been still for
  // longer than silenceBound_; "" while it beats. Called by checkPeersAlive only.
  std::string silentPeer(int i, int r, int pid, int64_t nowNs);
  // Throws if `peer` shut the group down in order and the caller's wait cannot be satisfied.
  void checkPeerStillOpen(int peer);

  int rank_;
  int nranks_;
  std::vector<int> local_;       // group ranks on this host, ascending
  std::vector<int> localIndex_;  // [group rank] = index in local_, or -1
  ShmGeometry geometry_;
  std::vector<ShmSegment> segments_;  // [i] = inbox of local_[i] (own one created, others opened)
  std::vector<std::unique_ptr<ShmSendLink>> send_;  // [channel * n + peer]
  std::vector<std::unique_ptr<ShmRecvLink>> recv_;  // [channel * n + peer]
  std::unique_ptr<ShmMailbox> mailbox_;
  std::atomic<bool> aborted_{false};
  std::mutex abortMutex_;
  std::string abortReason_;  // guarded by abortMutex_
  std::atomic<int64_t> lastLivenessCheckNs_{0};
  // Same-host liveness (heartbeat.h): a peer whose heartbeat has not moved for silenceBound_
  // is not running. Per local index: the beat last seen and when it was seen to change (this
  // process's clock, so processes need not share one). 0 ms: off.
  struct PeerBeat {
    uint64_t seen = 0;
    int64_t changedNs = 0;
  };
  std::chrono::milliseconds silenceBound_{0};
  std::mutex beatsMutex_;
  std::vector<PeerBeat> beats_;  // guarded by beatsMutex_
  uint64_t instance_;  // unique per transport in this process (see checkHealth)
  std::vector<std::string> probeRefused_;  // [local index]: why this rank cannot read it
  std::string singleCopyReport_;
};

}  // namespace ring
