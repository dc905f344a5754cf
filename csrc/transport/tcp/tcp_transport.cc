#include "transport/tcp/tcp_transport.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "common/env.h"
#include "common/errors.h"
#include "common/logging.h"
#include "common/thread_name.h"
#include "transport/setup_keys.h"
#include "transport/tcp/job_secret.h"
#include "transport/tcp/socket_util.h"
#include "transport/tcp/tcp_connection.h"

namespace ring {
namespace {

// A rank publishes its address as soon as it listens (addrKey), and says it is ready once it
// knows the addresses its lower peers will connect from (readyKey, same value): only then do
// they connect, so that it can judge every hello's source address at once. Two steps, so that
// no rank's readiness waits on another's (a single key would chain them rank after rank).
std::string addrKey(int r) { return strCat("ring/tcp/addr/", r); }
std::string readyKey(int r) { return strCat("ring/tcp/ready/", r); }
const char* kTokenKey = "ring/tcp/token";

JobToken parseToken(const std::string& hex) {
  JobToken t{};
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  if (hex.size() != 2 * t.size()) {
    throw CommError(strCat("the job token in the store has ", hex.size(), " characters, expected ",
                           2 * t.size(), ": was the store written by another version?"));
  }
  for (size_t i = 0; i < t.size(); ++i) {
    int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) throw CommError("the job token in the store is not lower-case hex");
    t[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return t;
}

}  // namespace

TcpTransport::TcpTransport(Store& store, int rank, int size, const std::vector<int>& peers,
                           const TcpOptions& opts)
    : rank_(rank), size_(size), opts_(opts), peers_(peers), liveness_(size, opts.silenceBound) {
  RING_ASSERT(rank >= 0 && rank < size, "rank ", rank, " of ", size);
  std::sort(peers_.begin(), peers_.end());
  isPeer_.assign(static_cast<size_t>(size), 0);
  for (int p : peers_) {
    RING_ASSERT(p >= 0 && p < size && p != rank && !isPeer_[p], "TCP peer ", p);
    isPeer_[p] = 1;
  }
  connected_.assign(static_cast<size_t>(kChannels * size), 0);
  send_.resize(static_cast<size_t>(kChannels * size));
  recv_.resize(static_cast<size_t>(kChannels * size));
  conns_.resize(static_cast<size_t>(kChannels * size));
  for (int ch = 0; ch < kChannels; ++ch) {
    for (int p : peers_) {
      size_t i = static_cast<size_t>(ch * size + p);
      send_[i] = std::make_unique<TcpSendLink>(this, rank_, p, ch, opts.slots, opts.slotBytes);
      recv_[i] = std::make_unique<TcpRecvLink>(this, rank_, p, ch, opts.slots, opts.slotBytes);
      conns_[i] = std::make_unique<Connection>(p, ch, send_[i].get(), recv_[i].get());
    }
  }
  identity_.groupHash = groupNameHash(opts.groupName);
  identity_.rank = rank;
  identity_.groupSize = size;
  identity_.slotBytes = opts.slotBytes;
  publishedIp_.assign(static_cast<size_t>(size), std::string());

  // One token per group, from rank 0 (which has TCP links whenever any rank has: a rank on
  // another host than some rank is on another host than rank 0 or shares rank 0's host).
  // Only ranks that can read the store learn it; the store itself is not authenticated, which
  // is what the optional secret is for.
  const std::string secret = opts.secret ? *opts.secret : readJobSecret();
  JobToken token{};
  if (rank == 0) {
    fillRandom(token.data(), token.size());
    store.set(kTokenKey, toHex(token.data(), token.size()));
  } else {
    token = parseToken(store.get(kTokenKey, opts.timeout));
  }
  identity_.key = handshakeKey(token, secret);

  epollFd_ = epoll_create1(EPOLL_CLOEXEC);
  RING_SYSCHECK(epollFd_, "epoll_create1 for the TCP transport");
  wakeFd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  RING_SYSCHECK(wakeFd_, "eventfd for the TCP transport");
  std::string why;
  std::string ip = opts.listenAddress.empty()
                       ? chooseListenAddress(ListenChoice{env().socketIfname,
                                                         env().socketIfnameSource,
                                                         env().socketFamily, env().masterAddr},
                                             &why)
                       : opts.listenAddress;
  if (!opts.listenAddress.empty()) why = "set by the caller";
  int port = 0;
  listenFd_ = listenOn(ip, &port);
  listenAddress_ = joinHostPort(ip, port);
  RING_LOG(kLogInfo, "TCP transport listening on ", listenAddress_, " (", why, ")",
           secret.empty() ? "" : "; handshakes keyed with the job's secret");
  ioRegisterFixed();
  io_ = std::thread([this] {
    nameThisThread("ring-tcp-io");
    setThreadLogContext(rank_, opts_.groupName);
    ioLoop();
  });

  try {
    store.set(addrKey(rank), listenAddress_);
    auto deadline = Clock::now() + opts.timeout;
    learnLowerPeerAddresses(store, deadline);
    store.set(readyKey(rank), listenAddress_);
    // The lower rank of each pair connects: a fixed rule, so both sides agree without talking.
    // The higher peers' ready keys are read together (store.h: getAll); a peer is ready once
    // it knows its lower peers' addresses, which every rank published first, so waiting for
    // all of them waits for nothing that depends on this rank's connections.
    std::vector<int> higher;
    std::vector<std::string> readyKeys;
    for (int p : peers_) {
      if (p > rank) {
        higher.push_back(p);
        readyKeys.push_back(readyKey(p));
      }
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    const std::vector<std::string> ready =
        store.getAll(readyKeys, std::max(left, std::chrono::milliseconds(1)));
    for (int ch = 0; ch < kChannels; ++ch) {
      for (size_t i = 0; i < higher.size(); ++i) {
        connectToPeer(store, higher[i], ready[i], ch, deadline);
      }
    }
    waitForAllConnected(store, deadline);
    closeListener(deadline);
  } catch (...) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (abortReason_.empty()) abortReason_ = "set-up failed";
    }
    aborted_.store(true, std::memory_order_release);  // the I/O thread leaves without a flush
    stopIo();
    throw;
  }
}

TcpTransport::~TcpTransport() { stopIo(); }

void TcpTransport::stopIo() {
  if (io_.joinable()) {
    // The final flush gets at most this long: the peers normally read everything at once.
    auto bound = std::min<std::chrono::milliseconds>(opts_.timeout, std::chrono::seconds(30));
    stopDeadline_ = Clock::now() + bound;
    stopping_.store(true, std::memory_order_release);  // publishes stopDeadline_ too
    wakeIo();
    io_.join();
  }
  for (int* fd : {&listenFd_, &epollFd_, &wakeFd_}) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }
}

