// The Communicator end to end with threads as ranks over the shared-memory transport: every
// collective against a closed-form result, bitwise agreement between ranks, and the failure
// paths (mismatched calls, p2p tag mismatch) that must error instead of hanging.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "closed_forms.h"
#include "comm_test_support.h"
#include "common/errors.h"
#include "executor/p2p_engine.h"

namespace ring {
namespace {

using namespace testing_support;

const std::vector<int> kWorlds = {1, 2, 3, 4, 7};

// How small messages move in a test of CommunicatorInWorld.
enum class SmallPath { Ring, DirectFifo, Mailbox };

// The collectives' tests run once per world size and way of moving small messages, each its
// own test: "world3_ring" never goes direct, "world3_direct" sends every message of at most
// one slot (256 bytes here) directly to the n-1 others through the FIFOs
// (executor/direct_collectives.h), "world3_mailbox" the same messages, and every barrier, in
// mailbox rounds (executor/round_links.h, MailboxRound); so the small counts take that path and the
// larger ones the ring, in one sequence of calls.
class CommunicatorInWorld : public ::testing::TestWithParam<std::tuple<int, SmallPath>> {
 protected:
  int world() const { return std::get<0>(GetParam()); }
  std::vector<RankOutcome> group(int n, const std::function<void(Communicator&)>& body) const {
    CommOptions o = smallSlotOptions();
    const SmallPath path = std::get<1>(GetParam());
    o.directBytes = path == SmallPath::Ring ? 0 : o.slotBytes * (n - 1);
    o.mailboxBytes = path == SmallPath::Mailbox ? o.slotBytes : 0;
    return runGroup(n, body, o);
  }
};

std::vector<int64_t> countsFor(int n, bool large) {
  std::set<int64_t> c = {0, 1, n + 1, 1009};
  if (large) c.insert(20000);
  return {c.begin(), c.end()};
}

void expectAllOk(const std::vector<RankOutcome>& outcomes) {
  for (size_t r = 0; r < outcomes.size(); ++r) {
    EXPECT_TRUE(outcomes[r].ok()) << "rank " << r << ": " << outcomes[r].message();
  }
}

// ---- all-reduce ------------------------------------------------------------------------------

struct ReduceCase {
  DType t;
  RedOp op;
  int64_t count;
};

std::vector<ReduceCase> allReduceCases(int n) {
  std::vector<ReduceCase> cases;
  for (int64_t count : countsFor(n, true)) {
    for (DType t : {DType::Float32, DType::Int64, DType::Float16, DType::BFloat16, DType::Bool}) {
      for (RedOp op : {RedOp::Sum, RedOp::Avg, RedOp::Max, RedOp::Min, RedOp::Product,
                       RedOp::PreMulSum}) {
        if (opSupported(t, op)) cases.push_back({t, op, count});
      }
    }
  }
  return cases;
}

TEST_P(CommunicatorInWorld, AllReduceMatchesClosedFormAndIsBitwiseIdenticalAcrossRanks) {
  const int n = world();
  const auto cases = allReduceCases(n);
  std::vector<std::vector<uint64_t>> digests(cases.size(), std::vector<uint64_t>(n));
  auto outcomes = group(n, [&](Communicator& comm) {
    const int r = comm.rank();
    for (size_t k = 0; k < cases.size(); ++k) {
      const ReduceCase& c = cases[k];
      auto data = buffer(c.t, c.count, [&](int64_t i) { return inputFor(c.t, c.op, r, i); });
      runAllReduce(comm, data.data(), c.count, c.t, c.op, 0.5, call(k));
      int64_t bad = firstMismatch(c.t, data.data(), c.count,
                                  [&](int64_t i) { return expectedFor(c.t, c.op, n, i); });
      EXPECT_EQ(bad, -1) << "n=" << n << " rank " << r << " " << dtypeName(c.t) << " "
                         << redOpName(c.op) << " count " << c.count << ": element " << bad
                         << " expected " << expectedFor(c.t, c.op, n, bad);
      digests[k][r] = fingerprintBytes(data.data(), c.count * elementSize(c.t));
    }
  });
  expectAllOk(outcomes);
  for (size_t k = 0; k < cases.size(); ++k) {
    for (int r = 1; r < n; ++r) {
      EXPECT_EQ(digests[k][r], digests[k][0]) << "n=" << n << " case " << k << " rank " << r;
    }
  }
}

// ---- the other collectives ------------------------------------------------------------------

// Reducing collectives beyond all-reduce reuse its inputs and closed forms, over pairs that
// exercise each special path: AVG's final division, PREMUL_SUM's scaled copy of the input, and
// 2- and 1-byte elements.
const std::pair<DType, RedOp> kReducePairs[] = {{DType::Int64, RedOp::Sum},
                                                {DType::Float32, RedOp::Avg},
                                                {DType::Int64, RedOp::PreMulSum},
                                                {DType::BFloat16, RedOp::Max},
                                                {DType::Bool, RedOp::Product}};

// Rank R ends with the reduction of every rank's block R; the input stays untouched.
TEST_P(CommunicatorInWorld, ReduceScatterReducesBlockRankIntoEachRank) {
  const int n = world();
  auto outcomes = group(n, [&](Communicator& comm) {
    const int r = comm.rank();
    uint64_t seq = 0;
    for (int64_t c : countsFor(n, false)) {
      for (auto [t, op] : kReducePairs) {
        auto in = buffer(t, n * c, [&](int64_t j) { return inputFor(t, op, r, j); });
        const auto inBefore = in;
        auto out = buffer(t, c, [](int64_t) { return -99; });
        runReduceScatter(comm, in.data(), out.data(), c, t, op, 0.5, call(seq++));
        EXPECT_EQ(firstMismatch(t, out.data(), c,
                                [&](int64_t i) { return expectedFor(t, op, n, r * c + i); }), -1)
            << "n=" << n << " rank " << r << " count " << c << " " << dtypeName(t) << " "
            << redOpName(op);
        EXPECT_EQ(in, inBefore) << "input modified on rank " << r;
      }
    }
  });
  expectAllOk(outcomes);
}

// Block q of every rank's output is rank q's input; also in place, with the input being block
// `rank` of the output (as FSDP calls it). 2-byte elements.
TEST_P(CommunicatorInWorld, AllGatherCollectsEveryRanksBlockAlsoInPlace) {
  const DType t = DType::Float16;
  auto value = [](int q, int64_t i) { return q * 100.0 + static_cast<double>(i % 50); };
  const int n = world();
  auto outcomes = group(n, [&](Communicator& comm) {
    const int r = comm.rank();
    uint64_t seq = 0;
    for (int64_t c : countsFor(n, false)) {
      auto want = [&](int64_t j) { return value(static_cast<int>(j / c), j % c); };
      auto in = buffer(t, c, [&](int64_t i) { return value(r, i); });
      auto out = buffer(t, n * c, [](int64_t) { return -1; });
      runAllGather(comm, in.data(), out.data(), c, t, call(seq++));
      EXPECT_EQ(firstMismatch(t, out.data(), n * c, want), -1) << "n=" << n << " c=" << c;

      auto inPlace = buffer(t, n * c, [&](int64_t j) { return j / c == r ? want(j) : -1; });
      const char* myBlock = inPlace.data() + r * c * static_cast<int64_t>(elementSize(t));
      runAllGather(comm, myBlock, inPlace.data(), c, t, call(seq++));
      EXPECT_EQ(firstMismatch(t, inPlace.data(), n * c, want), -1)
          << "in place, n=" << n << " c=" << c;
    }
  });
  expectAllOk(outcomes);
}

// From every root, one-byte elements: every rank ends with the root's bytes.
TEST_P(CommunicatorInWorld, BroadcastFromEveryRoot) {
  const DType t = DType::UInt8;
  auto value = [](int q, int64_t i) { return static_cast<double>((q * 37 + i) % 256); };
  const int n = world();
  auto outcomes = group(n, [&](Communicator& comm) {
    uint64_t seq = 0;
    for (int root = 0; root < n; ++root) {
      for (int64_t c : countsFor(n, false)) {
        auto data = buffer(t, c, [&](int64_t i) { return value(comm.rank(), i); });
        runBroadcast(comm, data.data(), c, t, root, call(seq++));
        EXPECT_EQ(firstMismatch(t, data.data(), c, [&](int64_t i) { return value(root, i); }),
                  -1) << "n=" << n << " root " << root << " c=" << c << " rank " << comm.rank();
      }
    }
  });
  expectAllOk(outcomes);
}

// From every root: the root's output holds the reduction; other ranks' outputs are never
// written, and no rank's input is.
TEST_P(CommunicatorInWorld, ReduceToEveryRootLeavesOtherOutputsUntouched) {
  const int n = world();
  auto outcomes = group(n, [&](Communicator& comm) {
    const int r = comm.rank();
    uint64_t seq = 0;
    for (int root = 0; root < n; ++root) {
      for (int64_t c : countsFor(n, false)) {
        for (auto [t, op] : kReducePairs) {
          auto in = buffer(t, c, [&](int64_t i) { return inputFor(t, op, r, i); });
          const auto inBefore = in;
          auto out = buffer(t, c, [](int64_t) { return -99; });
          runReduce(comm, in.data(), out.data(), c, t, op, 0.5, root, call(seq++));
          auto want = [&](int64_t i) { return r == root ? expectedFor(t, op, n, i) : -99; };
          EXPECT_EQ(firstMismatch(t, out.data(), c, want), -1)
              << "n=" << n << " root " << root << " c=" << c << " rank " << r << " "
              << dtypeName(t) << " " << redOpName(op);
          EXPECT_EQ(in, inBefore);
        }
      }
    }
  });
  expectAllOk(outcomes);
}

// Gather (2-byte ints) and scatter (8-byte floats) from every root.
TEST_P(CommunicatorInWorld, GatherAndScatterFromEveryRoot) {
  auto gathered = [](int q, int64_t i) { return q * 1000.0 + static_cast<double>(i % 1000); };
  auto scattered = [](int root, int q, int64_t i) { return root * 0.5 + q * 1e6 + i; };
  const int n = world();
  auto outcomes = group(n, [&](Communicator& comm) {
    const int r = comm.rank();
    uint64_t seq = 0;
    for (int root = 0; root < n; ++root) {
      for (int64_t c : countsFor(n, false)) {
        auto in = buffer(DType::Int16, c, [&](int64_t i) { return gathered(r, i); });
        auto out = buffer(DType::Int16, n * c, [](int64_t) { return -7; });
        runGather(comm, in.data(), out.data(), c, DType::Int16, root, call(seq++));
        auto want = [&](int64_t j) { return r == root ? gathered(int(j / c), j % c) : -7; };
        EXPECT_EQ(firstMismatch(DType::Int16, out.data(), n * c, want), -1)
            << "gather n=" << n << " root " << root << " c=" << c << " rank " << r;

        auto all = buffer(DType::Float64, n * c, [&](int64_t j) {
          return r == root ? scattered(root, int(j / c), j % c) : -3;  // only the root's counts
        });
        auto mine = buffer(DType::Float64, c, [](int64_t) { return -5; });
        runScatter(comm, all.data(), mine.data(), c, DType::Float64, root, call(seq++));
        EXPECT_EQ(firstMismatch(DType::Float64, mine.data(), c,
                                [&](int64_t i) { return scattered(root, r, i); }), -1)
            << "scatter n=" << n << " root " << root << " c=" << c << " rank " << r;
      }
    }
  });
  expectAllOk(outcomes);
}

// Uneven splits, some empty and some several slots long, with the blocks packed in each buffer
// in rank order; byte counts as torch passes them. Also with the minimum of two slots, where
// ranks that finish sending early must not stall the exchange.
TEST_P(CommunicatorInWorld, AllToAllWithUnevenByteCounts) {
  const DType t = DType::Int32;
  auto elems = [](int from, int to) -> int64_t { return ((from + 2 * to) % 4) * 37; };
  auto value = [](int from, int to, int64_t k) { return from * 1e6 + to * 1e4 + k; };
  const int n = world();
  for (int slots : {2, 4}) {
    CommOptions opts = smallSlotOptions();
    opts.slots = slots;
    auto outcomes = runGroup(n, [&](Communicator& comm) {
      const int r = comm.rank();
      const int64_t es = static_cast<int64_t>(elementSize(t));
      std::vector<int64_t> sendCounts(n), sendOffsets(n), recvCounts(n), recvOffsets(n);
      int64_t sendTotal = 0, recvTotal = 0;
      for (int q = 0; q < n; ++q) {
        sendOffsets[q] = sendTotal * es;
        sendCounts[q] = elems(r, q) * es;
        sendTotal += elems(r, q);
        recvOffsets[q] = recvTotal * es;
        recvCounts[q] = elems(q, r) * es;
        recvTotal += elems(q, r);
      }
      std::vector<char> in(static_cast<size_t>(sendTotal * es) + 1);
      for (int q = 0; q < n; ++q) {
        for (int64_t k = 0; k < elems(r, q); ++k) {
          storeElement(t, in.data() + sendOffsets[q], k, value(r, q, k));
        }
      }
      std::vector<char> out(static_cast<size_t>(recvTotal * es) + 1, 0);
      comm.allToAll(in.data(), out.data(), sendCounts, sendOffsets, recvCounts, recvOffsets, t,
                    call(0));
      for (int q = 0; q < n; ++q) {
        EXPECT_EQ(firstMismatch(t, out.data() + recvOffsets[q], elems(q, r),
                                [&](int64_t k) { return value(q, r, k); }), -1)
            << "n=" << n << " slots " << slots << " block from rank " << q << " at rank " << r;
      }
    }, opts);
    expectAllOk(outcomes);
  }
}

// Ranks arrive at staggered times; none may leave before the last has arrived.
TEST_P(CommunicatorInWorld, BarrierHoldsEveryRankUntilAllArrive) {
  const int n = world();
  std::atomic<int> arrived{0};
  auto outcomes = group(n, [&](Communicator& comm) {
    for (uint64_t round = 0; round < 3; ++round) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10 * ((comm.rank() + round) % n)));
      arrived.fetch_add(1);
      runBarrier(comm, call(round));
      EXPECT_GE(arrived.load(), static_cast<int>(round + 1) * n)
          << "rank " << comm.rank() << " left barrier " << round << " early";
      runBarrier(comm, call(100 + round));  // nobody starts the next round's count early
    }
  });
  expectAllOk(outcomes);
}

