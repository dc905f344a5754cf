#include "transport/shm/shm_transport.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/env.h"
#include "common/errors.h"
#include "common/logging.h"
#include "transport/shm/heartbeat.h"
#include "transport/shm/peer_memory.h"

namespace ring {

// ---- links -----------------------------------------------------------------------------------

bool ShmSendLink::streamsCopies() const { return owner_->streamCopies(); }

OutSlot ShmSendLink::slotAt(uint64_t index) const {
  char* base = slots_ + (index % static_cast<uint64_t>(geometry_.slots)) * geometry_.slotStride();
  return OutSlot{reinterpret_cast<MessageHeader*>(base), base + sizeof(MessageHeader)};
}

OutSlot ShmSendLink::acquire(const WaitContext& ctx) {
  // Slot sent_ % slots is free once the receiver has consumed message sent_ - slots.
  uint64_t need = sent_ + 1 > static_cast<uint64_t>(geometry_.slots)
                      ? sent_ + 1 - static_cast<uint64_t>(geometry_.slots)
                      : 0;
  waitUntil(fifo_->consumed, need, fifo_->senderSleepers, peer_, "to free a slot for message",
            static_cast<int64_t>(sent_), ctx);
  return slotAt(sent_);
}

bool ShmSendLink::tryAcquire(OutSlot* slot) {
  uint64_t need = sent_ + 1 > static_cast<uint64_t>(geometry_.slots)
                      ? sent_ + 1 - static_cast<uint64_t>(geometry_.slots)
                      : 0;
  // acquire: the receiver finished reading the slot before it published `consumed`.
  if (fifo_->consumed.load(std::memory_order_acquire) < need) return false;
  *slot = slotAt(sent_);
  return true;
}

void ShmSendLink::waitAllReleased(const WaitContext& ctx) {
  waitUntil(fifo_->consumed, sent_, fifo_->senderSleepers, peer_,
            "to finish reading the messages lent to it, up to message",
            static_cast<int64_t>(sent_) - 1, ctx);
}

void ShmSendLink::publish() {
  ++sent_;
  // Release (inside publishCounter): header and payload stores happen-before the receiver's
  // acquire load that observes the new count.
  publishCounter(fifo_->published, sent_, fifo_->receiverSleepers);
}

InSlot ShmRecvLink::slotAt(uint64_t index) const {
  const char* base =
      slots_ + (index % static_cast<uint64_t>(geometry_.slots)) * geometry_.slotStride();
  return InSlot{reinterpret_cast<const MessageHeader*>(base), base + sizeof(MessageHeader)};
}

InSlot ShmRecvLink::receive(const WaitContext& ctx) {
  waitUntil(fifo_->published, received_ + 1, fifo_->receiverSleepers, peer_,
            "to send message", static_cast<int64_t>(received_), ctx);
  return slotAt(received_);
}

bool ShmRecvLink::tryReceive(InSlot* slot) {
  if (fifo_->published.load(std::memory_order_acquire) < received_ + 1) return false;
  *slot = slotAt(received_);
  return true;
}

void ShmRecvLink::release() {
  ++received_;
  // Release: all reads of the slot complete before the sender may overwrite it.
  publishCounter(fifo_->consumed, received_, fifo_->senderSleepers);
}

void ShmRecvLink::readLent(uint64_t address, void* dst, int64_t bytes, const WaitContext& ctx) {
  const int err = readPeerMemory(senderPid_, address, dst, bytes);
  if (err != 0) {
    // A read refused after set-up (the sender made itself undumpable, a seccomp filter set on
    // this thread since) fails the call: the message's data is nowhere else.
    throw CommError(strCat("ring: rank ", owner_->rank(), " could not read the ", bytes,
                           " bytes that rank ", peer_, " (pid ", senderPid_, ") lent it (message ",
                           received_, ", at 0x", std::hex, address, std::dec,
                           "): process_vm_readv: ", std::strerror(err),
                           err == ESRCH ? " (its process has exited)" : "", "; in ",
                           ctx.describe ? ctx.describe() : std::string("a collective")));
  }
  ++lentRead_;
  // The sender keeps lent data unchanged until the slot comes back, unless its call failed: then
  // it marked the group broken before its caller could touch the data again
  // (executor/cpu_executor.cc, runRingOver), and a read that overlapped that must not count. So
  // the group's state is looked at after the read: the acquire fence keeps the look from moving
  // before the read's loads; a state of 1 (a rank is writing its reason) counts as broken.
  std::atomic_thread_fence(std::memory_order_acquire);
  if (owner_->breaking()) {
    owner_->checkHealth(peer_);  // broken or aborted: its reason
    throw CommError(strCat("ring: rank ", owner_->rank(), ": the group broke while it read what "
                           "rank ", peer_, " lent it; in ",
                           ctx.describe ? ctx.describe() : std::string("a collective")));
  }
  owner_->checkHealth(peer_);
}

// ---- transport -------------------------------------------------------------------------------

namespace {

// Reads the state letter and start time of a process from /proc/<pid>/stat. Returns false if
// the process does not exist.
bool readProcStat(pid_t pid, char* state, uint64_t* startTime) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  FILE* f = std::fopen(path, "r");
  if (f == nullptr) return false;
  char buf[1024];
  size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  // The command name (field 2) may contain spaces and parentheses: parse after the last ')'.
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr) return false;
  *state = p[2];
  // Fields after the state: 4..22; start time is field 22, i.e. the 20th after the state.
  const char* q = p + 3;
  for (int field = 4; field < 22 && q != nullptr; ++field) {
    q = std::strchr(q, ' ');
    if (q != nullptr) ++q;
  }
  *startTime = q != nullptr ? std::strtoull(q, nullptr, 10) : 0;
  return true;
}