void TcpTransport::learnLowerPeerAddresses(Store& store, Clock::time_point deadline) {
  std::vector<int> lower;
  std::vector<std::string> keys;
  for (int p : peers_) {
    if (p > rank_) break;  // peers_ is sorted; only lower ranks connect to this one
    lower.push_back(p);
    keys.push_back(addrKey(p));
  }
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  const std::vector<std::string> addresses =
      store.getAll(keys, std::max(left, std::chrono::milliseconds(1)));
  for (size_t i = 0; i < lower.size(); ++i) {
    const int p = lower[i];
    const std::string& published = addresses[i];
    std::string ip;
    int port = 0;
    splitHostPort(published, strCat("rank ", p), &ip, &port);
    std::lock_guard<std::mutex> lock(mutex_);
    publishedIp_[static_cast<size_t>(p)] = ip;
  }
}

void TcpTransport::closeListener(Clock::time_point deadline) {
  // Every link is up, so no rank of this group will connect again: a listener left open would
  // only let strangers cost the I/O thread (which moves the collectives' data) CPU time. The
  // I/O thread owns the listener and the pending handshakes, so it closes them; set-up waits
  // for that, so that when the group is ready its port is closed.
  closeListenerRequested_.store(true, std::memory_order_release);
  wakeIo();
  std::unique_lock<std::mutex> lock(mutex_);
  if (!listenerClosedCv_.wait_until(lock, deadline, [&] { return listenerClosed_ || broken_.load(); })) {
    throw TimeoutError(strCat("ring: rank ", rank_, ": the TCP I/O thread did not close the "
                              "listener on ", listenAddress_, " before the set-up timeout"));
  }
  if (broken_.load()) {
    throw CommError(strCat("ring: rank ", rank_, ": TCP set-up failed: ", brokenReason_));
  }
}

