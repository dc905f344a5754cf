// The I/O thread of the TCP transport: one epoll loop over the listener, the sockets still in
// their handshake, and the authenticated connections.
//
// Why one thread and non-blocking sockets: a blocking write to a peer whose receive slots are
// full would stall the reads that free slots elsewhere in the ring (each rank sends to one
// neighbour while it receives from the other); an event loop keeps every socket moving.
// Why level-triggered epoll: a socket is simply watched for what it can do next (EPOLLIN while
// receive slots are free, EPOLLOUT while a write is pending), so no readiness is ever lost
// between the loop's passes.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstring>

#include "common/errors.h"
#include "common/logging.h"
#include "transport/tcp/socket_util.h"
#include "transport/tcp/tcp_connection.h"
#include "transport/tcp/tcp_transport.h"

namespace ring {
namespace {

// epoll user data: what an event is about, in the top byte; an index below.
enum : uint64_t { kTagWake = 1, kTagListen = 2, kTagPending = 3, kTagConn = 4 };
uint64_t tag(uint64_t kind, uint64_t index) { return kind << 56 | index; }
constexpr uint64_t kIndexMask = (uint64_t{1} << 56) - 1;

// Frames gathered into one sendmsg(): enough to fill a socket buffer, few enough for the stack.
constexpr int kMaxIov = 16;
// Reads per connection and pass, so that one busy socket cannot starve the others.
constexpr int kReadsPerPass = 64;
// Log at most this many refused connections in full; then every 1000th, with the count.
constexpr int64_t kFullRejectLogs = 20;

// A peer's broken notice is shown to users: keep it printable and on one line.
std::string printable(const uint8_t* p, int64_t n) {
  std::string s(reinterpret_cast<const char*>(p), static_cast<size_t>(n));
  for (char& c : s) {
    if (c < 32 || c > 126) c = '?';
  }
  return s;
}

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
    // or shutdown. Looking at every connection is cheaper than tracking which.
    adoptNew();
    if (propagate_.exchange(false, std::memory_order_acq_rel)) queueBrokenNotices();
    for (auto& cp : conns_) {
      if (!cp || cp->fd < 0) continue;
      writeConnection(*cp);
      if (cp->readPaused) readConnection(*cp);
      updateInterest(*cp);
    }
  }
  expirePending();
}

// ---- accepting strangers and peers -------------------------------------------------------------

