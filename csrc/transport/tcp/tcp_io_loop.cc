// The I/O thread of the TCP transport: one epoll loop over the listener, the sockets still in
// their handshake, and the authenticated connections.
//
// Why one thread and non-blocking sockets: a blocking write to a peer whose receive slots are
// full would stall the reads that free slots elsewhere in the ring (each rank sends to one
// neighbour while it receives from the other); an event loop keeps every socket moving.
// Why level-triggered epoll: a socket is simply watched for what it can do next (EPOLLIN while
// receive slots are free, EPOLLOUT while a write is pending), so no readiness is ever lost
// between the loop's passes. The frames' reads and writes on each connection:
// tcp_connection_io.cc.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "common/errors.h"
#include "common/logging.h"
#include "transport/tcp/socket_util.h"
#include "transport/tcp/tcp_connection.h"
#include "transport/tcp/tcp_io_shared.h"
#include "transport/tcp/tcp_transport.h"

namespace ring {

using namespace tcp_io;  // the epoll tags and SocketGuard

namespace {

// Log at most this many refused connections in full; then every 1000th, with the count.
constexpr int64_t kFullRejectLogs = 20;

}  // namespace

void TcpTransport::ioRegisterFixed() {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = tag(kTagWake, 0);
  RING_SYSCHECK(epoll_ctl(epollFd_, EPOLL_CTL_ADD, wakeFd_, &ev), "epoll_ctl(wake)");
  ev.data.u64 = tag(kTagListen, 0);
  RING_SYSCHECK(epoll_ctl(epollFd_, EPOLL_CTL_ADD, listenFd_, &ev), "epoll_ctl(listener)");
}

void TcpTransport::ioLoop() {
  while (true) {
    try {
      ioStep();
      if (stopping_.load(std::memory_order_acquire) && stopStep()) break;
    } catch (const std::exception& e) {
      // Never out of this thread: an exception here would terminate the process.
      recordBroken(strCat("the TCP I/O thread of rank ", rank_, " failed: ", e.what()), true);
      if (stopping_.load(std::memory_order_acquire)) break;
    }
  }
  closeAll();
}

void TcpTransport::ioStep() {
  epoll_event events[64];
  // The timeout only bounds how late handshake and shutdown deadlines are noticed.
  int n = epoll_wait(epollFd_, events, 64, 100);
  if (n < 0) {
    if (errno == EINTR) return;
    throw CommError(strCat("epoll_wait failed: ", std::strerror(errno)));
  }
  bool wakeAll = false;
  for (int i = 0; i < n; ++i) {
    uint64_t kind = events[i].data.u64 >> 56;
    uint64_t index = events[i].data.u64 & kIndexMask;
    if (kind == kTagWake) {
      uint64_t count;
      ssize_t r = read(wakeFd_, &count, sizeof count);  // resets the counter
      (void)r;
      wakeAll = true;
    } else if (kind == kTagListen) {
      acceptAll();
    } else if (kind == kTagPending) {
      onPendingReadable(index);
    } else if (kind == kTagConn && index < conns_.size() && conns_[index]) {
      Connection& c = *conns_[index];
      if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) readConnection(c);
      if (events[i].events & (EPOLLOUT | EPOLLERR)) writeConnection(c);
      updateInterest(c);
    }
  }
  if (wakeAll) {
    // A wake means: a link got work (publish / release), a socket to adopt, a notice to send,
    // the listener to close, or shutdown. Looking at every connection is cheaper than tracking
    // which.
    adoptNew();
    if (closeListenerRequested_.load(std::memory_order_acquire)) ioCloseListener();
    if (propagate_.exchange(false, std::memory_order_acq_rel)) queueBrokenNotices();
    for (auto& cp : conns_) {
      if (!cp || cp->fd < 0) continue;
      writeConnection(*cp);
      if (cp->readPaused) readConnection(*cp);
      updateInterest(*cp);
    }
  }
  expirePending();
  watchLiveness();
}

// ---- accepting strangers and peers -------------------------------------------------------------

void TcpTransport::acceptAll() {
  while (listenFd_ >= 0) {
    int fd = accept4(listenFd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        // Out of descriptors (EMFILE) and the like: the socket stays in the backlog and is
        // retried at the next pass; say so once in a while.
        reject("?", strCat("accept failed: ", std::strerror(errno)));
      }
      return;
    }
    std::string address = peerAddress(fd);
    if (stopping_.load(std::memory_order_acquire)) {
      close(fd);
      continue;
    }
    // The cap bounds what strangers can hold. The oldest pending socket goes first: a real
    // peer's handshake takes a round trip, a squatter's lasts until its deadline.
    if (pending_.size() >= opts_.maxPendingHandshakes) {
      auto oldest = pending_.begin();
      {
        std::lock_guard<std::mutex> lock(mutex_);
        ++stats_.droppedPending;
      }
      reject(oldest->second->address(),
             strCat("dropped unauthenticated: more than ", opts_.maxPendingHandshakes,
                    " connections were pending at once"));
      epoll_ctl(epollFd_, EPOLL_CTL_DEL, oldest->second->fd(), nullptr);
      close(oldest->second->fd());
      pending_.erase(oldest);
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    uint64_t id = nextPendingId_++;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = tag(kTagPending, id);
    if (epoll_ctl(epollFd_, EPOLL_CTL_ADD, fd, &ev) < 0) {
      reject(address, strCat("epoll_ctl failed: ", std::strerror(errno)));
      close(fd);
      continue;
    }
    pending_[id] = std::make_unique<PendingHandshake>(fd, address,
                                                      Clock::now() + opts_.handshakeTimeout);
  }
}