void TcpTransport::connectToPeer(Store& store, int peer, const std::string& published,
                                 int channel, Clock::time_point deadline) {
  std::string ip;
  int port = 0;
  splitHostPort(published, strCat("rank ", peer), &ip, &port);
  // A few tries: an acceptor at its pending-handshake cap drops the oldest socket, which may
  // have been ours if a stranger floods it.
  // A peer whose set-up failed never listens or answers: stop as soon as it says so.
  auto giveUpIfSetupFailed = [&] {
    throwIfSetupFailed(store, strCat("ring: rank ", rank_, " stops connecting to rank ", peer));
  };
  for (int attempt = 1;; ++attempt) {
    std::string myIp;
    int myPort = 0;
    splitHostPort(listenAddress_, "this rank", &myIp, &myPort);
    int fd = connectTo(ip, port, deadline, giveUpIfSetupFailed, myIp);
    auto handshakeDeadline = std::min(deadline, Clock::now() + opts_.handshakeTimeout);
    std::string detail;
    ConnectOutcome outcome;
    try {
      outcome = authenticateAsConnector(fd, identity_, peer, channel, handshakeDeadline, &detail);
    } catch (...) {
      close(fd);
      throw;
    }
    if (outcome == ConnectOutcome::Authenticated) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        adopt_.push_back({fd, {peer, channel}});
      }
      wakeIo();
      return;
    }
    close(fd);
    if (attempt >= 3 || Clock::now() >= deadline) {
      throw CommError(strCat("ring: rank ", rank_, " could not open its TCP link to rank ", peer,
                             " at ", published, " (channel ", channel, ") after ", attempt,
                             " attempts: ", detail));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100 * attempt));
  }
}

void TcpTransport::waitForAllConnected(Store& store, Clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto allIn = [&] {
    for (int ch = 0; ch < kChannels; ++ch) {
      for (int p : peers_) {
        if (!connected_[static_cast<size_t>(ch * size_ + p)]) return false;
      }
    }
    return true;
  };
  // Wakes every 100 ms to look for a set-up failure reported by another rank: a peer that gave
  // up will never connect, and the group timeout can be many minutes.
  while (!allIn() && !broken_.load() && Clock::now() < deadline) {
    auto wake = std::min(deadline, Clock::now() + std::chrono::milliseconds(100));
    established_.wait_until(lock, wake, [&] { return allIn() || broken_.load(); });
    if (allIn() || broken_.load()) break;
    lock.unlock();  // the store is a network round trip: not under the transport's lock
    throwIfSetupFailed(store,
                       strCat("ring: rank ", rank_, " stops waiting for its TCP connections"));
    lock.lock();
  }
  if (broken_.load()) {
    throw CommError(strCat("ring: rank ", rank_, ": TCP set-up failed: ", brokenReason_));
  }
  if (!allIn()) {
    std::string missing;
    for (int ch = 0; ch < kChannels; ++ch) {
      for (int p : peers_) {
        if (!connected_[static_cast<size_t>(ch * size_ + p)]) {
          missing += strCat(missing.empty() ? "" : ", ", "rank ", p, " channel ", ch);
        }
      }
    }
    throw TimeoutError(strCat("ring: rank ", rank_, " (listening on ", listenAddress_,
                              ") timed out after ", opts_.timeout.count(),
                              " ms waiting for authenticated TCP connections: ", missing,
                              ". Are those ranks running, and can they reach this address? "
                              "(TORCH_RING_SOCKET_IFNAME picks the interface)"));
  }
}

