// The TCP transport with threads as ranks on 127.0.0.1: frame order under backpressure, every
// collective of the Communicator over TCP alone and over a mixed shared-memory + TCP ring,
// strangers during set-up (wrong key, the right key from another address, garbage, silence,
// floods, duplicates) refused while the job goes on, the listener closed once every link is up,
// the job's secret, invalid frames from an authenticated peer, and a closing peer named in the
// error.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <future>
#include <numeric>
#include <thread>

#include "executor/communicator.h"
#include "memory_store.h"
#include "rank_threads.h"
#include "transport/setup_keys.h"
#include "transport/tcp/socket_util.h"
#include "transport/tcp/tcp_handshake.h"
#include "transport/tcp/tcp_transport.h"

namespace ring {
namespace {

using testing_support::MemoryStore;
using testing_support::runRanks;
using namespace std::chrono_literals;

TcpOptions loopbackOptions(int slots = 4, int64_t slotBytes = 1024) {
  TcpOptions o;
  o.groupName = "tcp-test";
  o.slots = slots;
  o.slotBytes = slotBytes;
  o.timeout = 20s;
  o.listenAddress = "127.0.0.1";
  return o;
}

std::vector<int> allBut(int n, int me) {
  std::vector<int> v;
  for (int r = 0; r < n; ++r) {
    if (r != me) v.push_back(r);
  }
  return v;
}

WaitContext waitFor(Transport& t, std::chrono::milliseconds timeout = 20s) {
  WaitContext c;
  c.start = Clock::now();
  c.timeout = timeout;
  c.deadline = c.start + timeout;
  c.describe = [] { return std::string("test transfer"); };
  c.checkHealth = [&t](int peer) { t.checkHealth(peer); };
  return c;
}

int64_t payloadSize(int64_t i, int64_t cap) { return (i * 37) % (cap + 1); }

void sendSeries(SendLink& link, int me, int64_t count, const WaitContext& ctx) {
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
int64_t receiveSeries(RecvLink& link, int from, int64_t cap, int64_t count, const WaitContext& ctx) {
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
    c.allReduce(x.data(), count, DType::Float32, RedOp::Sum, 1.0, call(seq++));
    const float ranksSum = static_cast<float>(n * (n + 1) / 2);
    for (int64_t i = 0; i < count; ++i) check(x[i] == ranksSum * static_cast<float>(i % 97), "all_reduce");
  }
  {
    const int64_t per = 333;
    std::vector<int32_t> in(per * n), out(per, -1);
    for (int64_t i = 0; i < per * n; ++i) in[i] = static_cast<int32_t>(i + me);
    c.reduceScatter(in.data(), out.data(), per, DType::Int32, RedOp::Max, 1.0, call(seq++));
    for (int64_t i = 0; i < per; ++i) check(out[i] == static_cast<int32_t>(me * per + i + n - 1), "reduce_scatter");
  }
  {
    const int64_t per = 701;
    std::vector<int32_t> in(per, me * 10), out(per * n, -1);
    c.allGather(in.data(), out.data(), per, DType::Int32, call(seq++));
    for (int64_t i = 0; i < per * n; ++i) check(out[i] == static_cast<int32_t>(i / per * 10), "all_gather");
  }
  for (int root = 0; root < n; ++root) {
    std::vector<int32_t> x(1234, me == root ? root + 100 : -1);
    c.broadcast(x.data(), 1234, DType::Int32, root, call(seq++));
    for (int32_t v : x) check(v == root + 100, "broadcast");
  }
  {
    const int root = n - 1;
    std::vector<int64_t> in(2048, me + 1), out(2048, 0);
    c.reduce(in.data(), out.data(), 2048, DType::Int64, RedOp::Sum, 1.0, root, call(seq++));
    if (me == root) {
      for (int64_t v : out) check(v == n * (n + 1) / 2, "reduce");
    }
  }
  {
    const int root = 0;
    std::vector<int32_t> in(300, me), out(me == root ? 300 * n : 0, -1);
    c.gather(in.data(), out.data(), 300, DType::Int32, root, call(seq++));
    if (me == root) {
      for (int64_t i = 0; i < 300 * n; ++i) check(out[i] == static_cast<int32_t>(i / 300), "gather");
    }
  }
  {
    const int root = n / 2;
    std::vector<int32_t> in(me == root ? 500 * n : 0), out(500, -1);
    for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int32_t>(i / 500 * 3);
    c.scatter(in.data(), out.data(), 500, DType::Int32, root, call(seq++));
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
  c.barrier(call(seq++));
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
    c.allReduce(x.data(), 1000, DType::Float32, RedOp::Sum, 1.0, call(0));  // rank 0 never joins
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
    c->allReduce(x.data(), 1000, DType::Float32, RedOp::Sum, 1.0, call(0));
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
    c->allReduce(x.data(), 10, DType::Float32, RedOp::Sum, 1.0, call(0));
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

// ---- strangers ---------------------------------------------------------------------------------

// Connects to `address` ("ip:port") and returns the socket.
int dial(const std::string& address) {
  std::string ip;
  int port = 0;
  splitHostPort(address, "test", &ip, &port);
  return connectTo(ip, port, Clock::now() + 5s);
}

// True once the peer has closed the socket (reads until EOF or error, up to 5 s).
bool closedByPeer(int fd) {
  char buf[4096];
  int e = readFull(fd, buf, sizeof buf, Clock::now() + 5s);
  return e == ECONNRESET || e == EPIPE;
}

HandshakeMsg strangerHello(int src, int dst, int64_t slotBytes, const std::string& group) {
  HandshakeMsg h{};
  h.magic = kHandshakeMagic;
  h.version = kWireVersion;
  h.kind = static_cast<uint32_t>(HandshakeKind::Hello);
  h.channel = 0;
  h.groupHash = groupNameHash(group);
  h.srcRank = src;
  h.dstRank = dst;
  h.slotBytes = slotBytes;
  fillRandom(h.connectorNonce, kNonceBytes);
  return h;
}

// One rank's view of the shared store, whose get() of `gatedKey` first waits for `gate`: holds
// that rank at a chosen point of its set-up (e.g. before it connects) while a stranger acts.
class GatedStore : public Store {
 public:
  GatedStore(Store& base, std::string gatedKey, std::shared_future<void> gate)
      : base_(base), gatedKey_(std::move(gatedKey)), gate_(std::move(gate)) {}
  void set(const std::string& key, const std::string& value) override { base_.set(key, value); }
  std::string get(const std::string& key, std::chrono::milliseconds timeout) override {
    if (key == gatedKey_) gate_.wait();
    return base_.get(key, timeout);
  }
  int64_t add(const std::string& key, int64_t delta) override { return base_.add(key, delta); }
  bool check(const std::string& key) override { return base_.check(key); }

 private:
  Store& base_;
  std::string gatedKey_;
  std::shared_future<void> gate_;
};

// What rank 0 of a loopbackOptions() group of `size` ranks says in its handshakes.
HandshakeIdentity rank0Identity(int size, const HandshakeKey& key) {
  HandshakeIdentity me;
  me.groupHash = groupNameHash("tcp-test");
  me.rank = 0;
  me.groupSize = size;
  me.slotBytes = 1024;
  me.key = key;
  return me;
}

// The key the job's ranks prove (no secret): the token rank 0 put in the store.
HandshakeKey keyFromStore(Store& store) {
  std::string hex = store.get("ring/tcp/token", 20s);
  JobToken token{};
  for (size_t i = 0; i < token.size(); ++i) {
    token[i] = static_cast<uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  }
  return handshakeKey(token, "");
}

TEST(TcpStrangers, WrongTokenIsRefusedWhileTheJobGoesOn) {
  // A stranger claims rank 1 towards rank 2 while the real rank 1 is held before it connects;
  // it answers the reply with a proof made from a wrong key, is refused, and rank 1 then
  // connects normally.
  const int n = 3;
  MemoryStore store;
  std::promise<void> strangerDone;
  auto done = strangerDone.get_future().share();
  GatedStore rank1View(store, "ring/tcp/ready/2", done);
  int64_t rank2Rejected = 0;
  testing::internal::CaptureStderr();
  auto out = runRanks(n + 1, [&](int who) {
    if (who == n) {  // the stranger
      std::string address = store.get("ring/tcp/ready/2", 20s);
      int fd = dial(address);
      HandshakeMsg hello = strangerHello(1, 2, 1024, "tcp-test");
      ASSERT_EQ(writeFull(fd, &hello, sizeof hello, Clock::now() + 5s), 0);
      HandshakeMsg reply;
      ASSERT_EQ(readFull(fd, &reply, sizeof reply, Clock::now() + 5s), 0);
      HandshakeMsg confirm = reply;
      confirm.kind = static_cast<uint32_t>(HandshakeKind::Confirm);
      HandshakeKey guess{};
      Sha256Digest p = handshakeProof(guess, ProofRole::Connector, confirm);
      std::memcpy(confirm.proof, p.data(), p.size());
      ASSERT_EQ(writeFull(fd, &confirm, sizeof confirm, Clock::now() + 5s), 0);
      EXPECT_TRUE(closedByPeer(fd));
      close(fd);
      strangerDone.set_value();
      return;
    }
    TcpTransport t(who == 1 ? static_cast<Store&>(rank1View) : store, who, n, allBut(n, who),
                   loopbackOptions());
    // The job works: a message around the ring.
    WaitContext ctx = waitFor(t);
    sendSeries(t.sendLink(Channel::Collective, (who + 1) % n), who, 10, ctx);
    int64_t bad = receiveSeries(t.recvLink(Channel::Collective, (who + n - 1) % n), (who + n - 1) % n,
                                1024, 10, ctx);
    EXPECT_EQ(bad, -1);
    if (who == 2) rank2Rejected = t.stats().rejectedHandshakes;
  });
  std::string log = testing::internal::GetCapturedStderr();
  for (auto& o : out) EXPECT_TRUE(o.ok()) << o.message();
  EXPECT_EQ(rank2Rejected, 1);
  EXPECT_NE(log.find("refused a TCP connection from 127.0.0.1:"), std::string::npos) << log;
  EXPECT_NE(log.find("wrong key"), std::string::npos) << log;
}

TEST(TcpStrangers, GarbageSilenceFloodsAndDuplicatesAreRefused) {
  MemoryStore store;
  TcpOptions opts = loopbackOptions();
  opts.handshakeTimeout = 300ms;
  opts.maxPendingHandshakes = 8;
  std::promise<void> attacksDone;
  auto done = attacksDone.get_future().share();
  // Rank 0 waits with its connection until the attacks are over: rank 1's listener closes once
  // its link is up.
  GatedStore rank0View(store, "ring/tcp/ready/1", done);
  TcpStats stats1;
  testing::internal::CaptureStderr();
  auto out = runRanks(3, [&](int who) {
    if (who == 2) {  // the stranger, once rank 1 is ready to accept
      std::string address = store.get("ring/tcp/ready/1", 20s);
      // 1. Not our protocol at all: an HTTP request.
      int fd = dial(address);
      std::string http = "GET / HTTP/1.1\r\nHost: x\r\n\r\n" + std::string(200, 'x');
      writeFull(fd, http.data(), http.size(), Clock::now() + 5s);
      EXPECT_TRUE(closedByPeer(fd));
      close(fd);
      // 2. A truncated hello, then close.
      fd = dial(address);
      HandshakeMsg h = strangerHello(0, 1, 1024, "tcp-test");
      writeFull(fd, &h, 40, Clock::now() + 5s);
      close(fd);
      // 3. An oversized blob: only the first 136 bytes are ever read.
      fd = dial(address);
      std::vector<char> blob(4 << 20, 'z');
      writeFull(fd, blob.data(), blob.size(), Clock::now() + 5s);  // may fail: peer closes
      close(fd);
      // 4. A valid hello that never sends its confirm: rank 1 answers, then gives up at the
      //    handshake deadline.
      fd = dial(address);
      writeFull(fd, &h, sizeof h, Clock::now() + 5s);
      EXPECT_TRUE(closedByPeer(fd));
      close(fd);
      // 5. Silence, and a flood of silent sockets past the cap.
      std::vector<int> silent;
      for (int i = 0; i < 12; ++i) silent.push_back(dial(address));
      std::this_thread::sleep_for(800ms);  // past the handshake deadline
      for (int s : silent) close(s);
      attacksDone.set_value();
      return;
    }
    TcpTransport t(who == 0 ? static_cast<Store&>(rank0View) : store, who, 2, {1 - who}, opts);
    WaitContext ctx = waitFor(t);
    std::thread s([&] { sendSeries(t.sendLink(Channel::Collective, 1 - who), who, 500, ctx); });
    EXPECT_EQ(receiveSeries(t.recvLink(Channel::Collective, 1 - who), 1 - who, 1024, 500, ctx), -1);
    s.join();
    if (who == 1) stats1 = t.stats();
  });
  std::string log = testing::internal::GetCapturedStderr();
  for (auto& o : out) EXPECT_TRUE(o.ok()) << o.message();
  EXPECT_GE(stats1.rejectedHandshakes, 4 + 12);
  EXPECT_GE(stats1.droppedPending, 4);
  EXPECT_NE(log.find("not a torch_ring handshake"), std::string::npos) << log;
  EXPECT_NE(log.find("closed after 40 bytes of the hello"), std::string::npos) << log;
  EXPECT_NE(log.find("did not complete within 300 ms"), std::string::npos) << log;
  EXPECT_NE(log.find("connections were pending at once"), std::string::npos) << log;
}

TEST(TcpStrangers, ADuplicateOfAnAuthenticatedLinkIsRefused) {
  // Rank 0's links are all up; rank 1 is held, so rank 2 still listens. A process with the job's
  // key, on rank 0's address, claims rank 0's channel 0 again: refused as a duplicate.
  MemoryStore store;
  std::promise<void> strangerDone, rank0Up;
  auto done = strangerDone.get_future().share();
  auto up = rank0Up.get_future().share();
  GatedStore rank1View(store, "ring/tcp/ready/2", done);
  int64_t rank2Rejected = 0;
  testing::internal::CaptureStderr();
  auto out = runRanks(4, [&](int who) {
    if (who == 3) {  // the stranger
      up.wait();
      HandshakeIdentity me = rank0Identity(3, keyFromStore(store));
      int fd = dial(store.get("ring/tcp/ready/2", 20s));
      std::string detail;
      EXPECT_EQ(authenticateAsConnector(fd, me, 2, 0, Clock::now() + 5s, &detail),
                ConnectOutcome::ClosedEarly);
      close(fd);
      strangerDone.set_value();
      return;
    }
    TcpTransport t(who == 1 ? static_cast<Store&>(rank1View) : store, who, 3, allBut(3, who),
                   loopbackOptions());
    if (who == 0) rank0Up.set_value();
    WaitContext ctx = waitFor(t);
    sendSeries(t.sendLink(Channel::Collective, (who + 1) % 3), who, 10, ctx);
    EXPECT_EQ(receiveSeries(t.recvLink(Channel::Collective, (who + 2) % 3), (who + 2) % 3, 1024,
                            10, ctx),
              -1);
    if (who == 2) rank2Rejected = t.stats().rejectedHandshakes;
  });
  std::string log = testing::internal::GetCapturedStderr();
  for (auto& o : out) EXPECT_TRUE(o.ok()) << o.message();
  EXPECT_EQ(rank2Rejected, 1);
  EXPECT_NE(log.find("already has an authenticated connection on channel 0"), std::string::npos)
      << log;
}

TEST(TcpStrangers, TheRightKeyFromAnotherAddressIsRefused) {
  // Rank 0 published 127.0.0.1 and is held before it connects. A stranger that read the store
  // (so it has the job's key) connects from 127.0.0.2 claiming rank 0: refused at its hello,
  // before it gets a reply. Then rank 0 connects and the job goes on.
  MemoryStore store;
  std::promise<void> strangerDone;
  auto done = strangerDone.get_future().share();
  GatedStore rank0View(store, "ring/tcp/ready/1", done);
  int64_t rank1Rejected = 0;
  testing::internal::CaptureStderr();
  auto out = runRanks(3, [&](int who) {
    if (who == 2) {
      HandshakeIdentity me = rank0Identity(2, keyFromStore(store));
      std::string ip;
      int port = 0;
      splitHostPort(store.get("ring/tcp/ready/1", 20s), "rank 1", &ip, &port);
      int fd = connectTo(ip, port, Clock::now() + 5s, {}, "127.0.0.2");
      std::string detail;
      EXPECT_EQ(authenticateAsConnector(fd, me, 1, 0, Clock::now() + 5s, &detail),
                ConnectOutcome::ClosedEarly);
      close(fd);
      strangerDone.set_value();
      return;
    }
    TcpTransport t(who == 0 ? static_cast<Store&>(rank0View) : store, who, 2, {1 - who},
                   loopbackOptions());
    WaitContext ctx = waitFor(t);
    std::thread s([&] { sendSeries(t.sendLink(Channel::Collective, 1 - who), who, 50, ctx); });
    EXPECT_EQ(receiveSeries(t.recvLink(Channel::Collective, 1 - who), 1 - who, 1024, 50, ctx), -1);
    s.join();
    if (who == 1) rank1Rejected = t.stats().rejectedHandshakes;
  });
  std::string log = testing::internal::GetCapturedStderr();
  for (auto& o : out) EXPECT_TRUE(o.ok()) << o.message();
  EXPECT_EQ(rank1Rejected, 1);
  EXPECT_NE(log.find("refused a TCP connection from 127.0.0.2:"), std::string::npos) << log;
  EXPECT_NE(log.find("claims rank 0, which published address 127.0.0.1"), std::string::npos)
      << log;
}

TEST(TcpTransport, TheListenerIsClosedOnceEveryLinkIsUp) {
  MemoryStore store;
  std::string address;
  std::vector<std::unique_ptr<TcpTransport>> ranks(2);
  auto out = runRanks(2, [&](int who) {
    ranks[who] = std::make_unique<TcpTransport>(store, who, 2, std::vector<int>{1 - who},
                                                loopbackOptions());
  });
  for (auto& o : out) ASSERT_TRUE(o.ok()) << o.message();
  // Rank 1 accepted rank 0; now nothing listens at the address it published.
  std::string ip;
  int port = 0;
  splitHostPort(store.get("ring/tcp/addr/1", 1s), "rank 1", &ip, &port);
  SocketAddress sa;
  ASSERT_TRUE(parseNumericAddress(ip, port, &sa));
  int fd = socket(sa.family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  int r = ::connect(fd, sa.get(), sa.length);
  int e = errno;
  close(fd);
  EXPECT_EQ(r, -1);
  EXPECT_EQ(e, ECONNREFUSED) << std::strerror(e);
  // The links still work.
  WaitContext ctx0 = waitFor(*ranks[0]), ctx1 = waitFor(*ranks[1]);
  std::thread s([&] { sendSeries(ranks[0]->sendLink(Channel::Collective, 1), 0, 20, ctx0); });
  EXPECT_EQ(receiveSeries(ranks[1]->recvLink(Channel::Collective, 0), 0, 1024, 20, ctx1), -1);
  s.join();
}

// ---- the job's secret --------------------------------------------------------------------------

// Both ranks' set-up outcome ("" when it succeeded) with the given secrets. A rank whose set-up
// fails reports it through the store, as the Communicator does.
std::vector<std::string> setUpWithSecrets(const std::string& secret0, const std::string& secret1) {
  MemoryStore store;
  std::vector<std::string> errors(2);
  runRanks(2, [&](int who) {
    SetupKeys view(store, who, 2);
    TcpOptions o = loopbackOptions();
    o.secret = who == 0 ? secret0 : secret1;
    try {
      TcpTransport t(view, who, 2, {1 - who}, o);
    } catch (const std::exception& e) {
      errors[who] = e.what();
      reportSetupFailure(view, who, e.what());
    }
  });
  return errors;
}

TEST(TcpSecret, RanksWithTheSameSecretConnect) {
  auto errors = setUpWithSecrets("s3cret", "s3cret");
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
}

TEST(TcpSecret, RanksThatDisagreeFailAtSetUpNamingTheRank) {
  for (auto secrets : {std::make_pair(std::string("s3cret"), std::string("other")),
                       std::make_pair(std::string(""), std::string("s3cret")),
                       std::make_pair(std::string("s3cret"), std::string(""))}) {
    auto start = Clock::now();
    auto errors = setUpWithSecrets(secrets.first, secrets.second);
    SCOPED_TRACE("secrets '" + secrets.first + "' and '" + secrets.second + "'");
    // Rank 0 connects and checks rank 1's proof first.
    EXPECT_NE(errors[0].find("rank 1 did not prove the job's key"), std::string::npos)
        << errors[0];
    EXPECT_NE(errors[0].find("TORCH_RING_SECRET"), std::string::npos) << errors[0];
    // Rank 1 learns it from rank 0's report rather than at its timeout.
    EXPECT_NE(errors[1].find("rank 1 did not prove the job's key"), std::string::npos)
        << errors[1];
    EXPECT_LT(Clock::now() - start, 10s);
  }
}

TEST(TcpSecret, TheKeyDependsOnTheSecret) {
  JobToken token{};
  for (size_t i = 0; i < token.size(); ++i) token[i] = static_cast<uint8_t>(i);
  HandshakeKey plain = handshakeKey(token, "");
  EXPECT_TRUE(std::equal(plain.begin(), plain.end(), token.begin()));
  EXPECT_NE(handshakeKey(token, "a"), plain);
  EXPECT_NE(handshakeKey(token, "a"), handshakeKey(token, "b"));
  EXPECT_EQ(handshakeKey(token, "a"), handshakeKey(token, "a"));
}

// ---- an authenticated peer that sends bad frames -------------------------------------------------

// Plays rank 0 of a 2-rank group by hand (token chosen by the test), so that it can send
// frames no real rank would; returns its two sockets once rank 1 has accepted them.
struct FakeRank0 {
  MemoryStore& store;
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

std::string rank1ReceiveError(const std::function<void(FakeRank0&)>& misbehave) {
  MemoryStore store;
  std::string error;
  FakeRank0 fake{store};
  std::thread rank0([&] {
    fake.connectAll(1024);
    misbehave(fake);
  });
  try {
    TcpTransport t(store, 1, 2, {0}, loopbackOptions());
    WaitContext ctx = waitFor(t, 10s);
    t.recvLink(Channel::Collective, 0).receive(ctx);
    error = "no error";
  } catch (const std::exception& e) {
    error = e.what();
  }
  rank0.join();
  return error;
}

TEST(TcpFrames, OversizedFrameBreaksTheGroupWithAClearError) {
  std::string e = rank1ReceiveError([](FakeRank0& f) {
    MessageHeader h{};
    h.magic = kMessageMagic;
    h.sender = 0;
    h.payloadBytes = int64_t{1} << 40;
    writeFull(f.fds[0], &h, sizeof h, Clock::now() + 5s);
  });
  EXPECT_NE(e.find("rank 0 (127.0.0.1:"), std::string::npos) << e;
  EXPECT_NE(e.find("sent an invalid frame (frame announces 1099511627776 payload bytes; at "
                   "most 1024 fit)"),
            std::string::npos)
      << e;
}

TEST(TcpFrames, ForgedSenderBreaksTheGroup) {
  std::string e = rank1ReceiveError([](FakeRank0& f) {
    MessageHeader h{};
    h.magic = kMessageMagic;
    h.sender = 5;
    writeFull(f.fds[0], &h, sizeof h, Clock::now() + 5s);
  });
  EXPECT_NE(e.find("claims sender rank 5"), std::string::npos) << e;
}

TEST(TcpFrames, TruncatedFrameThenCloseIsNamed) {
  std::string e = rank1ReceiveError([](FakeRank0& f) {
    MessageHeader h{};
    h.magic = kMessageMagic;
    h.sender = 0;
    h.payloadBytes = 1000;
    writeFull(f.fds[0], &h, sizeof h, Clock::now() + 5s);
    writeFull(f.fds[0], "only a few bytes", 16, Clock::now() + 5s);
    std::this_thread::sleep_for(50ms);
    close(f.fds[0]);
    f.fds[0] = -1;
  });
  EXPECT_NE(e.find("rank 0 (127.0.0.1:"), std::string::npos) << e;
  EXPECT_NE(e.find("closed its connection in the middle of a frame"), std::string::npos) << e;
}

TEST(TcpFrames, BrokenNoticeFromAPeerIsRaised) {
  std::string e = rank1ReceiveError([](FakeRank0& f) {
    std::string why = "rank 0 ran out of memory\n\x01";
    MessageHeader h{};
    h.magic = kBrokenMagic;
    h.sender = 0;
    h.payloadBytes = static_cast<int64_t>(why.size());
    writeFull(f.fds[0], &h, sizeof h, Clock::now() + 5s);
    writeFull(f.fds[0], why.data(), why.size(), Clock::now() + 5s);
  });
  EXPECT_NE(e.find("reported: rank 0 ran out of memory??"), std::string::npos) << e;
}

}  // namespace
}  // namespace ring

namespace ring {
namespace {

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