// A peer counts as dead when its pid is gone, has become a zombie (killed but not yet reaped
// by its parent, e.g. torchrun), or now belongs to another process (a different start time).
bool processAlive(pid_t pid, uint64_t startTime) {
  if (kill(pid, 0) < 0 && errno == ESRCH) return false;
  char state = '?';
  uint64_t now = 0;
  if (!readProcStat(pid, &state, &now)) return kill(pid, 0) == 0 || errno != ESRCH;
  if (state == 'Z' || state == 'X' || state == 'x') return false;
  return startTime == 0 || now == startTime;
}

std::string inboxKey(int r) { return strCat("ring/shm/inbox/", r); }
std::string mappedKey(int r) { return strCat("ring/shm/mapped/", r); }

}  // namespace

namespace {

std::vector<int> allRanks(int n) {
  std::vector<int> v(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) v[static_cast<size_t>(r)] = r;
  return v;
}

}  // namespace

ShmTransport::ShmTransport(Store& store, int rank, int nranks, const ShmGeometry& geometry,
                           std::chrono::milliseconds timeout)
    : ShmTransport(store, rank, nranks, allRanks(nranks), geometry, timeout) {}

ShmTransport::ShmTransport(Store& store, int rank, int nranks, std::vector<int> localRanks,
                           const ShmGeometry& geometry, std::chrono::milliseconds timeout,
                           int inboxNode)
    : rank_(rank), nranks_(nranks), local_(std::move(localRanks)), geometry_(geometry) {
  static std::atomic<uint64_t> instances{0};
  instance_ = ++instances;
  std::sort(local_.begin(), local_.end());
  const int nlocal = static_cast<int>(local_.size());
  RING_ASSERT(geometry.nranks == nlocal, geometry.nranks, " vs ", nlocal);
  localIndex_.assign(static_cast<size_t>(nranks), -1);
  for (int i = 0; i < nlocal; ++i) {
    RING_ASSERT(local_[i] >= 0 && local_[i] < nranks && localIndex_[local_[i]] < 0, "local rank ",
                local_[i]);
    localIndex_[local_[i]] = i;
  }
  RING_ASSERT(localIndex_[rank] >= 0, "rank ", rank, " missing from its own host's ranks");
  const int me = localIndex_[rank];
  const size_t bytes = geometry_.segmentBytes();
  segments_.resize(static_cast<size_t>(nlocal));
  std::string placement;
  segments_[me] = ShmSegment::create(bytes, inboxNode, &placement);
  if (inboxNode >= 0) {
    RING_LOG(placement.rfind("on NUMA node", 0) == 0 ? kLogInfo : kLogWarn,
             "shared memory: this rank's inbox (", bytes, " bytes, read by this rank only) ",
             placement);
  }

  auto* own = header(me);
  own->magic = kSegmentMagic;
  own->version = kLayoutVersion;
  own->nranks = nlocal;
  own->owner = rank;
  own->ownerPid = static_cast<int32_t>(getpid());
  {
    char state;
    uint64_t start = 0;
    readProcStat(getpid(), &state, &start);
    own->ownerStartTime = start;
  }
  own->probeAddress = peerProbeAddress();
  own->slotBytes = geometry_.slotBytes;
  own->slots = geometry_.slots;
  own->mailboxBytes = geometry_.mailboxBytes;
  own->closedInOrder.store(0, std::memory_order_relaxed);
  own->issued.store(0, std::memory_order_relaxed);
  own->heartbeat.store(0, std::memory_order_relaxed);
  silenceBound_ = std::chrono::milliseconds(env().linkSilenceMs);
  own->control.brokenState.store(0, std::memory_order_relaxed);
  own->control.brokenBy = -1;

  // The inbox's name, then the settings that size it: a rank whose settings differ fails here
  // naming both, on every rank (opening the inbox would fail on its size, on one rank only:
  // the other may find it already gone).
  const std::string settings = strCat("slot_bytes=", geometry_.slotBytes, " slots=",
                                      geometry_.slots, " ll_bytes=", geometry_.mailboxBytes);
  store.set(inboxKey(rank), strCat(segments_[me].name(), " ", settings));
  std::vector<std::string> inboxKeys;
  for (int i = 0; i < nlocal; ++i) inboxKeys.push_back(inboxKey(local_[i]));
  // Every local rank's key, this rank's own included (set just above), read in one batch.
  const std::vector<std::string> inboxes = store.getAll(inboxKeys, timeout);
  for (int i = 0; i < nlocal; ++i) {
    if (i == me) continue;
    const int r = local_[i];
    const std::string& value = inboxes[static_cast<size_t>(i)];
    const size_t space = value.find(' ');
    const std::string theirs = space == std::string::npos ? "" : value.substr(space + 1);
    if (theirs != settings) {
      throw CommError(strCat("ring: rank ", rank, " has shared-memory settings '", settings,
                             "' but rank ", r, " has '", theirs, "': every rank must set "
                             "TORCH_RING_SLOT_BYTES, TORCH_RING_SLOTS and TORCH_RING_LL_BYTES "
                             "alike"));
    }
    segments_[i] = ShmSegment::open(value.substr(0, space), bytes);
    const SegmentHeader* h = header(i);
    if (h->magic != kSegmentMagic || h->version != kLayoutVersion || h->nranks != nlocal ||
        h->owner != r || h->slotBytes != geometry_.slotBytes || h->slots != geometry_.slots ||
        h->mailboxBytes != geometry_.mailboxBytes) {
      throw CommError(strCat("rank ", rank, ": the shared-memory inbox of rank ", r,
                             " does not match this rank's layout (version ", h->version,
                             " vs ", kLayoutVersion, ", local ranks ", h->nranks, " vs ", nlocal,
                             ", slot bytes ", h->slotBytes, " vs ", geometry_.slotBytes,
                             ", slots ", h->slots, " vs ", geometry_.slots,
                             ", mailbox bytes (TORCH_RING_LL_BYTES) ", h->mailboxBytes, " vs ",
                             geometry_.mailboxBytes,
                             "): ranks must run the same version with the same TORCH_RING_* "
                             "settings"));
    }
  }
  probePeers();
  // Only once every rank has mapped every inbox may the names go: from then on the memory
  // lives exactly as long as the last mapping, and /dev/shm holds nothing of this group.
  store.set(mappedKey(rank), "1");
  std::vector<std::string> mappedKeys;
  for (int r : local_) mappedKeys.push_back(mappedKey(r));
  store.getAll(mappedKeys, timeout);
  segments_[me].unlink();

  send_.resize(static_cast<size_t>(kChannels * nranks));
  recv_.resize(static_cast<size_t>(kChannels * nranks));
  for (int ch = 0; ch < kChannels; ++ch) {
    for (int i = 0; i < nlocal; ++i) {
      if (i == me) continue;
      const int peer = local_[i];
      // I send to `peer` through the FIFO (ch, me) in peer's inbox, and receive from `peer`
      // through the FIFO (ch, peer) in mine; FIFOs are indexed by local position.
      char* out = fifoAt(ch, me, i);
      char* in = fifoAt(ch, i, me);
      auto* outFifo = reinterpret_cast<FifoControl*>(out);
      // The peer's answer (probePeers), written before it said it had mapped every inbox.
      const bool readsMe = outFifo->readsSender.load(std::memory_order_acquire) == 1;
      // A lent message's slot holds its 8-byte address.
      const bool lends = readsMe && geometry_.singleCopyBytes > 0 && geometry_.slotBytes >= 8;
      send_[ch * nranks + peer] = std::make_unique<ShmSendLink>(
          this, outFifo, out + sizeof(FifoControl), geometry_, peer,
          lends ? geometry_.singleCopyBytes : -1);
      recv_[ch * nranks + peer] = std::make_unique<ShmRecvLink>(
          this, reinterpret_cast<FifoControl*>(in), in + sizeof(FifoControl), geometry_, peer,
          header(i)->ownerPid);
    }
  }
  reportSingleCopy();
  if (geometry_.mailboxBytes > 0 && onlySharedMemory()) {
    std::vector<char*> regions;
    for (int i = 0; i < nlocal; ++i) {
      regions.push_back(static_cast<char*>(segments_[i].data()) + geometry_.mailboxOffset());
    }
    mailbox_ = std::make_unique<ShmMailbox>(this, rank, nranks, local_, std::move(regions),
                                            geometry_);
  }
  // Every peer counts as just seen: its silence is measured from now.
  const int64_t now = Clock::now().time_since_epoch().count();
  beats_.resize(static_cast<size_t>(nlocal));
  for (int i = 0; i < nlocal; ++i) {
    beats_[static_cast<size_t>(i)] = {header(i)->heartbeat.load(std::memory_order_relaxed), now};
  }
  // Only peers on this host read the heartbeat: a rank alone in its domain starts no thread.
  if (nlocal > 1) attachHeartbeat(&own->heartbeat);
}