void TcpTransport::acceptAll() {
  while (true) {
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

void TcpTransport::onPendingReadable(uint64_t id) {
  auto it = pending_.find(id);
  if (it == pending_.end()) return;
  PendingHandshake& p = *it->second;
  std::string error;
  auto admitFn = [this](int peer, int channel, std::string* why) {
    return admit(peer, channel, why);
  };
  PendingHandshake::Step step = p.onReadable(identity_, admitFn, &error);
  if (step == PendingHandshake::Step::NeedMore) return;
  // Admitted at its hello, but a twin may have authenticated since: check again.
  if (step == PendingHandshake::Step::Authenticated && !admit(p.peer(), p.channel(), &error)) {
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
    RING_LOG(kLogWarn, "rank ", rank_, " (", listenAddress_, "): refused a TCP connection from ",
             address, ": ", why, " (", n, " refused so far; the job goes on)");
  }
}

void TcpTransport::establish(int fd, int peer, int channel, const std::string& address) {
  Connection& c = conn(channel, peer);
  c.fd = fd;
  c.address = address;
  updateInterest(c);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    connected_[static_cast<size_t>(channel * size_ + peer)] = 1;
  }
  established_.notify_all();
  RING_LOG(kLogTrace, "rank ", rank_, ": TCP link with rank ", peer, " channel ", channel, " (",
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

// ---- connections ---------------------------------------------------------------------------

void TcpTransport::updateInterest(Connection& c) {
  if (c.fd < 0) return;
  uint32_t want = 0;
  if (!c.eof && !c.readPaused) want |= EPOLLIN;
  if (c.writeBlocked) want |= EPOLLOUT;
  if (want == c.interest) return;
  // Interest 0 means unregistered: a registered socket reports EPOLLHUP/EPOLLERR whatever we
  // ask for, which would spin the loop while its receive slots are full.
  epoll_event ev{};
  ev.events = want;
  ev.data.u64 = tag(kTagConn, static_cast<uint64_t>(c.channel * size_ + c.peer));
  int op = want == 0 ? EPOLL_CTL_DEL : c.interest == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD;
  RING_SYSCHECK(epoll_ctl(epollFd_, op, c.fd, want == 0 ? nullptr : &ev),
                "epoll_ctl for the connection to rank ", c.peer);
  c.interest = want;
}

void TcpTransport::closeConnection(Connection& c) {
  if (c.fd < 0) return;
  if (c.interest != 0) epoll_ctl(epollFd_, EPOLL_CTL_DEL, c.fd, nullptr);
  close(c.fd);
  c.fd = -1;
  c.interest = 0;
}

void TcpTransport::connectionFailed(Connection& c, const std::string& what) {
  bool quiet = c.goodbyeReceived || stopping_.load(std::memory_order_acquire) ||
               broken_.load(std::memory_order_acquire);
  if (!quiet) {
    std::string reason = strCat("rank ", c.peer, " (", c.address, ") ", what);
    RING_LOG(kLogWarn, "rank ", rank_, ": ", reason);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (firstPeerFailure_.empty()) firstPeerFailure_ = reason;
    }
    peerFailed_.store(true, std::memory_order_release);
    // The reason first, then the state (release): a waiter that sees Failed reads it whole.
    for (LinkEndState* s : {&c.recv->endState, &c.send->endState}) {
      if (s->end.load(std::memory_order_relaxed) != LinkEnd::Open) continue;
      s->reason = reason;
      s->end.store(LinkEnd::Failed, std::memory_order_release);
    }
  }
  closeConnection(c);
}

void TcpTransport::queueControl(Connection& c, uint32_t magic, const std::string& text) {
  // Same 64-byte layout as a data header; the text (at most kMaxReasonBytes) follows.
  size_t n = text.size() < static_cast<size_t>(kMaxReasonBytes) ? text.size()
                                                                 : static_cast<size_t>(kMaxReasonBytes);
  MessageHeader h{};
  h.magic = magic;
  h.sender = rank_;
  h.payloadBytes = static_cast<int64_t>(n);
  c.control.resize(sizeof h + n);
  std::memcpy(c.control.data(), &h, sizeof h);
  if (n > 0) std::memcpy(c.control.data() + sizeof h, text.data(), n);
  c.controlOffset = 0;
  if (magic == kBrokenMagic) c.brokenSent = true;
  if (magic == kGoodbyeMagic) c.goodbyeSent = true;
}

void TcpTransport::queueBrokenNotices() {
  std::string reason;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    reason = brokenReason_;
  }
  for (auto& cp : conns_) {
    if (!cp || cp->fd < 0 || cp->brokenSent || cp->goodbyeSent) continue;
    queueControl(*cp, kBrokenMagic, reason);
  }
}

void TcpTransport::writeConnection(Connection& c) {
  while (c.fd >= 0 && !c.finSent) {
    // 1. A queued control frame goes out at the next frame boundary, before any later data.
    if (!c.control.empty() && c.writeOffset == 0) {
      ssize_t n = ::send(c.fd, c.control.data() + c.controlOffset,
                         c.control.size() - c.controlOffset, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
          c.writeBlocked = true;
          return;
        }
        connectionFailed(c, strCat("failed: sending to it gave ", std::strerror(errno)));
        return;
      }
      c.controlOffset += static_cast<size_t>(n);
      if (c.controlOffset < c.control.size()) continue;
      c.control.clear();
      if (c.goodbyeSent) {
        // Nothing follows a goodbye: the FIN tells the peer the stream ended in order.
        shutdown(c.fd, SHUT_WR);
        c.finSent = true;
      }
      c.writeBlocked = false;
      return;
    }
    // 2. Data frames: after a control frame only the rest of a half-written frame may follow.
    const bool dataClosed = c.brokenSent || c.goodbyeSent;
    if (dataClosed && c.writeOffset == 0) {
      c.writeBlocked = false;
      return;
    }
    TcpSendLink& link = *c.send;
    uint64_t published = link.published.load(std::memory_order_acquire);
    if (c.writeFrame >= published) {
      // Idle: say so, then look again (pairs with publish(): store count, then exchange flag).
      link.ioIdle.store(true, std::memory_order_seq_cst);
      if (link.published.load(std::memory_order_seq_cst) > c.writeFrame) {
        link.ioIdle.store(false, std::memory_order_relaxed);
        continue;
      }
      c.writeBlocked = false;
      return;
    }
    iovec iov[kMaxIov];
    int count = 0;
    uint64_t last = dataClosed ? c.writeFrame + 1 : published;
    for (uint64_t f = c.writeFrame; f < last && count < kMaxIov; ++f, ++count) {
      char* base = link.ring().slot(f);
      const MessageHeader* h = reinterpret_cast<const MessageHeader*>(base);
      // Our own executor filled this header; a bad length here is a bug, caught before it
      // turns into a stream the peer cannot parse.
      if (h->magic != kMessageMagic || h->payloadBytes < 0 || h->payloadBytes > link.capacity()) {
        recordBroken(strCat("internal error: rank ", rank_, " published a frame to rank ", c.peer,
                            " with magic 0x", std::hex, h->magic, std::dec, " and ",
                            h->payloadBytes, " payload bytes (capacity ", link.capacity(), ")"),
                     true);
        c.writeBlocked = false;
        return;
      }
      size_t frameBytes = sizeof(MessageHeader) + static_cast<size_t>(h->payloadBytes);
      size_t skip = f == c.writeFrame ? c.writeOffset : 0;
      iov[count].iov_base = base + skip;
      iov[count].iov_len = frameBytes - skip;
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(count);
    ssize_t n = ::sendmsg(c.fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        c.writeBlocked = true;
        return;
      }
      connectionFailed(c, strCat("failed: sending to it gave ", std::strerror(errno)));
      return;
    }
    // Walk the written bytes over the frames: whole frames free their slots.
    size_t left = static_cast<size_t>(n);
    uint64_t before = c.writeFrame;
    for (int i = 0; i < count && left > 0; ++i) {
      if (left >= iov[i].iov_len) {
        left -= iov[i].iov_len;
        ++c.writeFrame;
        c.writeOffset = 0;
      } else {
        c.writeOffset += left;
        left = 0;
      }
    }
    if (c.writeFrame != before) {
      // Release: the kernel has copied the bytes; the executor may overwrite the slots.
      publishCounter(link.written, c.writeFrame, link.writtenSleepers);
    }
  }
}

