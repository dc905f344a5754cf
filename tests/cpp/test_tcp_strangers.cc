// Who may talk to a rank of the TCP transport (threads as ranks on 127.0.0.1): strangers during
// set-up (wrong key, the right key from another address, garbage, silence, floods, duplicates)
// refused while the job goes on, the listener closed once every link is up, the job's secret,
// and invalid frames from an authenticated peer.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <future>
#include <thread>

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

using testing_support::MemoryStore;
using testing_support::runRanks;
using namespace std::chrono_literals;
using namespace tcp_testing;

// ---- strangers ---------------------------------------------------------------------------------

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