// Why each receiver asks for itself: whether a process may read another's memory depends on
// both (ptrace rules, seccomp profiles: peer_memory.h), so only the reader can tell, and it tells
// the sender through the FIFO between them. A rank whose TORCH_RING_SINGLE_COPY_BYTES is 0
// reads nobody's memory: its peers then copy everything they send it into slots.
void ShmTransport::probePeers() {
  const int me = localIndex_[rank_];
  probeRefused_.assign(local_.size(), "");
  for (int i = 0; i < static_cast<int>(local_.size()); ++i) {
    if (i == me) continue;
    const SegmentHeader* h = header(i);
    probeRefused_[static_cast<size_t>(i)] =
        geometry_.singleCopyBytes > 0 ? probePeerMemory(h->ownerPid, h->probeAddress) : "off";
    const uint32_t reads = probeRefused_[static_cast<size_t>(i)].empty() ? 1 : 0;
    for (int ch = 0; ch < kChannels; ++ch) {
      reinterpret_cast<FifoControl*>(fifoAt(ch, i, me))
          ->readsSender.store(reads, std::memory_order_release);
    }
  }
}

void ShmTransport::reportSingleCopy() {
  if (local_.size() < 2) return;
  if (geometry_.singleCopyBytes <= 0) {
    singleCopyReport_ = "off (TORCH_RING_SINGLE_COPY_BYTES=0)";
    RING_LOG(kLogInfo, "single-copy messages: ", singleCopyReport_);
    return;
  }
  std::string lendsTo, refused;
  bool probeFailed = false;  // this rank's own reads refused (a peer's setting is not a fault)
  for (int i = 0; i < static_cast<int>(local_.size()); ++i) {
    const int r = local_[static_cast<size_t>(i)];
    if (r == rank_) continue;
    if (send_[static_cast<size_t>(r)]->lendsFrom() > 0) {
      lendsTo += strCat(lendsTo.empty() ? "" : ", ", r);
    } else {
      refused += strCat("; rank ", r, " does not read this rank's memory");
    }
    const std::string& why = probeRefused_[static_cast<size_t>(i)];
    if (!why.empty()) {
      refused += strCat("; this rank cannot read rank ", r, "'s: ", why);
      probeFailed = true;
    }
  }
  singleCopyReport_ =
      lendsTo.empty()
          ? strCat("off: every message goes through the slots", refused)
          : strCat("messages of ", geometry_.singleCopyBytes, " bytes or more lent to rank(s) ",
                   lendsTo, " (read with process_vm_readv)", refused);
  // A refused read is worth a warning once per process (every group of a job in a container
  // without CAP_SYS_PTRACE meets the same one); the rest is set-up detail.
  static std::atomic<bool> warned{false};
  const bool warn = probeFailed && !warned.exchange(true);
  RING_LOG(warn ? kLogWarn : kLogInfo, "single-copy messages: ", singleCopyReport_);
}

