// Frames on one connection of the TCP transport: the reads and writes the I/O thread
// (tcp_io_loop.cc) makes when epoll says a socket can move, and the ones an executor makes
// inline (tryWriteInline, tryReadInline) to save the I/O thread's wake-up on a small message;
// with a connection's interest in epoll, its control messages and its failure.
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

// Frames gathered into one sendmsg(): enough to fill a socket buffer, few enough for the stack.
constexpr int kMaxIov = 16;
// Reads per connection and pass, so that one busy socket cannot starve the others.
constexpr int kReadsPerPass = 64;

// A peer's broken notice is shown to users: keep it printable and on one line.
std::string printable(const uint8_t* p, int64_t n) {
  std::string s(reinterpret_cast<const char*>(p), static_cast<size_t>(n));
  for (char& c : s) {
    if (c < 32 || c > 126) c = '?';
  }
  return s;
}

}  // namespace

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

void TcpTransport::connectionFailed(Connection& c, const std::string& what, bool log) {
  bool quiet = c.goodbyeReceived || stopping_.load(std::memory_order_acquire) ||
               broken_.load(std::memory_order_acquire);
  if (!quiet) {
    std::string reason = strCat("rank ", c.peer, " (", c.address, ") ", what);
    if (log) RING_LOG(kLogWarn, reason);
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
        c.writeBlocked = false;
        return;
      }
      // On to the data: frames published while a heartbeat waited here may have found no
      // other thread to write them (publish() leaves them to this one). After a broken notice
      // the check below stops.
      continue;
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
    c.heardSincePass = true;  // any byte: the peer's host, process and the network are alive
    std::string error;
    ReadStatus st = c.reader.advance(static_cast<size_t>(n), *header, &error);
    if ((st == ReadStatus::Data || st == ReadStatus::Heartbeat) && c.goodbyeReceived) {
      st = ReadStatus::Invalid;
      error = "frame after its goodbye";
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
      case ReadStatus::Heartbeat:
        break;  // it counted as heard above
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

}  // namespace ring