void TcpTransport::ioCloseListener() {
  if (listenFd_ >= 0) {
    epoll_ctl(epollFd_, EPOLL_CTL_DEL, listenFd_, nullptr);
    close(listenFd_);
    listenFd_ = -1;
    // Whatever is still in a handshake now can only be a stranger or a late duplicate.
    for (auto& entry : pending_) {
      reject(entry.second->address(), "every link of this rank is up: the listener is closed");
      epoll_ctl(epollFd_, EPOLL_CTL_DEL, entry.second->fd(), nullptr);
      close(entry.second->fd());
    }
    pending_.clear();
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    listenerClosed_ = true;
  }
  listenerClosedCv_.notify_all();
}

void TcpTransport::onPendingReadable(uint64_t id) {
  auto it = pending_.find(id);
  if (it == pending_.end()) return;
  PendingHandshake& p = *it->second;
  std::string error;
  auto admitFn = [this, &p](int peer, int channel, std::string* why) {
    return admit(peer, channel, p.address(), why);
  };
  PendingHandshake::Step step = p.onReadable(identity_, admitFn, &error);
  if (step == PendingHandshake::Step::NeedMore) return;
  // Admitted at its hello, but a twin may have authenticated since: check again.
  if (step == PendingHandshake::Step::Authenticated &&
      !admit(p.peer(), p.channel(), p.address(), &error)) {
    step = PendingHandshake::Step::Rejected;
  }
  int fd = p.fd();
  if (step == PendingHandshake::Step::Rejected) {
    reject(p.address(), error);
    epoll_ctl(epollFd_, EPOLL_CTL_DEL, fd, nullptr);
    close(fd);
  } else {
    // The socket moves from the pending table to its connection; re-registered there.
    epoll_ctl(epollFd_, EPOLL_CTL_DEL, fd, nullptr);
    establish(fd, p.peer(), p.channel(), p.address());
  }
  pending_.erase(it);
}

void TcpTransport::expirePending() {
  auto now = Clock::now();
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (now < it->second->deadline() && !stopping_.load(std::memory_order_acquire)) {
      ++it;
      continue;
    }
    if (now >= it->second->deadline()) {
      reject(it->second->address(), strCat("the handshake did not complete within ",
                                           opts_.handshakeTimeout.count(), " ms"));
    }
    epoll_ctl(epollFd_, EPOLL_CTL_DEL, it->second->fd(), nullptr);
    close(it->second->fd());
    it = pending_.erase(it);
  }
}

void TcpTransport::reject(const std::string& address, const std::string& why) {
  int64_t n;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    n = ++stats_.rejectedHandshakes;
  }
  if (n <= kFullRejectLogs || n % 1000 == 0) {
    RING_LOG(kLogWarn, "listening on ", listenAddress_, ": refused a TCP connection from ",
             address, ": ", why, " (", n, " refused so far; the job goes on)");
  }
}

void TcpTransport::establish(int fd, int peer, int channel, const std::string& address) {
  Connection& c = conn(channel, peer);
  {
    // Both sides: executors read fd under either lock (always write before read).
    SocketGuard writeGuard(c.writeLock);
    SocketGuard readGuard(c.readLock);
    c.fd = fd;
  }
  c.address = address;
  liveness_.watch(peer, Clock::now());
  updateInterest(c);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    connected_[static_cast<size_t>(channel * size_ + peer)] = 1;
  }
  established_.notify_all();
  RING_LOG(kLogTrace, "TCP link with rank ", peer, " channel ", channel, " (",
           address, ") authenticated");
  writeConnection(c);
  readConnection(c);
  updateInterest(c);
}

void TcpTransport::adoptNew() {
  std::deque<std::pair<int, std::pair<int, int>>> fresh;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    fresh.swap(adopt_);
  }
  for (auto& a : fresh) establish(a.first, a.second.first, a.second.second, peerAddress(a.first));
}

// ---- shutdown --------------------------------------------------------------------------------

bool TcpTransport::stopStep() {
  // A broken or aborted group has nothing left to deliver in order.
  if (broken_.load(std::memory_order_acquire) || aborted_.load(std::memory_order_acquire) ||
      Clock::now() >= stopDeadline_) {
    return true;
  }
  bool done = true;
  for (auto& cp : conns_) {
    if (!cp || cp->fd < 0) continue;
    Connection& c = *cp;
    if (!c.goodbyeSent) {
      // Every published frame first (a root that returned from broadcast may not have sent
      // all of it yet), then the goodbye.
      bool flushed;
      {
        SocketGuard guard(c.writeLock);  // an executor may still be writing its last frame
        flushed = c.writeFrame >= c.send->published.load(std::memory_order_acquire) &&
                  c.writeOffset == 0;
      }
      if (flushed) {
        queueControl(c, kGoodbyeMagic, "");
        writeConnection(c);
        updateInterest(c);
      }
    }
    if (!c.finSent) done = false;
  }
  return done;
}

void TcpTransport::closeAll() {
  for (auto& p : pending_) close(p.second->fd());
  pending_.clear();
  for (auto& cp : conns_) {
    if (!cp || cp->fd < 0) continue;
    // Read what already arrived, so that close() sends a plain FIN rather than a reset that
    // could cut off our own last frames on their way to the peer.
    uint8_t scratch[65536];
    while (::recv(cp->fd, scratch, sizeof scratch, MSG_DONTWAIT) > 0) {
    }
    closeConnection(*cp);
  }
}

}  // namespace ring