void TcpTransport::readConnection(Connection& c) {
  for (int pass = 0; pass < kReadsPerPass && c.fd >= 0 && !c.eof; ++pass) {
    if (stopping_.load(std::memory_order_acquire)) {
      // Shutting down: nobody will consume, but a peer still flushing must not be held back.
      uint8_t scratch[65536];
      ssize_t n = ::recv(c.fd, scratch, sizeof scratch, MSG_DONTWAIT);
      if (n == 0) c.eof = true;
      if (n < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) c.eof = true;
      if (n <= 0) return;
      continue;
    }
    TcpRecvLink& link = *c.recv;
    const uint64_t slots = static_cast<uint64_t>(link.ring().slots());
    if (c.readFrame - link.consumed.load(std::memory_order_acquire) >= slots) {
      // Every slot holds an unconsumed frame: stop reading (TCP's window now holds the sender
      // back). Set the flag, then look again (pairs with release(): store count, load flag).
      link.ioPaused.store(true, std::memory_order_seq_cst);
      if (c.readFrame - link.consumed.load(std::memory_order_seq_cst) >= slots) {
        c.readPaused = true;
        return;
      }
      link.ioPaused.store(false, std::memory_order_relaxed);
    }
    c.readPaused = false;
    char* base = link.ring().slot(c.readFrame);
    MessageHeader* header = reinterpret_cast<MessageHeader*>(base);
    uint8_t* payload = reinterpret_cast<uint8_t*>(base + sizeof(MessageHeader));
    ReadTarget t = c.reader.target(header, payload, c.reason);
    ssize_t n = ::recv(c.fd, t.dst, t.bytes, MSG_DONTWAIT);
    if (n == 0) {
      c.eof = true;
      if (c.goodbyeReceived) {
        closeConnection(c);
      } else {
        connectionFailed(c, c.reader.atBoundary()
                                ? "closed its connection (its process exited or was killed, "
                                  "or its host or network failed)"
                                : "closed its connection in the middle of a frame");
      }
      return;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      connectionFailed(c, strCat("failed: receiving from it gave ", std::strerror(errno)));
      return;
    }
    std::string error;
    ReadStatus st = c.reader.advance(static_cast<size_t>(n), *header, &error);
    if (st == ReadStatus::Data && c.goodbyeReceived) {
      st = ReadStatus::Invalid;
      error = "data frame after its goodbye";
    }
    switch (st) {
      case ReadStatus::NeedMore:
        break;
      case ReadStatus::Data:
        ++c.readFrame;
        // Release: the frame's bytes are in the slot before the executor sees the count.
        publishCounter(link.arrived, c.readFrame, link.arrivedSleepers);
        break;
      case ReadStatus::Goodbye:
        c.goodbyeReceived = true;
        // Release: every frame of this connection was published before (same thread).
        c.recv->endState.end.store(LinkEnd::Goodbye, std::memory_order_release);
        c.send->endState.end.store(LinkEnd::Goodbye, std::memory_order_release);
        break;
      case ReadStatus::Broken:
        recordBroken(strCat("rank ", c.peer, " (", c.address, ") reported: ",
                            printable(c.reason, c.reader.reasonBytes())),
                     false);
        break;
      case ReadStatus::Invalid: {
        {
          std::lock_guard<std::mutex> lock(mutex_);
          ++stats_.invalidFrames;
        }
        // A peer that breaks the protocol cannot be trusted with anything further: the whole
        // group is broken (and told so), not just this link.
        std::string what = strCat("sent an invalid frame (", error, "); connection dropped");
        connectionFailed(c, what);
        recordBroken(strCat("rank ", c.peer, " (", c.address, ") ", what), true);
        return;
      }
    }
  }
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
      if (c.writeFrame >= c.send->published.load(std::memory_order_acquire) &&
          c.writeOffset == 0) {
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