INSTANTIATE_TEST_SUITE_P(
    Worlds, CommunicatorInWorld,
    ::testing::Combine(::testing::ValuesIn(kWorlds),
                       ::testing::Values(SmallPath::Ring, SmallPath::DirectFifo,
                                         SmallPath::Mailbox)),
    [](const ::testing::TestParamInfo<std::tuple<int, SmallPath>>& info) {
      const SmallPath path = std::get<1>(info.param);
      return "world" + std::to_string(std::get<0>(info.param)) +
             (path == SmallPath::Ring ? "_ring" : path == SmallPath::DirectFifo ? "_direct"
                                                                                : "_mailbox");
    });

// ---- FIFO depth ------------------------------------------------------------------------------

// Two slots per FIFO is the documented minimum (TORCH_RING_SLOTS >= 2): the real executor, with
// real threads, must complete every ring collective with it.
TEST(Communicator, TwoSlotFifosSuffice) {
  CommOptions opts = smallSlotOptions();
  opts.slots = 2;
  for (int n : {2, 3, 7}) {
    auto outcomes = runGroup(n, [&](Communicator& comm) {
      const int r = comm.rank();
      const int64_t c = 5000;
      auto data = buffer(DType::Float32, c, [&](int64_t i) { return linearValue(r, i); });
      runAllReduce(comm, data.data(), c, DType::Float32, RedOp::Sum, 1.0, call(0));
      EXPECT_EQ(firstMismatch(DType::Float32, data.data(), c,
                              [&](int64_t i) { return linearSum(n, i); }), -1) << "n=" << n;
      auto in = buffer(DType::Float32, c, [&](int64_t i) { return r * 1e4 + i; });
      auto out = buffer(DType::Float32, n * c, [](int64_t) { return -1; });
      runAllGather(comm, in.data(), out.data(), c, DType::Float32, call(1));
      EXPECT_EQ(firstMismatch(DType::Float32, out.data(), n * c,
                              [&](int64_t j) { return (j / c) * 1e4 + j % c; }), -1) << "n=" << n;
      runBarrier(comm, call(2));
    }, opts);
    expectAllOk(outcomes);
  }
}