ShmTransport::~ShmTransport() {
  detachHeartbeat(&header(localIndex_[rank_])->heartbeat);
  // An orderly end (destroy_process_group): the peers may see this process exit without
  // taking it for a crash. Not after an abort: the peers must fail then (they learn why from
  // the group's broken record).
  if (!aborted_.load(std::memory_order_acquire)) {
    header(localIndex_[rank_])->closedInOrder.store(1, std::memory_order_release);
  }
}

SendLink& ShmTransport::sendLink(Channel ch, int peer) {
  RING_ASSERT(peer >= 0 && peer < nranks_ && peer != rank_ && localIndex_[peer] >= 0, "peer ",
              peer, " is not on this host");
  return *send_[static_cast<int>(ch) * nranks_ + peer];
}

RecvLink& ShmTransport::recvLink(Channel ch, int peer) {
  RING_ASSERT(peer >= 0 && peer < nranks_ && peer != rank_ && localIndex_[peer] >= 0, "peer ",
              peer, " is not on this host");
  return *recv_[static_cast<int>(ch) * nranks_ + peer];
}

void ShmTransport::markBroken(const std::string& reason) {
  GroupControl& c = control();
  uint32_t expected = 0;
  // First failure wins; later ones (often consequences of the first) are not recorded.
  if (c.brokenState.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
    c.brokenBy = rank_;
    size_t n = reason.size() < kReasonBytes - 1 ? reason.size() : kReasonBytes - 1;
    std::memcpy(c.reason, reason.data(), n);
    c.reason[n] = '\0';
    // release: the reason bytes are visible to whoever observes state 2.
    c.brokenState.store(2, std::memory_order_release);
  }
  // Why a full fence: the failing rank's caller gets its buffers back after this, and may write
  // them while a peer still reads what it lent from them; the peer looks at the state after its
  // read (ShmRecvLink::readLent). The fence keeps those writes after the state's store.
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

void ShmTransport::abortLocal(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(abortMutex_);
    if (abortReason_.empty()) abortReason_ = reason;
  }
  // Waiters poll this between futex sleeps (at most one sleep slice later).
  aborted_.store(true, std::memory_order_release);
}