bool TcpTransport::admit(int peer, int channel, const std::string& from, std::string* why) {
  if (peer < 0 || peer >= size_ || !isPeer_[peer]) {
    *why = strCat("rank ", peer, " is not connected to rank ", rank_, " over TCP");
    return false;
  }
  if (stopping_.load(std::memory_order_acquire)) {
    *why = "this rank is shutting down";
    return false;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  // The token proves membership of the job; the address pins which member: a process that
  // read the store (and so the token) still cannot take the place of a rank on another host.
  const std::string& expected = publishedIp_[static_cast<size_t>(peer)];
  std::string fromIp;
  int fromPort = 0;
  try {
    splitHostPort(from, "the connecting socket", &fromIp, &fromPort);
  } catch (const std::exception&) {
    fromIp.clear();
  }
  if (expected.empty()) {
    *why = strCat("claims rank ", peer, ", whose published address this rank does not know yet");
    return false;
  }
  if (!sameIpAddress(fromIp, expected)) {
    *why = strCat("claims rank ", peer, ", which published address ", expected,
                  ": connections of rank ", peer, " come only from there");
    return false;
  }
  if (connected_[static_cast<size_t>(channel * size_ + peer)]) {
    *why = strCat("rank ", peer, " already has an authenticated connection on channel ", channel,
                  " (a duplicate, or someone claiming its rank)");
    return false;
  }
  return true;
}

SendLink& TcpTransport::sendLink(Channel ch, int peer) {
  RING_ASSERT(peer >= 0 && peer < size_ && isPeer_[peer], "rank ", rank_,
              " has no TCP link to rank ", peer);
  return *send_[static_cast<size_t>(static_cast<int>(ch) * size_ + peer)];
}

RecvLink& TcpTransport::recvLink(Channel ch, int peer) {
  RING_ASSERT(peer >= 0 && peer < size_ && isPeer_[peer], "rank ", rank_,
              " has no TCP link from rank ", peer);
  return *recv_[static_cast<size_t>(static_cast<int>(ch) * size_ + peer)];
}

void TcpTransport::checkHealth(int peer) {
  if (aborted_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(mutex_);
    throw CommError(strCat("ring: rank ", rank_, ": the group was aborted: ", abortReason_));
  }
  if (broken_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(mutex_);
    throw CommError(strCat("ring: rank ", rank_, ": the group is broken: ", brokenReason_));
  }
  // (A wait on a link whose connection has ended is ended by the link itself: TcpLinkWait.)
  // Between collectives: a peer that is gone fails the next collective at once.
  if (peer == kHealthBetweenCalls && peerFailed_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(mutex_);
    throw CommError(strCat("ring: rank ", rank_, " cannot continue: ", firstPeerFailure_));
  }
}

void TcpTransport::recordBroken(const std::string& reason, bool propagate) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // First failure wins; the later ones are mostly its consequences.
    if (broken_.load(std::memory_order_relaxed)) return;
    brokenReason_ = reason;
    broken_.store(true, std::memory_order_release);
  }
  established_.notify_all();
  if (propagate) {
    propagate_.store(true, std::memory_order_release);
    wakeIo();
  }
}

void TcpTransport::markBroken(const std::string& reason) { recordBroken(reason, true); }

void TcpTransport::abortLocal(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (abortReason_.empty()) abortReason_ = reason;
  }
  // Waiters poll this between futex sleeps (at most one sleep slice later).
  aborted_.store(true, std::memory_order_release);
}

void TcpTransport::wakeIo() {
  uint64_t one = 1;
  // A full eventfd counter (EAGAIN) still wakes the thread: nothing to handle.
  ssize_t n = write(wakeFd_, &one, sizeof one);
  (void)n;
}

TcpStats TcpTransport::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

std::string TcpTransport::describeLink(int peer) const {
  const Connection* c =
      peer >= 0 && peer < size_ && isPeer_[peer] ? conns_[static_cast<size_t>(peer)].get() : nullptr;
  return strCat("rank ", rank_, " <-> rank ", peer, ": tcp ", listenAddress_, " <-> ",
                c != nullptr ? c->address : std::string("?"), " (", opts_.slots, " slots x ",
                opts_.slotBytes, " bytes, authenticated)");
}

}  // namespace ring
