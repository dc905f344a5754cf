// The TCP transport with threads as ranks on 127.0.0.1: frame order under backpressure, every
// collective of the Communicator over TCP alone and over a mixed shared-memory + TCP ring, a
// closing or failing peer named in the error. Who may talk to a rank (strangers, the job's
// secret, bad frames from an authenticated peer): test_tcp_strangers.cc.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <future>
#include <numeric>
#include <thread>

#include "collective_calls.h"
#include "executor/communicator.h"
#include "memory_store.h"
#include "rank_threads.h"
#include "tcp_test_support.h"
#include "transport/setup_keys.h"
#include "transport/tcp/socket_util.h"
#include "transport/tcp/tcp_handshake.h"
#include "transport/tcp/tcp_transport.h"

namespace ring {
namespace {

using namespace testing_support;

using testing_support::MemoryStore;
using testing_support::runRanks;
using namespace std::chrono_literals;

using namespace tcp_testing;

TEST(TcpTransport, FramesArriveInOrderOverManyMoreMessagesThanSlots) {
  // Two slots per link and 20000 messages each way on both channels at once: every slot is
  // reused thousands of times, and the receive side is full most of the time (backpressure).
  MemoryStore store;
  const int64_t kMessages = 20000;
  std::atomic<int64_t> firstBad{-1};
  auto out = runRanks(2, [&](int rank) {
    TcpTransport t(store, rank, 2, {1 - rank}, loopbackOptions(2, 1000));
    const int peer = 1 - rank;
    const Channel mySend = rank == 0 ? Channel::Collective : Channel::PointToPoint;
    const Channel myRecv = rank == 0 ? Channel::PointToPoint : Channel::Collective;
    std::thread sender([&] {
      WaitContext ctx = waitFor(t);
      sendSeries(t.sendLink(mySend, peer), rank, kMessages, ctx);
    });
    WaitContext ctx = waitFor(t);
    int64_t bad = receiveSeries(t.recvLink(myRecv, peer), peer, 1000, kMessages, ctx);
    if (bad >= 0) firstBad = bad;
    sender.join();
  });
  for (auto& o : out) EXPECT_TRUE(o.ok()) << o.message();
  EXPECT_EQ(firstBad.load(), -1);
}

// ---- every collective over the Communicator ------------------------------------------------

CommOptions commOptions(const std::string& transport) {
  CommOptions o;
  o.timeout = 20s;
  o.groupName = "tcp-comm";
  o.slotBytes = 512;  // many slices per collective
  o.slots = 3;
  o.transport = transport;
  o.listenAddress = "127.0.0.1";
  return o;
}

CallInfo call(uint64_t seq) { return CallInfo{seq, 20s}; }

// Runs each collective once with inputs whose results are exact, and checks every rank.
void runEveryCollective(Communicator& c) {
  const int n = c.size(), me = c.rank();
  uint64_t seq = 0;
  std::vector<std::string> failures;
  auto check = [&](bool ok, const std::string& what) {
    if (!ok) throw std::runtime_error(strCat("rank ", me, ": ", what));
  };
  {
    const int64_t count = 10007;  // prime: uneven blocks
    std::vector<float> x(count);
    for (int64_t i = 0; i < count; ++i) x[i] = static_cast<float>(me + 1) * static_cast<float>(i % 97);
    runAllReduce(c, x.data(), count, DType::Float32, RedOp::Sum, 1.0, call(seq++));
    const float ranksSum = static_cast<float>(n * (n + 1) / 2);
    for (int64_t i = 0; i < count; ++i) check(x[i] == ranksSum * static_cast<float>(i % 97), "all_reduce");
  }
  {
    const int64_t per = 333;
    std::vector<int32_t> in(per * n), out(per, -1);
    for (int64_t i = 0; i < per * n; ++i) in[i] = static_cast<int32_t>(i + me);
    runReduceScatter(c, in.data(), out.data(), per, DType::Int32, RedOp::Max, 1.0, call(seq++));
    for (int64_t i = 0; i < per; ++i) check(out[i] == static_cast<int32_t>(me * per + i + n - 1), "reduce_scatter");
  }
  {
    const int64_t per = 701;
    std::vector<int32_t> in(per, me * 10), out(per * n, -1);
    runAllGather(c, in.data(), out.data(), per, DType::Int32, call(seq++));
    for (int64_t i = 0; i < per * n; ++i) check(out[i] == static_cast<int32_t>(i / per * 10), "all_gather");
  }
  for (int root = 0; root < n; ++root) {
    std::vector<int32_t> x(1234, me == root ? root + 100 : -1);
    runBroadcast(c, x.data(), 1234, DType::Int32, root, call(seq++));
    for (int32_t v : x) check(v == root + 100, "broadcast");
  }
  {
    const int root = n - 1;
    std::vector<int64_t> in(2048, me + 1), out(2048, 0);
    runReduce(c, in.data(), out.data(), 2048, DType::Int64, RedOp::Sum, 1.0, root, call(seq++));
    if (me == root) {
      for (int64_t v : out) check(v == n * (n + 1) / 2, "reduce");
    }
  }
  {
    const int root = 0;
    std::vector<int32_t> in(300, me), out(me == root ? 300 * n : 0, -1);
    runGather(c, in.data(), out.data(), 300, DType::Int32, root, call(seq++));
    if (me == root) {
      for (int64_t i = 0; i < 300 * n; ++i) check(out[i] == static_cast<int32_t>(i / 300), "gather");
    }
  }
  {
    const int root = n / 2;
    std::vector<int32_t> in(me == root ? 500 * n : 0), out(500, -1);
    for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int32_t>(i / 500 * 3);
    runScatter(c, in.data(), out.data(), 500, DType::Int32, root, call(seq++));
    for (int32_t v : out) check(v == me * 3, "scatter");
  }
  {
    // Rank r sends (r + 1) * (s + 1) * 100 bytes to rank s, each byte = r * 16 + s.
    std::vector<int64_t> sc(n), so(n), rc(n), ro(n);
    int64_t st = 0, rt = 0;
    for (int p = 0; p < n; ++p) {
      sc[p] = (me + 1) * (p + 1) * 100;
      so[p] = st;
      st += sc[p];
      rc[p] = (p + 1) * (me + 1) * 100;
      ro[p] = rt;
      rt += rc[p];
    }
    std::vector<uint8_t> in(st), out(rt, 0xff);
    for (int p = 0; p < n; ++p) std::memset(in.data() + so[p], me * 16 + p, sc[p]);
    c.allToAll(in.data(), out.data(), sc, so, rc, ro, DType::UInt8, call(seq++));
    for (int p = 0; p < n; ++p) {
      for (int64_t k = 0; k < rc[p]; ++k) check(out[ro[p] + k] == p * 16 + me, "all_to_all");
    }
  }
  runBarrier(c, call(seq++));
}

class TcpCommunicatorInWorld : public ::testing::TestWithParam<int> {};

TEST_P(TcpCommunicatorInWorld, EveryCollectiveOverTcpOnly) {
  const int n = GetParam();
  MemoryStore store;
  auto out = runRanks(n, [&](int rank) {
    Communicator c(store, rank, n, commOptions("tcp"));
    EXPECT_NE(c.transport().describeLink((rank + 1) % n).find("tcp 127.0.0.1:"), std::string::npos);
    runEveryCollective(c);
  });
  for (auto& o : out) EXPECT_TRUE(o.ok()) << "size " << n << ": " << o.message();
}

INSTANTIATE_TEST_SUITE_P(Worlds, TcpCommunicatorInWorld, ::testing::Values(2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "world" + std::to_string(info.param);
                         });

// Whether this machine can listen on the IPv6 loopback (some containers disable IPv6).
bool ipv6LoopbackWorks() {
  try {
    int port = 0;
    close(listenOn("::1", &port));
    return true;
  } catch (const RingError&) {
    return false;
  }
}

TEST(TcpCommunicator, EveryCollectiveOverIpv6) {
  if (!ipv6LoopbackWorks()) GTEST_SKIP() << "no IPv6 loopback (::1) on this machine";
  const int n = 3;
  MemoryStore store;
  auto out = runRanks(n, [&](int rank) {
    CommOptions o = commOptions("tcp");
    o.listenAddress = "::1";
    Communicator c(store, rank, n, o);
    EXPECT_NE(c.transport().describeLink((rank + 1) % n).find("tcp [::1]:"), std::string::npos)
        << c.transport().describeLink((rank + 1) % n);
    runEveryCollective(c);
  });
  for (auto& o : out) EXPECT_TRUE(o.ok()) << o.message();
}

TEST(TcpCommunicator, EveryCollectiveOverAMixedRing) {
  // Ranks 0,1 on "host A" and 2,3,4 on "host B": shared memory inside each, TCP between.
  const int n = 5;
  MemoryStore store;
  auto out = runRanks(n, [&](int rank) {
    CommOptions o = commOptions("auto");
    o.hostId = rank < 2 ? "host-A" : "host-B";
    Communicator c(store, rank, n, o);
    std::string toNext = c.transport().describeLink((rank + 1) % n);
    bool crossesHosts = (rank < 2) != ((rank + 1) % n < 2);
    EXPECT_NE(toNext.find(crossesHosts ? "tcp" : "shared memory"), std::string::npos) << toNext;
    runEveryCollective(c);
  });
  for (auto& o : out) EXPECT_TRUE(o.ok()) << o.message();
}

TEST(TcpCommunicator, ShmOnlyRefusesRanksOnTwoHosts) {
  MemoryStore store;
  auto out = runRanks(2, [&](int rank) {
    CommOptions o = commOptions("shm");
    o.hostId = rank == 0 ? "host-A" : "host-B";
    Communicator c(store, rank, 2, o);
  });
  for (auto& o : out) {
    EXPECT_NE(o.message().find("TORCH_RING_TRANSPORT=shm"), std::string::npos) << o.message();
  }
}

TEST(TcpCommunicator, AbortOnOneRankFailsTheOthersWithItsReason) {
  const int n = 3;
  MemoryStore store;
  auto t0 = Clock::now();
  auto out = runRanks(n, [&](int rank) {
    Communicator c(store, rank, n, commOptions("tcp"));
    if (rank == 0) {
      std::this_thread::sleep_for(200ms);
      c.abort("operator pressed stop");
      return;
    }
    std::vector<float> x(1000, 1.0f);
    runAllReduce(c, x.data(), 1000, DType::Float32, RedOp::Sum, 1.0, call(0));  // rank 0 never joins
  });
  EXPECT_LT(Clock::now() - t0, 10s);  // the notice, not the 20 s timeout
  for (int r = 1; r < n; ++r) {
    EXPECT_NE(out[r].message().find("operator pressed stop"), std::string::npos) << out[r].message();
    EXPECT_NE(out[r].message().find("rank 0"), std::string::npos) << out[r].message();
  }
}

TEST(TcpCommunicator, PeerThatExitsWithoutGoodbyeIsNamed) {
  MemoryStore store;
  std::promise<void> rank1Gone;
  auto gone = rank1Gone.get_future().share();
  auto out = runRanks(2, [&](int rank) {
    auto c = std::make_unique<Communicator>(store, rank, 2, commOptions("tcp"));
    if (rank == 1) {
      c->transport().abortLocal("simulated crash");  // its shutdown then skips the goodbye
      c.reset();
      rank1Gone.set_value();
      return;
    }
    gone.wait();
    std::vector<float> x(1000, 1.0f);
    runAllReduce(*c, x.data(), 1000, DType::Float32, RedOp::Sum, 1.0, call(0));
  });
  EXPECT_TRUE(out[1].ok()) << out[1].message();
  EXPECT_NE(out[0].message().find("rank 1 (127.0.0.1:"), std::string::npos) << out[0].message();
  EXPECT_NE(out[0].message().find("closed its connection"), std::string::npos) << out[0].message();
}

TEST(TcpCommunicator, WaitingOnAPeerThatShutDownInOrderSaysSo) {
  MemoryStore store;
  std::promise<void> rank1Gone;
  auto gone = rank1Gone.get_future().share();
  auto out = runRanks(2, [&](int rank) {
    auto c = std::make_unique<Communicator>(store, rank, 2, commOptions("tcp"));
    if (rank == 1) {
      c.reset();
      rank1Gone.set_value();
      return;
    }
    gone.wait();
    std::this_thread::sleep_for(100ms);  // the goodbye arrives
    std::vector<float> x(10, 1.0f);
    runAllReduce(*c, x.data(), 10, DType::Float32, RedOp::Sum, 1.0, call(0));
  });
  EXPECT_NE(out[0].message().find("already shut down"), std::string::npos) << out[0].message();
}

TEST(TcpTransport, ALostPeerFailsOnlyWaitsThatNeedIt) {
  // Rank 2 vanishes without a goodbye; rank 1 still receives what rank 0 sends afterwards (the
  // rank that exits right after its last collective must not fail the others), and only its
  // next check between collectives reports the lost rank.
  MemoryStore store;
  std::promise<void> rank2Gone;
  auto gone = rank2Gone.get_future().share();
  std::string between;
  auto out = runRanks(3, [&](int rank) {
    auto t = std::make_unique<TcpTransport>(store, rank, 3, allBut(3, rank), loopbackOptions());
    if (rank == 2) {
      t->abortLocal("simulated crash");  // shutdown without flush or goodbye
      t.reset();
      rank2Gone.set_value();
      return;
    }
    gone.wait();
    WaitContext ctx = waitFor(*t);
    if (rank == 0) {
      std::this_thread::sleep_for(300ms);  // rank 1's I/O thread has seen rank 2's EOF by now
      sendSeries(t->sendLink(Channel::Collective, 1), 0, 50, ctx);
      return;
    }
    EXPECT_EQ(receiveSeries(t->recvLink(Channel::Collective, 0), 0, 1024, 50, ctx), -1);
    try {
      t->checkHealth(kHealthBetweenCalls);
    } catch (const CommError& e) {
      between = e.what();
    }
  });
  for (auto& o : out) EXPECT_TRUE(o.ok()) << o.message();
  EXPECT_NE(between.find("rank 2 (127.0.0.1:"), std::string::npos) << between;
  EXPECT_NE(between.find("closed its connection"), std::string::npos) << between;
}

}  // namespace
}  // namespace ring