// One slot per FIFO can deadlock a ring (a step holds its received slot until its own message
// is out: test_plans.cc shows it), so it is refused at set-up, on every rank, saying why.
TEST(Communicator, OneSlotFifosAreRefused) {
  CommOptions opts = smallSlotOptions();
  opts.slots = 1;
  auto outcomes = runGroup(2, [&](Communicator& comm) {
    std::vector<float> data(100, 1.0f);
    runAllReduce(comm, data.data(), 100, DType::Float32, RedOp::Sum, 1.0, call(0, 2s));
  }, opts);
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(threw<UsageError>(outcomes[r])) << "rank " << r << ": " << outcomes[r].message();
    EXPECT_NE(outcomes[r].message().find("a FIFO needs at least 2 slots, got 1"), std::string::npos)
        << outcomes[r].message();
  }
}

// ---- failures: errors, not hangs -------------------------------------------------------------

// Same sequence number, different sizes: the receiver's header check must catch it and name
// both sizes; the other rank learns through the broken group instead of timing out.
TEST(Communicator, SizeMismatchFailsBothRanksNamingBothSizes) {
  std::vector<float> data0(1000, 1.0f), data1(2000, 1.0f);
  auto start = Clock::now();
  auto outcomes = runGroup(2, [&](Communicator& comm) {
    if (comm.rank() == 0) {
      runAllReduce(comm, data0.data(), 1000, DType::Float32, RedOp::Sum, 1.0, call(0, 5s));
    } else {
      runAllReduce(comm, data1.data(), 2000, DType::Float32, RedOp::Sum, 1.0, call(0, 5s));
    }
  });
  EXPECT_LT(Clock::now() - start, 5s) << "detected by the timeout, not by the check";
  bool named = false;
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(threw<CommError>(outcomes[r])) << "rank " << r << ": " << outcomes[r].message();
    EXPECT_FALSE(threw<TimeoutError>(outcomes[r])) << outcomes[r].message();
    const std::string m = outcomes[r].message();
    named |= m.find("1000") != std::string::npos && m.find("2000") != std::string::npos;
  }
  EXPECT_TRUE(named) << outcomes[0].message() << "\n" << outcomes[1].message();
}

