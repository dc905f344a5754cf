// What the TCP transport's tests share (test_tcp_transport.cc, test_tcp_strangers.cc,
// test_tcp_liveness.cc): loopback options, a test wait context, a series of frames written and
// checked byte by byte, and a rank 0 played by hand (FakeRank0) that can send what no real rank
// would, or nothing at all.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include "memory_store.h"
#include "protocol/message_header.h"
#include "transport/link.h"
#include "transport/tcp/socket_util.h"
#include "transport/tcp/tcp_handshake.h"
#include "transport/tcp/tcp_transport.h"

namespace ring {
namespace tcp_testing {

using namespace std::chrono_literals;

inline TcpOptions loopbackOptions(int slots = 4, int64_t slotBytes = 1024) {
  TcpOptions o;
  o.groupName = "tcp-test";
  o.slots = slots;
  o.slotBytes = slotBytes;
  o.timeout = 20s;
  o.listenAddress = "127.0.0.1";
  return o;
}

inline std::vector<int> allBut(int n, int me) {
  std::vector<int> v;
  for (int r = 0; r < n; ++r) {
    if (r != me) v.push_back(r);
  }
  return v;
}

inline WaitContext waitFor(Transport& t, std::chrono::milliseconds timeout = 20s) {
  WaitContext c;
  c.start = Clock::now();
  c.timeout = timeout;
  c.deadline = c.start + timeout;
  c.describe = [] { return std::string("test transfer"); };
  c.checkHealth = [&t](int peer) { t.checkHealth(peer); };
  return c;
}

inline int64_t payloadSize(int64_t i, int64_t cap) { return (i * 37) % (cap + 1); }

inline void sendSeries(SendLink& link, int me, int64_t count, const WaitContext& ctx) {
  for (int64_t i = 0; i < count; ++i) {
    OutSlot s = link.acquire(ctx);
    int64_t n = payloadSize(i, link.capacity());
    for (int64_t k = 0; k < n; ++k) static_cast<uint8_t*>(s.payload)[k] = static_cast<uint8_t>(i + k);
    std::memset(s.header, 0, sizeof(MessageHeader));
    s.header->magic = kMessageMagic;
    s.header->sender = me;
    s.header->step = i;
    s.header->payloadBytes = n;
    link.publish();
  }
}

// Returns the first message that arrived out of order or damaged, or -1.
inline int64_t receiveSeries(RecvLink& link, int from, int64_t cap, int64_t count, const WaitContext& ctx) {
  for (int64_t i = 0; i < count; ++i) {
    InSlot s = link.receive(ctx);
    int64_t n = payloadSize(i, cap);
    if (s.header->sender != from || s.header->step != i || s.header->payloadBytes != n) return i;
    for (int64_t k = 0; k < n; ++k) {
      if (static_cast<const uint8_t*>(s.payload)[k] != static_cast<uint8_t>(i + k)) return i;
    }
    link.release();
  }
  return -1;
}

// Connects to `address` ("ip:port") and returns the socket.
inline int dial(const std::string& address) {
  std::string ip;
  int port = 0;
  splitHostPort(address, "test", &ip, &port);
  return connectTo(ip, port, Clock::now() + 5s);
}

// What rank 0 of a loopbackOptions() group of `size` ranks says in its handshakes.
inline HandshakeIdentity rank0Identity(int size, const HandshakeKey& key) {
  HandshakeIdentity me;
  me.groupHash = groupNameHash("tcp-test");
  me.rank = 0;
  me.groupSize = size;
  me.slotBytes = 1024;
  me.key = key;
  return me;
}

// Plays rank 0 of a 2-rank group by hand (token chosen by the test), so that it can send
// frames no real rank would; returns its two sockets once rank 1 has accepted them.
struct FakeRank0 {
  testing_support::MemoryStore& store;
  JobToken token{};
  int fds[kChannels] = {-1, -1};

  void connectAll(int64_t slotBytes) {
    fillRandom(token.data(), token.size());
    store.set("ring/tcp/token", toHex(token.data(), token.size()));
    // Rank 1 admits rank 0 only from the address rank 0 published.
    store.set("ring/tcp/addr/0", "127.0.0.1:1");
    std::string address = store.get("ring/tcp/ready/1", 20s);
    HandshakeIdentity me = rank0Identity(2, handshakeKey(token, ""));
    me.slotBytes = slotBytes;
    for (int ch = 0; ch < kChannels; ++ch) {
      fds[ch] = dial(address);
      std::string detail;
      ASSERT_EQ(authenticateAsConnector(fds[ch], me, 1, ch, Clock::now() + 5s, &detail),
                ConnectOutcome::Authenticated)
          << detail;
    }
  }
  ~FakeRank0() {
    for (int fd : fds) {
      if (fd >= 0) close(fd);
    }
  }
};

}  // namespace tcp_testing
}  // namespace ring