void ShmTransport::checkPeersAlive() {
  // kill(pid, 0) is cheap but not free; a dead peer noticed within ~0.2 s is plenty.
  int64_t now = Clock::now().time_since_epoch().count();
  int64_t last = lastLivenessCheckNs_.load(std::memory_order_relaxed);
  if (now - last < 200 * 1000 * 1000) return;
  lastLivenessCheckNs_.store(now, std::memory_order_relaxed);
  for (int i = 0; i < static_cast<int>(local_.size()); ++i) {
    const int r = local_[i];
    if (r == rank_) continue;
    // Gone after an orderly shutdown: not a failure (waits on its links say so themselves).
    if (header(i)->closedInOrder.load(std::memory_order_acquire) == 1) continue;
    pid_t pid = header(i)->ownerPid;
    std::string reason;
    if (!processAlive(pid, header(i)->ownerStartTime)) {
      reason = strCat("rank ", r, " (pid ", pid, ") has exited: its process is gone");
    } else {
      reason = silentPeer(i, r, pid, now);
    }
    if (!reason.empty()) {
      markBroken(reason);
      throw CommError(strCat("ring: rank ", rank_, " cannot continue: ", reason));
    }
  }
}

std::string ShmTransport::silentPeer(int i, int r, int pid, int64_t nowNs) {
  if (silenceBound_.count() == 0) return {};
  std::unique_lock<std::mutex> lock(beatsMutex_, std::try_to_lock);
  if (!lock.owns_lock()) return {};  // another thread of this rank is looking right now
  PeerBeat& b = beats_[static_cast<size_t>(i)];
  const uint64_t beat = header(i)->heartbeat.load(std::memory_order_relaxed);
  if (beat != b.seen) {
    b.seen = beat;
    b.changedNs = nowNs;
    return {};
  }
  const int64_t stillNs = nowNs - b.changedNs;
  if (stillNs <= std::chrono::nanoseconds(silenceBound_).count()) return {};
  char state = '?';
  uint64_t start = 0;
  readProcStat(pid, &state, &start);
  const char* what = state == 'T' ? ", stopped by a signal"
                     : state == 't' ? ", stopped by a debugger"
                     : state == 'D' ? ", in an uninterruptible wait"
                                    : "";
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.1f", static_cast<double>(stillNs) / 1e9);
  return strCat("rank ", r, " (pid ", pid, ", on this host) has not run for ", seconds,
                " s: the heartbeat its own thread advances every ",
                static_cast<int>(kBeatInterval.count()),
                " ms whatever its Python code does has stopped (process state ", state, what,
                "). It is stopped (SIGSTOP, a paused container, a debugger) or starved of CPU; "
                "TORCH_RING_LINK_SILENCE_MS=", silenceBound_.count(),
                " is the bound (0: wait for the group's timeout)");
}