// Different collectives at the same point (all-reduce vs broadcast): both ranks error well
// within the timeout.
TEST(Communicator, DifferentCollectivesFailBothRanksBeforeTheTimeout) {
  auto start = Clock::now();
  auto outcomes = runGroup(2, [&](Communicator& comm) {
    std::vector<int64_t> data(64, comm.rank());
    if (comm.rank() == 0) {
      runAllReduce(comm, data.data(), 64, DType::Int64, RedOp::Sum, 1.0, call(0, 5s));
    } else {
      runBroadcast(comm, data.data(), 64, DType::Int64, 0, call(0, 5s));
    }
  });
  EXPECT_LT(Clock::now() - start, 4s);
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(threw<CommError>(outcomes[r])) << "rank " << r << ": " << outcomes[r].message();
    EXPECT_FALSE(threw<TimeoutError>(outcomes[r])) << outcomes[r].message();
  }
  EXPECT_NE(outcomes[1].message().find("all_reduce"), std::string::npos) << outcomes[1].message();
  EXPECT_NE(outcomes[1].message().find("broadcast"), std::string::npos) << outcomes[1].message();
}

// ---- point-to-point --------------------------------------------------------------------------

struct Completion {
  std::promise<std::exception_ptr> promise;
  std::future<std::exception_ptr> future = promise.get_future();
  std::function<void(std::exception_ptr, int)> callback() {
    return [this](std::exception_ptr e, int) { promise.set_value(e); };
  }
  // The operation's error (null on success); throws if it did not end in time.
  std::exception_ptr wait() {
    if (future.wait_for(20s) != std::future_status::ready) {
      throw std::runtime_error("p2p operation did not complete within 20 s");
    }
    return future.get();
  }
};

