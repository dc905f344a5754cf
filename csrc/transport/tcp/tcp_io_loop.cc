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
#include <thread>

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

// The I/O thread's hold on one side (Connection::writeLock or readLock) of a connection. An
// executor holds a side only for a few non-blocking calls, so waiting is short; yielding lets
// that executor finish when it shares our core.
class SocketGuard {
 public:
  explicit SocketGuard(std::atomic<bool>& lock) : lock_(lock) {
    // acquire: the executor's writes to the write state are visible once we hold the lock.
    while (lock_.exchange(true, std::memory_order_acquire)) std::this_thread::yield();
  }
  ~SocketGuard() { lock_.store(false, std::memory_order_release); }
  SocketGuard(const SocketGuard&) = delete;
  SocketGuard& operator=(const SocketGuard&) = delete;

 private:
  std::atomic<bool>& lock_;
};

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
  // Under both locks (write before read, as everywhere): an executor in the middle of a
  // send() or recv() on this fd finishes first, and a later one sees -1 rather than a number
  // the kernel may have reused.
  SocketGuard writeGuard(c.writeLock);
  SocketGuard readGuard(c.readLock);
  close(c.fd);
  c.fd = -1;
  c.interest = 0;
}

void TcpTransport::connectionFailed(Connection& c, const std::string& what) {
  bool quiet = c.goodbyeReceived || stopping_.load(std::memory_order_acquire) ||
               broken_.load(std::memory_order_acquire);
  if (!quiet) {
    std::string reason = strCat("rank ", c.peer, " (", c.address, ") ", what);
    RING_LOG(kLogWarn, reason);
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
  // The control state is write state: an executor checks it before writing a frame itself.
  SocketGuard guard(c.writeLock);
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
  std::string failure;
  {
    SocketGuard guard(c.writeLock);
    writeLocked(c, &failure);
  }
  // Outside the lock: failing closes the connection, which takes the lock itself.
  if (!failure.empty()) connectionFailed(c, failure);
}

bool TcpTransport::tryWriteInline(int channel, int peer) {
  Connection& c = conn(channel, peer);
  // Try once: if the I/O thread holds the lock it is writing this link and will pick up our
  // frame (or go idle, which publish() then sees and wakes it).
  if (c.writeLock.exchange(true, std::memory_order_acquire)) return false;
  TcpSendLink& link = *c.send;
  bool whole = false;
  // Only the plain case: the frame just published is the only one not yet out, nothing is half
  // written, blocked, or queued ahead of it. Everything else keeps the I/O thread's order.
  const uint64_t published = link.published.load(std::memory_order_acquire);
  if (c.fd >= 0 && !c.finSent && !c.brokenSent && !c.goodbyeSent && c.control.empty() &&
      !c.writeBlocked && c.writeOffset == 0 && c.writeFrame + 1 == published) {
    const char* base = link.ring().slot(c.writeFrame);
    const MessageHeader* h = reinterpret_cast<const MessageHeader*>(base);
    // A bad header is left to the I/O thread, which reports it (never sent from here).
    if (h->magic == kMessageMagic && h->payloadBytes >= 0 && h->payloadBytes <= link.capacity()) {
      // Header and payload are contiguous in the slot: one send() writes the frame.
      size_t bytes = sizeof(MessageHeader) + static_cast<size_t>(h->payloadBytes);
      ssize_t n;
      do {
        n = ::send(c.fd, base, bytes, MSG_NOSIGNAL | MSG_DONTWAIT);
      } while (n < 0 && errno == EINTR);
      // EAGAIN and errors: nothing went out; the I/O thread retries and reports an error with
      // the connection's context. A partial write: the I/O thread sends the rest.
      if (n > 0) {
        if (static_cast<size_t>(n) == bytes) {
          ++c.writeFrame;
          whole = true;
        } else {
          c.writeOffset = static_cast<size_t>(n);
        }
      }
    }
  }
  // Release (inside): the kernel has copied the frame; the slot may be filled again. Still
  // under the lock, so that `written` never goes back past a later count of the I/O thread.
  if (whole) publishCounter(link.written, c.writeFrame, link.writtenSleepers);
  c.writeLock.store(false, std::memory_order_release);
  return whole;
}

void TcpTransport::writeLocked(Connection& c, std::string* failure) {
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
        *failure = strCat("failed: sending to it gave ", std::strerror(errno));
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
      *failure = strCat("failed: sending to it gave ", std::strerror(errno));
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

void TcpTransport::tryReadInline(int channel, int peer, uint64_t target) {
  Connection& c = conn(channel, peer);
  // Try once: if the I/O thread holds the lock it is reading this socket already.
  if (c.readLock.exchange(true, std::memory_order_acquire)) return;
  TcpRecvLink& link = *c.recv;
  const uint64_t slots = static_cast<uint64_t>(link.ring().slots());
  for (int pass = 0; pass < kReadsPerPass && c.readFrame < target; ++pass) {
    if (c.fd < 0 || c.eof || c.goodbyeReceived || stopping_.load(std::memory_order_acquire)) {
      break;
    }
    // No free slot: the I/O thread's flow control (readPaused) decides when reading resumes.
    if (c.readFrame - link.consumed.load(std::memory_order_acquire) >= slots) break;
    if (!c.reader.inDataPayload()) {
      // Only whole, valid data headers are taken from here: peek first, and leave a control
      // frame, a bad header, a partial header or the end of the stream to the I/O thread,
      // which judges, reports and closes (this thread never does).
      if (!c.reader.atBoundary()) break;
      MessageHeader peek;
      ssize_t n = ::recv(c.fd, &peek, sizeof peek, MSG_PEEK | MSG_DONTWAIT);
      if (n != static_cast<ssize_t>(sizeof peek)) break;
      int64_t bytes = 0;
      std::string ignored;
      if (parseFrameHeader(peek, c.peer, link.ring().slotBytes(), &bytes, &ignored) !=
          ReadStatus::Data) {
        break;
      }
    }
    char* base = link.ring().slot(c.readFrame);
    MessageHeader* header = reinterpret_cast<MessageHeader*>(base);
    uint8_t* payload = reinterpret_cast<uint8_t*>(base + sizeof(MessageHeader));
    ReadTarget t = c.reader.target(header, payload, c.reason);
    ssize_t n = ::recv(c.fd, t.dst, t.bytes, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    // EAGAIN: nothing more yet. 0 (end of stream) and errors: the I/O thread sees them too.
    if (n <= 0) break;
    std::string error;
    ReadStatus st = c.reader.advance(static_cast<size_t>(n), *header, &error);
    if (st == ReadStatus::Data) {
      ++c.readFrame;
      // Release: the frame's bytes are in the slot before a waiter sees the count.
      publishCounter(link.arrived, c.readFrame, link.arrivedSleepers);
    } else if (st != ReadStatus::NeedMore) {
      // The header was checked before it was read, so this is a bug of ours, not the peer's.
      recordBroken(strCat("internal error: rank ", rank_, " read a frame from rank ", c.peer,
                          " that passed the header check and then failed it (", error, ")"),
                   true);
      break;
    }
  }
  c.readLock.store(false, std::memory_order_release);
}

void TcpTransport::readConnection(Connection& c) {
  ReadEnd end;
  {
    SocketGuard guard(c.readLock);
    readLocked(c, &end);
  }
  // Outside the lock: closing takes it itself.
  if (end.kind == ReadEnd::Closed) closeConnection(c);
  if (end.kind == ReadEnd::Failed) connectionFailed(c, end.what);
  if (end.invalidFrame) {
    // After connectionFailed, so that the peer's link ends say why (it is not yet "broken").
    recordBroken(strCat("rank ", c.peer, " (", c.address, ") ", end.what), true);
  }
}

void TcpTransport::readLocked(Connection& c, ReadEnd* end) {
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
        end->kind = ReadEnd::Closed;
      } else {
        end->kind = ReadEnd::Failed;
        end->what = c.reader.atBoundary()
                        ? "closed its connection (its process exited or was killed, "
                          "or its host or network failed)"
                        : "closed its connection in the middle of a frame";
      }
      return;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      end->kind = ReadEnd::Failed;
      end->what = strCat("failed: receiving from it gave ", std::strerror(errno));
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
        end->kind = ReadEnd::Failed;
        end->what = strCat("sent an invalid frame (", error, "); connection dropped");
        end->invalidFrame = true;
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
