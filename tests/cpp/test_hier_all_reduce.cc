// The two-level all_reduce over threads as ranks on made-up hosts (CommOptions::hostId): shared
// memory inside a "host", TCP on loopback between them. Every plan (flat ring, two levels with
// a ring, recursive doubling, rounds of several hosts or a direct round between hosts, auto) on
// layouts with equal, unequal and interleaved hosts gives the closed-form results
// (closed_forms.h) for every op kind, the same bits on every rank for order-sensitive float
// sums, within the float bound of the exact sum; and ranks that set different plans fail at
// set-up on every rank, naming the knob.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "closed_forms.h"
#include "comm_test_support.h"
#include "made_up_hosts.h"
#include "common/errors.h"

namespace ring {
namespace {

using namespace testing_support;

std::vector<Layout> layouts() {
  return {
      {"2x2", {0, 0, 1, 1}},
      {"3+1", {0, 0, 0, 1}},
      {"1+2+3 interleaved", {0, 1, 2, 1, 2, 2}},
      {"5 hosts of 1", {0, 1, 2, 3, 4}},
      {"3x2", {0, 0, 1, 1, 2, 2}},
  };
}

CommOptions hostOptions(const Layout& l, int rank, const std::string& algo) {
  return madeUpHostOptions(l, rank, algo, "hier");
}

// plan_choice.h's table with madeUpHostOptions' limits (direct 1 KiB, recursive up to 2 KiB).
// Rounds of up to k = 1 + 1024 / S hosts: on 2 or 3 hosts the direct round covers every S with
// k >= 3, so what remains is doubling; on 5 hosts S of 257-512 bytes gives k = 3 or 4, and five
// by threes or fours is a round of 3 with two hosts folded (three exchanges, two copies: doubling
// takes four exchanges).
// On hosts of unequal size, past the direct round, auto takes the cheapest plan
// (plan_choice.cc, cheapestOnUnequalHosts); the expectations for
// those two layouts are the model's (torch_ring_backend/bench/model.py: flat_ring with the
// widest host, _segmented for the ring, _leaders_all_reduce for the rounds, at the default
// links and 256-byte slots), not this code's.
Algorithm expectedPlan(const std::string& algo, int64_t bytes, int hosts,
                       const std::string& layout) {
  if (algo == "ring") return Algorithm::Ring;
  if (algo == "hier_ring") return Algorithm::HierRing;
  if (algo == "hier_rd") return Algorithm::HierRd;
  if (algo == "hier_radix") return Algorithm::HierRadix;
  if (algo == "hier_direct") return Algorithm::HierDirect;
  if (bytes * (hosts - 1) <= 1024) return Algorithm::HierDirect;  // several hosts
  if (layout == "3+1") {
    // The model: past the direct round's budget (1 KiB) the flat ring, 97-195 us against the
    // leaders' 150-297 (at 1200-2400 B a round is 5-10 slices of 256 B in lock step, each
    // paying the latency) and the segments' ring 169-340.
    return Algorithm::Ring;
  }
  if (layout == "1+2+3 interleaved") {
    // The model: the leaders' direct round 92-151 us against the flat ring's 155 at 600-1200 B;
    // from 2002 B the flat ring (156 us against the direct round's 240: 8 slices).
    return bytes <= 1200 ? Algorithm::HierDirect : Algorithm::Ring;
  }
  if (bytes > 2048) return Algorithm::HierRing;
  if (hosts == 5 && bytes > 256 && bytes <= 512) return Algorithm::HierRadix;
  if (hosts <= 3 || hosts == 5) return Algorithm::HierRd;
  throw std::logic_error(strCat("no expectation for ", hosts, " hosts"));
}

struct Case {
  DType t;
  RedOp op;
};

// Every rank ended well and holds what rank 0 holds (`digest`: per rank, of its results).
template <typename Digest>
void expectOkAndTheSameBits(const std::vector<RankOutcome>& out, const std::vector<Digest>& digest,
                            const std::string& what) {
  for (size_t r = 0; r < out.size(); ++r) {
    EXPECT_TRUE(out[r].ok()) << what << ", rank " << r << ": " << out[r].message();
    EXPECT_EQ(digest[r], digest[0]) << what << ": rank " << r << " holds other bits than rank 0";
  }
}

// Throws unless every x[i] is within the float bound (n-1) * eps * sum |v| of the exact sum of
// value(r, i) over the n ranks (any order of float additions stays inside it).
template <typename Value>
void checkWithinFloatBound(const std::vector<float>& x, int n, const Value& value,
                           const std::string& what) {
  for (size_t i = 0; i < x.size(); ++i) {
    double exact = 0, magnitude = 0;
    for (int r = 0; r < n; ++r) {
      exact += value(r, static_cast<int64_t>(i));
      magnitude += std::fabs(value(r, static_cast<int64_t>(i)));
    }
    const double bound = (n - 1) * std::ldexp(1.0, -24) * magnitude * 1.0001;
    if (std::fabs(x[i] - exact) > bound) {
      throw std::runtime_error(strCat(what, "element ", i, ": ", x[i], " vs exact ", exact,
                                      ", bound ", bound));
    }
  }
}

class EveryPlan : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryPlan, GivesTheClosedFormsOnEveryLayout) {
  const std::string algo = GetParam();
  const std::vector<Case> cases = {{DType::Float32, RedOp::Sum},  {DType::Int32, RedOp::Max},
                                   {DType::Int64, RedOp::Min},    {DType::Float32, RedOp::Avg},
                                   {DType::Int64, RedOp::Avg},    {DType::Int32, RedOp::Product},
                                   {DType::Float32, RedOp::PreMulSum}, {DType::Bool, RedOp::Max},
                                   {DType::BFloat16, RedOp::Sum}};
  for (const Layout& l : layouts()) {
    const int n = static_cast<int>(l.hostOf.size());
    MemoryStore store;
    auto out = runRanks(n, [&](int rank) {
      Communicator comm(store, rank, n, hostOptions(l, rank, algo));
      uint64_t seq = 0;
      for (const Case& c : cases) {
        for (int64_t count : {1, 5, 300, 1001}) {
          const int64_t bytes = count * static_cast<int64_t>(elementSize(c.t));
          if (comm.allReducePlan(bytes) !=
              expectedPlan(algo, bytes, comm.layout().hosts(), l.name)) {
            throw std::runtime_error(strCat("plan ", static_cast<int>(comm.allReducePlan(bytes)),
                                            " for ", bytes, " bytes"));
          }
          auto data = buffer(c.t, count, [&](int64_t i) { return inputFor(c.t, c.op, rank, i); });
          runAllReduce(comm, data.data(), count, c.t, c.op, 0.5, call(seq++));
          const int64_t bad = firstMismatch(c.t, data.data(), count, [&](int64_t i) {
            return expectedFor(c.t, c.op, n, i);
          });
          if (bad >= 0) {
            throw std::runtime_error(strCat(dtypeName(c.t), " ", redOpName(c.op), " count ",
                                            count, ": element ", bad, " wrong"));
          }
        }
      }
    });
    for (int r = 0; r < n; ++r) {
      EXPECT_TRUE(out[static_cast<size_t>(r)].ok())
          << algo << " on " << l.name << ", rank " << r << ": " << out[static_cast<size_t>(r)].message();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Plans, EveryPlan,
                         ::testing::Values("ring", "hier_ring", "hier_rd", "hier_radix",
                                           "hier_direct", "auto"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

// Contributions whose float sum depends on the order of additions (large values of both signs
// and small ones that survive or vanish by what they meet first): every rank must hold the very
// same bits, and those within the float bound (n-1) * eps * sum |x| of the exact sum.
TEST(TwoLevelAllReduce, FloatSumsAreTheSameBitsOnEveryRank) {
  for (const std::string algo : {"hier_ring", "hier_rd", "hier_radix", "hier_direct"}) {
    for (const Layout& l : layouts()) {
      const int n = static_cast<int>(l.hostOf.size());
      const int64_t count = 777;
      auto value = [](int r, int64_t i) {
        std::mt19937 g(static_cast<unsigned>(r * 100003 + i));
        std::uniform_real_distribution<float> u(-1.0f, 1.0f);
        const float scale = (r + i) % 3 == 0 ? 3.0e7f : 1.0f;
        return u(g) * scale;
      };
      std::vector<uint64_t> digest(static_cast<size_t>(n));
      MemoryStore store;
      auto out = runRanks(n, [&](int rank) {
        Communicator comm(store, rank, n, hostOptions(l, rank, algo));
        std::vector<float> x(static_cast<size_t>(count));
        for (int64_t i = 0; i < count; ++i) x[static_cast<size_t>(i)] = value(rank, i);
        runAllReduce(comm, x.data(), count, DType::Float32, RedOp::Sum, 1.0, call(0));
        digest[static_cast<size_t>(rank)] = fingerprintBytes(x.data(), x.size() * sizeof(float));
        checkWithinFloatBound(x, n, value, "");
      });
      expectOkAndTheSameBits(out, digest, strCat(algo, " on ", l.name));
    }
  }
}

// MAX of -0 and +0 is either, by which operand comes first (reduce_ops.h keeps the second when
// neither is greater): partners that combined in their own orders would keep different zeros.
// Every rank must hold the same bits all the same.
TEST(TwoLevelAllReduce, MaxOfSignedZerosIsTheSameZeroOnEveryRank) {
  for (const std::string algo : {"hier_ring", "hier_rd", "hier_radix", "hier_direct"}) {
    for (const Layout& l : layouts()) {
      const int n = static_cast<int>(l.hostOf.size());
      const int64_t count = 64;
      std::vector<std::vector<float>> results(static_cast<size_t>(n));
      MemoryStore store;
      auto out = runRanks(n, [&](int rank) {
        Communicator comm(store, rank, n, hostOptions(l, rank, algo));
        std::vector<float> x(static_cast<size_t>(count));
        for (int64_t i = 0; i < count; ++i) {
          x[static_cast<size_t>(i)] = ((rank * 7 + i) >> (i % 3)) % 2 ? -0.0f : 0.0f;
        }
        runAllReduce(comm, x.data(), count, DType::Float32, RedOp::Max, 1.0, call(0));
        results[static_cast<size_t>(rank)] = x;
      });
      for (int r = 0; r < n; ++r) {
        ASSERT_TRUE(out[static_cast<size_t>(r)].ok()) << out[static_cast<size_t>(r)].message();
        for (int64_t i = 0; i < count; ++i) {
          const float got = results[static_cast<size_t>(r)][static_cast<size_t>(i)];
          const float first = results[0][static_cast<size_t>(i)];
          ASSERT_EQ(got, 0.0f);
          ASSERT_EQ(std::signbit(got), std::signbit(first))
              << algo << " on " << l.name << ": rank " << r << " element " << i;
        }
      }
    }
  }
}

// TORCH_RING_DIRECT_BYTES bounds the rounds between hosts, which the fingerprint does not show
// (plan_choice.h): in a group of several hosts it is compared at set-up, and a rank that sets
// another value fails there on every rank, naming the knob and both values, before any call.
TEST(TwoLevelAllReduce, RanksWithDifferentDirectLimitsFailAtSetUpNamingTheKnob) {
  for (const Layout& l : {layouts()[0], layouts()[3]}) {
    const int n = static_cast<int>(l.hostOf.size());
    MemoryStore store;
    auto out = runRanks(n, [&](int rank) {
      CommOptions o = hostOptions(l, rank, "auto");
      if (rank == 1) o.directBytes = 0;
      Communicator comm(store, rank, n, o);
    });
    for (int r = 0; r < n; ++r) {
      const std::string m = out[static_cast<size_t>(r)].message();
      EXPECT_NE(m.find("TORCH_RING_DIRECT_BYTES"), std::string::npos)
          << l.name << " rank " << r << ": " << m;
      EXPECT_NE(m.find(r == 1 ? "direct_bytes=1024" : "direct_bytes=0"), std::string::npos)
          << l.name << " rank " << r << ": " << m;
    }
  }
}

// Rounds of several hosts with more than one round, and hosts folded in and out: nine hosts
// (3 x 3 by threes), eight hosts whose last has two ranks (seven hosts: a round of 4 with three
// folded, or doubling), against the closed form, the same bits on every rank, and the float
// bound. The plan each size takes is checked against plan_choice.h's table worked by hand.
TEST(TwoLevelAllReduce, RoundsOfSeveralHostsOnManyHosts) {
  struct Shape {
    Layout layout;
    std::vector<std::pair<int64_t, Algorithm>> planOfCount;  // float32 elements -> auto's plan
  };
  const std::vector<Shape> shapes = {
      // 9 hosts: 40 floats (160 B): k = 7, 3 x 3; 100 (400 B): k = 3, 3 x 3; 300 (1200 B): k = 2.
      {{"9 hosts of 1", {0, 1, 2, 3, 4, 5, 6, 7, 8}},
       {{40, Algorithm::HierRadix}, {100, Algorithm::HierRadix}, {300, Algorithm::HierRd}}},
      // 7 hosts of unequal size: 40 floats: 160 x 6 <= 1024, direct. Past the budget auto
      // prices the plans through the leaders (cheapestOnUnequalHosts), and at these sizes the
      // direct round's one latency a slice wins: 60 floats (240 B) 30 us against a round of 4
      // with three folded 80 us; 100 (400 B, two slices) 61 us against doubling's 160 (the
      // model, default links). hier_radix below still runs the rounds of 4 and of 2 here.
      {{"6 of 1 and 1 of 2", {0, 1, 2, 3, 4, 5, 6, 6}},
       {{40, Algorithm::HierDirect}, {60, Algorithm::HierDirect}, {100, Algorithm::HierDirect}}},
  };
  auto value = [](int r, int64_t i) {
    std::mt19937 g(static_cast<unsigned>(r * 7919 + i));
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    return u(g) * ((r + i) % 3 == 0 ? 3.0e7f : 1.0f);
  };
  for (const Shape& shape : shapes) {
    const Layout& l = shape.layout;
    const int n = static_cast<int>(l.hostOf.size());
    for (const std::string algo : {"auto", "hier_radix"}) {
      std::vector<std::vector<uint64_t>> digest(static_cast<size_t>(n));
      MemoryStore store;
      auto out = runRanks(n, [&](int rank) {
        Communicator comm(store, rank, n, hostOptions(l, rank, algo));
        uint64_t seq = 0;
        for (auto [count, plan] : shape.planOfCount) {
          const Algorithm want = algo == "auto" ? plan : Algorithm::HierRadix;
          if (comm.allReducePlan(count * 4) != want) {
            throw std::runtime_error(strCat(count, " floats: plan ",
                                            static_cast<int>(comm.allReducePlan(count * 4))));
          }
          std::vector<float> x(static_cast<size_t>(count));
          for (int64_t i = 0; i < count; ++i) x[static_cast<size_t>(i)] = value(rank, i);
          runAllReduce(comm, x.data(), count, DType::Float32, RedOp::Sum, 1.0, call(seq++));
          digest[static_cast<size_t>(rank)].push_back(
              fingerprintBytes(x.data(), x.size() * sizeof(float)));
          checkWithinFloatBound(x, n, value, strCat(count, " floats, "));
          // Integers: the closed form exactly (every rank's contribution counted once).
          std::vector<int64_t> k(static_cast<size_t>(count));
          for (int64_t i = 0; i < count; ++i) k[static_cast<size_t>(i)] = (rank + 1) * 1000 + i;
          runAllReduce(comm, k.data(), count, DType::Int64, RedOp::Sum, 1.0, call(seq++));
          for (int64_t i = 0; i < count; ++i) {
            const int64_t want = 1000 * static_cast<int64_t>(n) * (n + 1) / 2 + n * i;
            if (k[static_cast<size_t>(i)] != want) {
              throw std::runtime_error(strCat(count, " int64, element ", i, ": ",
                                              k[static_cast<size_t>(i)], " vs ", want));
            }
          }
        }
      });
      expectOkAndTheSameBits(out, digest, strCat(algo, " on ", l.name));
    }
  }
}

// Past the rounds, auto takes the cheaper of the flat ring and two levels at the links' prices
// (schedule/ring_costs.h). 2 hosts of 2, 16 KiB, 256-byte slots:
//   the network as fast as shared memory (no latency, 1e9 B/s both): flat 16 loops x 6 hops x
//   256 B = 24.6 us; two levels 2 x 8 KiB + 2 x 4 KiB at 1e9 / 2 = 32.8 us: the flat ring;
//   the default links (10 GbE): the flat ring pays 25 us on each of 3 + 15 x 6 network hops,
//   two levels on 2 of them: two levels.
// Each rank then holds the bits of the plan it names: the same as a job forced to that plan.
TEST(TwoLevelAllReduce, AutoTakesTheRingItPricesLowerAndRunsIt) {
  const Layout l{"2x2", {0, 0, 1, 1}};
  const int64_t count = 4096;
  auto value = [](int r, int64_t i) {
    std::mt19937 g(static_cast<unsigned>(r * 131 + i));
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    return u(g) * (i % 5 == 0 ? 1.0e6f : 1.0f);
  };
  auto run = [&](const std::string& algo, const std::string& link, Algorithm want) {
    std::vector<std::vector<uint64_t>> digest(4);
    MemoryStore store;
    auto out = runRanks(4, [&](int rank) {
      CommOptions o = hostOptions(l, rank, algo);
      o.shmLink = link;
      o.netLink = link;
      Communicator comm(store, rank, 4, o);
      if (comm.allReducePlan(count * 4) != want) {
        throw std::runtime_error(strCat("plan ", static_cast<int>(comm.allReducePlan(count * 4))));
      }
      std::vector<float> x(static_cast<size_t>(count));
      for (int64_t i = 0; i < count; ++i) x[static_cast<size_t>(i)] = value(rank, i);
      runAllReduce(comm, x.data(), count, DType::Float32, RedOp::Sum, 1.0, call(0));
      checkWithinFloatBound(x, 4, value, "");
      digest[static_cast<size_t>(rank)].push_back(
          fingerprintBytes(x.data(), x.size() * sizeof(float)));
    });
    expectOkAndTheSameBits(out, digest, strCat(algo, " with links '", link, "'"));
    return digest[0];
  };
  const auto flat = run("ring", "", Algorithm::Ring);
  const auto twoLevels = run("hier_ring", "", Algorithm::HierRing);
  ASSERT_NE(flat, twoLevels) << "the two plans add in different orders; the check needs both";
  EXPECT_EQ(run("auto", "0,1e9", Algorithm::Ring), flat);
  EXPECT_EQ(run("auto", "", Algorithm::HierRing), twoLevels);
}

TEST(TwoLevelAllReduce, RanksWithDifferentLinkPricesFailAtSetUpNamingTheKnob) {
  const Layout l{"2x2", {0, 0, 1, 1}};
  MemoryStore store;
  auto out = runRanks(4, [&](int rank) {
    CommOptions o = hostOptions(l, rank, "auto");
    if (rank == 3) o.netLink = "1e-3,1e8";
    Communicator comm(store, rank, 4, o);
  });
  for (int r = 0; r < 4; ++r) {
    const std::string m = out[static_cast<size_t>(r)].message();
    EXPECT_NE(m.find("TORCH_RING_NET_LINK"), std::string::npos) << "rank " << r << ": " << m;
    EXPECT_NE(m.find("net_link=0.001,100000000"), std::string::npos) << "rank " << r << ": " << m;
  }
}

TEST(TwoLevelAllReduce, RanksWithDifferentPlansFailAtSetUpNamingTheKnob) {
  const Layout l{"2x2", {0, 0, 1, 1}};
  MemoryStore store;
  auto out = runRanks(4, [&](int rank) {
    Communicator comm(store, rank, 4, hostOptions(l, rank, rank == 2 ? "hier_rd" : "auto"));
  });
  for (int r = 0; r < 4; ++r) {
    const std::string m = out[static_cast<size_t>(r)].message();
    EXPECT_NE(m.find("TORCH_RING_ALGO"), std::string::npos) << "rank " << r << ": " << m;
    EXPECT_NE(m.find("algo=hier_rd"), std::string::npos) << "rank " << r << ": " << m;
  }
}


// torch's time estimator prices a call as the plan it would take: the alpha-beta model's cost
// of that plan (docs/scale.md; schedule/ring_costs.h holds its closed forms) plus the call's
// overhead. The plan comes from planOf; which closed form belongs to which plan is written out
// here, from the model, so a row of the plan table that prices one plan as another fails.
TEST(TimeEstimate, EachCallIsPricedAsThePlanItTakes) {
  // One host too: its direct round (with and without a mailbox) and its ring, priced over
  // shared memory.
  const std::vector<Layout> layouts = {
      {"one host of 3", {0, 0, 0}}, {"2x2", {0, 0, 1, 1}}, {"3+1+2", {0, 0, 0, 1, 2, 2}}};
  const std::vector<Collective> collectives = {
      Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter,
      Collective::Broadcast, Collective::Reduce,    Collective::Gather,
      Collective::Scatter,   Collective::Barrier,   Collective::AllToAll};
  for (const Layout& l : layouts) {
    for (const char* algo : {"auto", "ring", "hier_ring", "hier_rd", "hier_direct", "hier_radix"}) {
      const int n = static_cast<int>(l.hostOf.size());
      MemoryStore store;
      auto out = runRanks(n, [&](int rank) {
        CommOptions o = hostOptions(l, rank, algo);
        o.mailboxBytes = 128;  // a direct round inside one host past the mailbox too (250 bytes)
        Communicator comm(store, rank, n, o);
        PlanSettings s;  // madeUpHostOptions' figures; the links at their defaults
        s.ranks = n;
        s.slotBytes = 256;
        const RingShape shape = shapeOf(s, comm.layout());
        // What a message between two ranks crosses at worst: the network once there are hosts.
        const LinkCost far = comm.layout().hosts() > 1 ? kDefaultNetLink : kDefaultShmLink;
        const LinkCost shm = kDefaultShmLink;
        int directRounds = 0, mailboxRounds = 0;  // the one host's rows this test must reach
        for (Collective k : collectives) {
          for (int64_t bytes : {0, 64, 250, 300, 1000, 3000, 65536}) {
            const CallPlan plan = comm.planOf(k, bytes);
            directRounds += plan.algorithm == Algorithm::Direct;
            mailboxRounds += plan.mailboxRound && k != Collective::Barrier;
            const double b = static_cast<double>(bytes);
            const bool twoLevels = plan.algorithm != Algorithm::Ring;
            double want = 0;
            // The direct round inside one host: every rank's message to the n-1 others at once.
            const double directRound = shm.alphaSeconds + b * (n - 1) / shm.bytesPerSecond;
            switch (k) {
              case Collective::AllReduce:
                if (plan.algorithm == Algorithm::HierRd || plan.algorithm == Algorithm::HierRadix) {
                  want = leadersAllReduceSeconds(shape, comm.layout(), b, BetweenHosts{&plan.rounds});
                } else if (plan.algorithm == Algorithm::HierDirect) {
                  want = leadersAllReduceSeconds(shape, comm.layout(), b, BetweenHosts{});
                } else if (plan.algorithm == Algorithm::HierRing) {
                  want = comm.layout().ranksPerHost() == 0
                             ? segmentedAllReduceSeconds(shape, comm.layout(), b)
                             : twoLevelAllReduceSeconds(shape, b);
                } else if (plan.algorithm == Algorithm::Direct) {
                  want = directRound;
                } else {
                  want = flatAllReduceSeconds(shape, b);
                }
                break;
              case Collective::AllGather:
              case Collective::ReduceScatter:
                want = plan.algorithm == Algorithm::Direct ? directRound
                       : twoLevels ? twoLevelAllGatherSeconds(shape, b * n)
                                   : flatAllGatherSeconds(shape, b * n);
                break;
              case Collective::Broadcast:
              case Collective::Reduce:  // a chain of n-1 hops of the whole message
                want = flatAllGatherSeconds(shape, b * n);
                break;
              case Collective::Gather:
              case Collective::Scatter:  // the root's exchange with each other rank in turn
                want = (n - 1) * (far.alphaSeconds + b / far.bytesPerSecond);
                break;
              case Collective::AllToAll:  // n-1 rounds of one rank's share
                want = (n - 1) * (far.alphaSeconds + b / n / far.bytesPerSecond);
                break;
              default:  // barrier: one round of empty messages
                want = far.alphaSeconds;
                break;
            }
            EXPECT_NEAR(comm.estimatedSeconds(k, bytes), kCallOverheadSeconds + want,
                        1e-12 + 1e-9 * want)
                << l.name << " " << algo << " " << collectiveName(k) << " of " << bytes
                << " bytes by " << algorithmRow(plan.algorithm).word << ", rank " << rank;
          }
        }
        if (comm.layout().hosts() == 1 && std::string(algo) == "auto") {
          EXPECT_GT(directRounds, mailboxRounds) << "no direct round without a mailbox priced";
          EXPECT_GT(mailboxRounds, 0) << "no mailbox round priced";
        }
      });
      expectEveryRankOk(out, strCat(l.name, " ", algo));
    }
  }
}

}  // namespace
}  // namespace ring