P2POp op(bool isSend, int peer, int tag, void* data, int64_t bytes, Completion& done) {
  P2POp o;
  o.isSend = isSend;
  o.peer = peer;
  o.tag = tag;
  o.data = data;
  o.bytes = bytes;
  o.timeout = 10s;
  o.done = done.callback();
  return o;
}

// Both ranks send 1 MiB to each other at once: 1 KiB of FIFO per direction, so this completes
// only because the engine moves the send and the receive forward together.
TEST(P2PEngine, SimultaneousLargeExchangeDoesNotDeadlock) {
  constexpr int64_t kBytes = 1 << 20;
  auto outcomes = runGroup(2, [&](Communicator& comm) {
    const int me = comm.rank(), other = 1 - me;
    std::vector<uint8_t> out(kBytes), in(kBytes, 0);
    for (int64_t i = 0; i < kBytes; ++i) out[i] = static_cast<uint8_t>(i * 13 + me * 101);
    Completion sent, received;
    P2PEngine engine(comm.transport(), comm.groupName());
    engine.post(op(true, other, 7, out.data(), kBytes, sent));
    engine.post(op(false, other, 7, in.data(), kBytes, received));
    if (auto e = sent.wait()) std::rethrow_exception(e);
    if (auto e = received.wait()) std::rethrow_exception(e);
    int64_t wrong = 0;
    for (int64_t i = 0; i < kBytes; ++i) wrong += in[i] != static_cast<uint8_t>(i * 13 + other * 101);
    EXPECT_EQ(wrong, 0) << "bytes differing on rank " << me;
  });
  expectAllOk(outcomes);
}

