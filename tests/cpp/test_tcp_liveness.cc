// Liveness of TCP links (TORCH_RING_LINK_SILENCE_MS): the bookkeeping over given times, and the
// transport against a rank 0 played by hand. A peer that sends nothing at all is what a frozen
// host looks like from here (its kernel still acknowledges our bytes, so the socket stays open):
// it is named within the bound. A peer that sends only heartbeats is waited for, as long as the
// wait's own timeout allows. An idle real rank puts heartbeats on the wire for its peer to see.
// The same over real hosts (network namespaces, a cut link, SIGSTOP): tests/python/
// test_link_liveness.py.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "memory_store.h"
#include "rank_threads.h"
#include "tcp_test_support.h"
#include "transport/tcp/link_liveness.h"
#include "transport/tcp/socket_util.h"
#include "transport/tcp/tcp_transport.h"

namespace ring {
namespace {

using testing_support::MemoryStore;
using testing_support::runRanks;
using namespace std::chrono_literals;
using namespace tcp_testing;

// ---- the bookkeeping ---------------------------------------------------------------------

// Passes of the watching thread every 100 ms over (from, to].
void passes(LinkLiveness& l, Clock::time_point from, Clock::time_point to) {
  for (Clock::time_point t = from + 100ms; t <= to; t += 100ms) l.passBegins(t);
}

TEST(LinkLiveness, APeerIsSilentOnlyOnceTheBoundPassesWithoutNews) {
  const Clock::time_point t0 = Clock::now();
  LinkLiveness l(4, 1000ms);
  l.passBegins(t0);
  l.watch(1, t0);
  l.watch(2, t0);
  passes(l, t0, t0 + 900ms);
  l.heard(1, t0 + 600ms);
  passes(l, t0 + 900ms, t0 + 1000ms);
  EXPECT_TRUE(l.silent(t0 + 1000ms).empty());  // silent for exactly the bound: not yet
  l.passBegins(t0 + 1001ms);
  EXPECT_EQ(l.silent(t0 + 1001ms), std::vector<int>{2});
  EXPECT_EQ(l.silentFor(2, t0 + 1001ms), Clock::duration(1001ms));
  passes(l, t0 + 1000ms, t0 + 1700ms);
  EXPECT_EQ(l.silent(t0 + 1700ms), (std::vector<int>{1, 2}));  // 1: heard last at 600 ms
  l.forget(2);
  EXPECT_EQ(l.silent(t0 + 1700ms), std::vector<int>{1});
  // Rank 3 was never watched (no connection of it came up): never judged.
}

TEST(LinkLiveness, ABoundOfZeroJudgesNobody) {
  const Clock::time_point t0 = Clock::now();
  LinkLiveness l(2, 0ms);
  l.watch(1, t0);
  passes(l, t0, t0 + 5s);
  EXPECT_TRUE(l.silent(t0 + 1h).empty());
}

TEST(LinkLiveness, AWatcherThatDidNotRunBlamesNobodyForItsOwnGap) {
  const Clock::time_point t0 = Clock::now();
  LinkLiveness l(2, 1000ms);
  l.passBegins(t0);
  l.watch(1, t0);
  passes(l, t0, t0 + 500ms);
  // The watcher itself did not run for 2.5 s (a starved core, a suspended machine): it could
  // not have heard anything meanwhile, so the silence counts from its return.
  l.passBegins(t0 + 3000ms);
  EXPECT_TRUE(l.silent(t0 + 3000ms).empty());
  passes(l, t0 + 3000ms, t0 + 4000ms);
  EXPECT_TRUE(l.silent(t0 + 4000ms).empty());
  l.passBegins(t0 + 4100ms);
  EXPECT_EQ(l.silent(t0 + 4100ms), std::vector<int>{1});
}

// ---- the transport ---------------------------------------------------------------------------

TcpOptions withSilenceBound(std::chrono::milliseconds bound) {
  TcpOptions o = loopbackOptions();
  o.silenceBound = bound;
  return o;
}

double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

TEST(TcpLiveness, APeerThatSendsNothingIsNamedWithinTheBound) {
  MemoryStore store;
  FakeRank0 fake{store};
  std::thread rank0([&] { fake.connectAll(1024); });  // then silent, its sockets open
  TcpTransport t(store, 1, 2, {0}, withSilenceBound(1000ms));
  rank0.join();
  const Clock::time_point start = Clock::now();
  std::string error = "no error";
  try {
    WaitContext ctx = waitFor(t, 20s);
    t.recvLink(Channel::Collective, 0).receive(ctx);
  } catch (const CommError& e) {
    error = e.what();
  }
  const double took = secondsSince(start);
  EXPECT_GE(took, 0.9) << error;
  EXPECT_LT(took, 5.0) << error;  // the wait's own timeout is 20 s
  EXPECT_NE(error.find("rank 0 (127.0.0.1:"), std::string::npos) << error;
  EXPECT_NE(error.find("has sent nothing for 1."), std::string::npos) << error;
  EXPECT_NE(error.find("its host (127.0.0.1) is down or frozen"), std::string::npos) << error;
  EXPECT_NE(error.find("TORCH_RING_LINK_SILENCE_MS=1000"), std::string::npos) << error;
}

TEST(TcpLiveness, APeerThatSendsOnlyHeartbeatsIsWaitedFor) {
  MemoryStore store;
  FakeRank0 fake{store};
  std::thread rank0([&] {
    fake.connectAll(1024);
    // Late by 3 s, three times the bound, and alive all along: a heartbeat every 200 ms (a
    // real rank's I/O thread sends one every 250 ms), then the frame rank 1 waits for.
    MessageHeader beat{};
    beat.magic = kHeartbeatMagic;
    beat.sender = 0;
    const Clock::time_point until = Clock::now() + 3s;
    while (Clock::now() < until) {
      for (int fd : fake.fds) writeFull(fd, &beat, sizeof beat, Clock::now() + 5s);
      std::this_thread::sleep_for(200ms);
    }
    MessageHeader data{};
    data.magic = kMessageMagic;
    data.sender = 0;
    writeFull(fake.fds[0], &data, sizeof data, Clock::now() + 5s);
  });
  std::string error = "no error";
  Clock::time_point start;
  try {
    TcpTransport t(store, 1, 2, {0}, withSilenceBound(1000ms));
    start = Clock::now();
    WaitContext ctx = waitFor(t, 20s);
    InSlot s = t.recvLink(Channel::Collective, 0).receive(ctx);
    EXPECT_EQ(s.header->payloadBytes, 0);
    t.checkHealth(kHealthBetweenCalls);
  } catch (const std::exception& e) {
    error = e.what();
  }
  rank0.join();
  EXPECT_EQ(error, "no error");
  EXPECT_GE(secondsSince(start), 2.5);
}

TEST(TcpLiveness, AnIdleRankPutsHeartbeatsOnTheWire) {
  MemoryStore store;
  FakeRank0 fake{store};
  std::vector<MessageHeader> seen;
  int readError = 0;
  std::thread rank0([&] {
    fake.connectAll(1024);
    // Everything rank 1 sends in 1.6 s on the collective channel, whole headers only.
    const Clock::time_point until = Clock::now() + 1600ms;
    while (Clock::now() < until) {
      MessageHeader h{};
      readError = readFull(fake.fds[0], &h, sizeof h, until);
      if (readError != 0) break;
      seen.push_back(h);
    }
  });
  TcpTransport t(store, 1, 2, {0}, withSilenceBound(5000ms));
  rank0.join();
  EXPECT_EQ(readError, ETIMEDOUT);  // the stream stayed open and in frames
  // 1.6 s at one every 250 ms: six, give or take a pass of the I/O thread.
  EXPECT_GE(seen.size(), 4u);
  EXPECT_LE(seen.size(), 8u);
  for (const MessageHeader& h : seen) {
    EXPECT_EQ(h.magic, kHeartbeatMagic);
    EXPECT_EQ(h.sender, 1);
    EXPECT_EQ(h.payloadBytes, 0);
  }
}

TEST(TcpLiveness, TwoIdleRanksStayAliveThenTalk) {
  // Idle for 2.5 bounds: each one's heartbeats keep the other from judging it; then frames go
  // through as before (the heartbeats between them do not disturb the stream).
  MemoryStore store;
  std::string between;
  auto out = runRanks(2, [&](int rank) {
    TcpTransport t(store, rank, 2, {1 - rank}, withSilenceBound(1000ms));
    std::this_thread::sleep_for(2500ms);
    t.checkHealth(kHealthBetweenCalls);
    WaitContext ctx = waitFor(t);
    if (rank == 0) {
      sendSeries(t.sendLink(Channel::Collective, 1), 0, 200, ctx);
    } else {
      EXPECT_EQ(receiveSeries(t.recvLink(Channel::Collective, 0), 0, 1024, 200, ctx), -1);
    }
    std::this_thread::sleep_for(1500ms);  // and idle again after traffic
    t.checkHealth(kHealthBetweenCalls);
  });
  for (auto& o : out) EXPECT_TRUE(o.ok()) << o.message();
}

}  // namespace
}  // namespace ring
