// The TCP transport's liveness, run by its I/O thread: a heartbeat on every connection that has
// carried nothing else for kHeartbeatEvery, and the judgement of the peers from which nothing at
// all has come for the bound (link_liveness.h says why silence, and why this thread).
#include <cstdio>
#include <string>
#include <vector>

#include "common/errors.h"
#include "transport/tcp/net_address.h"
#include "transport/tcp/tcp_connection.h"
#include "transport/tcp/tcp_transport.h"

namespace ring {

namespace {

// How often the I/O thread looks; its epoll wait returns at least this often anyway.
constexpr std::chrono::milliseconds kLivenessPass{100};

std::string secondsText(Clock::duration d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", std::chrono::duration<double>(d).count());
  return buf;
}

std::string ipOf(const std::string& address) {
  std::string ip;
  int port = 0;
  try {
    splitHostPort(address, "a peer's address", &ip, &port);
  } catch (const std::exception&) {
    return address;
  }
  return ip;
}

}  // namespace

void TcpTransport::watchLiveness() {
  const Clock::time_point now = Clock::now();
  if (now - lastLivenessPass_ < kLivenessPass) return;
  lastLivenessPass_ = now;
  // A group that stops, broke or was aborted sends nothing but its notices, and its waits end
  // on their own: nothing to judge.
  if (stopping_.load(std::memory_order_acquire) || broken_.load(std::memory_order_acquire) ||
      aborted_.load(std::memory_order_acquire)) {
    return;
  }
  liveness_.passBegins(now);
  std::vector<char> open(static_cast<size_t>(size_), 0);
  for (auto& cp : conns_) {
    if (!cp || cp->fd < 0) continue;
    Connection& c = *cp;
    if (c.goodbyeReceived || c.eof) continue;  // it ended in order, or its end is being read
    open[static_cast<size_t>(c.peer)] = 1;
    // Frames an executor read itself count as much as the bytes this thread read; and while
    // every receive slot is full this rank holds the peer's data unread, so it waits for
    // nothing from it (and the peer's heartbeats wait in the socket behind that data).
    const uint64_t arrived = c.recv->arrived.load(std::memory_order_acquire);
    if (c.heardSincePass || arrived != c.arrivedAtPass || c.readPaused) {
      liveness_.heard(c.peer, now);
    }
    c.heardSincePass = false;
    c.arrivedAtPass = arrived;
    sendHeartbeatIfIdle(c, now);
  }
  for (int p : peers_) {
    if (!open[static_cast<size_t>(p)]) liveness_.forget(p);
  }
  const std::vector<int> silent = liveness_.silent(now);
  if (!silent.empty()) failSilentPeers(silent, now);
}

void TcpTransport::sendHeartbeatIfIdle(Connection& c, Clock::time_point now) {
  if (now - c.lastBeat < kHeartbeatEvery) return;
  c.lastBeat = now;
  // A data frame that went out since the last look told the peer as much as a heartbeat would.
  const uint64_t written = c.send->written.load(std::memory_order_acquire);
  if (written != c.writtenAtBeat) {
    c.writtenAtBeat = written;
    return;
  }
  // Nothing may follow a goodbye or a broken notice, and a control frame already queued will
  // do (only this thread queues them, so reading these without the write lock is safe).
  if (c.finSent || c.brokenSent || c.goodbyeSent || !c.control.empty()) return;
  queueControl(c, kHeartbeatMagic, "");
  writeConnection(c);
  updateInterest(c);
}

void TcpTransport::failSilentPeers(const std::vector<int>& silent, Clock::time_point now) {
  // Ranks of one host go silent together when it freezes or its link is cut, though not in the
  // same pass (each was last heard at its own time): naming the others at the peer's address
  // that are well on their way tells a host's failure from one process's.
  std::vector<std::string> ip(static_cast<size_t>(size_));
  for (int p : peers_) {
    for (int ch = 0; ch < kChannels && ip[static_cast<size_t>(p)].empty(); ++ch) {
      const Connection& c = conn(ch, p);
      if (c.fd >= 0 && !c.goodbyeReceived && !c.eof) ip[static_cast<size_t>(p)] = ipOf(c.address);
    }
  }
  const std::string myIp = ipOf(listenAddress_);
  for (int p : silent) {
    const std::string& at = ip[static_cast<size_t>(p)];
    std::string alsoSilent;
    for (int q : peers_) {
      if (q == p || ip[static_cast<size_t>(q)] != at) continue;
      const Clock::duration quiet = liveness_.silentFor(q, now);
      if (quiet < liveness_.bound() / 2) continue;
      alsoSilent += strCat(alsoSilent.empty() ? "; also silent at that address: " : ", ",
                           "rank ", q, " for ", secondsText(quiet), " s");
    }
    const std::string what = strCat(
        "has sent nothing for ", secondsText(liveness_.silentFor(p, now)),
        " s, not even the heartbeat the TCP I/O thread of a live rank sends every ",
        kHeartbeatEvery.count(), " ms: its host (", at, ") is down or frozen, or the network "
        "between ", myIp, " and ", at, " is cut", alsoSilent,
        " (TORCH_RING_LINK_SILENCE_MS=", liveness_.bound().count(),
        "; 0 leaves such a peer to the group's timeout)");
    bool logged = false;
    for (int ch = 0; ch < kChannels; ++ch) {
      Connection& c = conn(ch, p);
      if (c.fd < 0) continue;
      connectionFailed(c, what, !logged);
      logged = true;
    }
    liveness_.forget(p);
  }
}

}  // namespace ring