// Sends and receives between two ranks match in posting order; a receive whose tag differs
// from the send's fails naming both tags.
// torch's tags: a receive takes the oldest message from its source with its tag. Rank 0 sends
// tags 1, 2, 3 (the tag-1 message several FIFOs long); rank 1 receives 3, then 2, then 1: the
// earlier messages are held until their receives come. Then a receive of the wrong size for a
// tag fails naming both sizes.
TEST(P2PEngine, ReceivesMatchTheirTagInAnyOrder) {
  std::vector<std::vector<char>> got(3);
  std::exception_ptr sizeError;
  auto outcomes = runGroup(2, [&](Communicator& comm) {
    P2PEngine engine(comm.transport(), comm.groupName());
    const std::vector<int64_t> sizes = {5000, 40, 7};  // 256-byte slots: tag 1 spans many
    if (comm.rank() == 0) {
      std::vector<std::vector<char>> data;
      for (int tag = 1; tag <= 3; ++tag) data.emplace_back(sizes[tag - 1], static_cast<char>('a' + tag));
      Completion d1, d2, d3;
      engine.post(op(true, 1, 1, data[0].data(), sizes[0], d1));
      engine.post(op(true, 1, 2, data[1].data(), sizes[1], d2));
      engine.post(op(true, 1, 3, data[2].data(), sizes[2], d3));
      for (Completion* d : {&d1, &d2, &d3}) {
        if (auto e = d->wait()) std::rethrow_exception(e);
      }
      std::vector<char> wrong(10, 'w');
      Completion d4;
      engine.post(op(true, 1, 9, wrong.data(), 10, d4));
      d4.wait();  // fits in the FIFO: the send completes whatever the receiver does
    } else {
      for (int i = 0; i < 3; ++i) got[i].assign(sizes[i], '?');
      Completion r3, r2, r1;
      engine.post(op(false, 0, 3, got[2].data(), sizes[2], r3));
      if (auto e = r3.wait()) std::rethrow_exception(e);
      engine.post(op(false, 0, 2, got[1].data(), sizes[1], r2));
      engine.post(op(false, 0, 1, got[0].data(), sizes[0], r1));
      for (Completion* d : {&r2, &r1}) {
        if (auto e = d->wait()) std::rethrow_exception(e);
      }
      std::vector<char> small(4);
      Completion r4;
      engine.post(op(false, 0, 9, small.data(), 4, r4));
      sizeError = r4.wait();
    }
  });
  expectAllOk(outcomes);
  for (int tag = 1; tag <= 3; ++tag) {
    EXPECT_EQ(got[tag - 1], std::vector<char>(got[tag - 1].size(), static_cast<char>('a' + tag)))
        << "tag " << tag;
  }
  RankOutcome wrong{sizeError};
  ASSERT_TRUE(threw<CommError>(wrong)) << "the receive succeeded: " << wrong.message();
  EXPECT_NE(wrong.message().find("4 bytes (tag 9)"), std::string::npos) << wrong.message();
  EXPECT_NE(wrong.message().find("sent 10 bytes"), std::string::npos) << wrong.message();
}

}  // namespace
}  // namespace ring