namespace ring {
namespace {

using namespace testing_support;

// Set-up waits (for connections, and connect retries) end as soon as a peer reports that its
// set-up failed, instead of at the group timeout (which can be many minutes).
TEST(TcpTransport, APeerThatFailsItsSetUpEndsTheOthersWaitsAtOnce) {
  for (int waitingRank : {0, 1}) {
    MemoryStore store;
    SetupKeys waiterView(store, waitingRank, 2), failingView(store, 1 - waitingRank, 2);
    TcpOptions opts = loopbackOptions();
    opts.timeout = 60s;
    std::thread failing([&] {
      if (waitingRank == 1) {
        // The failing rank 0 got as far as the token, then gave up before connecting.
        failingView.set("ring/tcp/token", std::string(64, 'a'));
      } else {
        // The failing rank 1 published an address where nothing listens (connects are refused
        // and retried), then gave up.
        failingView.set("ring/tcp/addr/1", "127.0.0.1:1");
        failingView.set("ring/tcp/ready/1", "127.0.0.1:1");
      }
      std::this_thread::sleep_for(200ms);
      reportSetupFailure(failingView, 1 - waitingRank, "simulated set-up failure");
    });
    auto start = Clock::now();
    std::string what;
    try {
      TcpTransport t(waiterView, waitingRank, 2, {1 - waitingRank}, opts);
    } catch (const CommError& e) {
      what = e.what();
    }
    failing.join();
    EXPECT_NE(what.find("simulated set-up failure"), std::string::npos)
        << "rank " << waitingRank << ": " << what;
    EXPECT_LT(Clock::now() - start, 5s) << "rank " << waitingRank;
  }
}

}  // namespace
}  // namespace ring