// A wait reads its counter, then calls checkHealth: the peer may have published and closed in
// between. So the first time a thread sees `peer` closed it only remembers it: its acquire
// load of the flag makes everything the peer published visible, and the caller re-reads its
// counter before it asks again. The second time, the data can never come.
void ShmTransport::checkPeerStillOpen(int peer) {
  if (peer < 0 || peer >= nranks_ || localIndex_[peer] < 0 || peer == rank_) return;
  if (header(localIndex_[peer])->closedInOrder.load(std::memory_order_acquire) != 1) return;
  thread_local std::vector<std::pair<uint64_t, int>> seenClosed;  // (transport instance, peer)
  const std::pair<uint64_t, int> key{instance_, peer};
  if (std::find(seenClosed.begin(), seenClosed.end(), key) == seenClosed.end()) {
    if (seenClosed.size() >= 64) seenClosed.clear();  // forgetting only costs one more look
    seenClosed.push_back(key);
    return;
  }
  throw CommError(strCat("ring: rank ", rank_, " waits for rank ", peer,
                         ", which has already shut down its process group (in order): the ranks "
                         "disagree about what to run"));
}

void ShmTransport::checkHealth(int peer) {
  if (aborted_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(abortMutex_);
    throw CommError(strCat("ring: rank ", rank_, ": the group was aborted: ", abortReason_));
  }
  GroupControl& c = control();
  if (c.brokenState.load(std::memory_order_acquire) == 2) {
    throw CommError(strCat("ring: rank ", rank_, ": the group is broken; rank ", c.brokenBy,
                           " reported: ", std::string(c.reason)));
  }
  checkPeerStillOpen(peer);
  checkPeersAlive();
}

std::string ShmTransport::describeLink(int peer) const {
  return strCat("rank ", rank_, " <-> rank ", peer, ": shared memory (", geometry_.slots,
                " slots x ", geometry_.slotBytes, " bytes)");
}

void ShmTransport::announceIssued(uint64_t count) {
  SegmentHeader* h = header(localIndex_[rank_]);
  if (count > 0) {
    // A seqlock write: readers that see the tag unchanged across their read of `ns` read the
    // `ns` written with that tag (the release fence orders the tag's clearing before `ns`).
    SegmentHeader::IssueTime& e = h->issueTimes[(count - 1) % kIssueHistory];
    e.tag.store(0, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    e.ns.store(std::chrono::duration_cast<std::chrono::nanoseconds>(
                   std::chrono::steady_clock::now().time_since_epoch()).count(),
               std::memory_order_relaxed);
    e.tag.store(count, std::memory_order_release);
  }
  h->issued.store(count, std::memory_order_release);
}

bool ShmTransport::issueTimes(uint64_t seq, std::vector<int64_t>* ns) const {
  if (!onlySharedMemory()) return false;
  ns->assign(static_cast<size_t>(nranks_), 0);
  for (int r = 0; r < nranks_; ++r) {
    const SegmentHeader::IssueTime& e = header(localIndex_[r])->issueTimes[seq % kIssueHistory];
    // The seqlock read: the tag before and after `ns` must both name this collective.
    const uint64_t before = e.tag.load(std::memory_order_acquire);
    const int64_t t = e.ns.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    const uint64_t after = e.tag.load(std::memory_order_relaxed);
    if (before != seq + 1 || after != seq + 1) return false;
    (*ns)[static_cast<size_t>(r)] = t;
  }
  return true;
}

bool ShmTransport::issuedBy(int peer, uint64_t* count) const {
  if (!announces() || peer < 0 || peer >= nranks_) return false;
  *count = header(localIndex_[peer])->issued.load(std::memory_order_acquire);
  return true;
}

bool ShmTransport::allIssued(uint64_t count) const {
  for (size_t i = 0; i < local_.size(); ++i) {
    if (header(static_cast<int>(i))->issued.load(std::memory_order_acquire) < count) return false;
  }
  return true;
}

}  // namespace ring
