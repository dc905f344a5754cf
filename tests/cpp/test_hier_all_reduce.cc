// The two-level all_reduce over threads as ranks on made-up hosts (CommOptions::hostId): shared
// memory inside a "host", TCP on loopback between them. Every plan (flat ring, two levels with
// a ring or recursive doubling between hosts, auto) on layouts with equal, unequal and
// interleaved hosts gives the closed-form results (closed_forms.h) for every op kind, the same
// bits on every rank for order-sensitive float sums, within the float bound of the exact sum;
// and ranks that set different plans fail at set-up on every rank, naming the knob.
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

Algorithm expectedPlan(const std::string& algo, int64_t bytes, int hosts) {
  if (algo == "ring") return Algorithm::Ring;
  if (algo == "hier_ring") return Algorithm::HierRing;
  if (algo == "hier_rd") return Algorithm::HierRd;
  if (algo == "hier_direct") return Algorithm::HierDirect;
  if (bytes * (hosts - 1) <= 1024) return Algorithm::HierDirect;  // several hosts
  return bytes <= 2048 ? Algorithm::HierRd : Algorithm::HierRing;
}

struct Case {
  DType t;
  RedOp op;
};

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
          if (comm.allReducePlan(bytes) != expectedPlan(algo, bytes, comm.layout().hosts())) {
            throw std::runtime_error(strCat("plan ", static_cast<int>(comm.allReducePlan(bytes)),
                                            " for ", bytes, " bytes"));
          }
          auto data = buffer(c.t, count, [&](int64_t i) { return inputFor(c.t, c.op, rank, i); });
          comm.allReduce(data.data(), count, c.t, c.op, 0.5, call(seq++));
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
                         ::testing::Values("ring", "hier_ring", "hier_rd", "hier_direct",
                                           "auto"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

// Contributions whose float sum depends on the order of additions (large values of both signs
// and small ones that survive or vanish by what they meet first): every rank must hold the very
// same bits, and those within the float bound (n-1) * eps * sum |x| of the exact sum.
TEST(TwoLevelAllReduce, FloatSumsAreTheSameBitsOnEveryRank) {
  for (const std::string algo : {"hier_ring", "hier_rd", "hier_direct"}) {
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
        comm.allReduce(x.data(), count, DType::Float32, RedOp::Sum, 1.0, call(0));
        digest[static_cast<size_t>(rank)] = fingerprintBytes(x.data(), x.size() * sizeof(float));
        for (int64_t i = 0; i < count; ++i) {
          double exact = 0, magnitude = 0;
          for (int r = 0; r < n; ++r) {
            exact += value(r, i);
            magnitude += std::fabs(value(r, i));
          }
          const double bound = (n - 1) * std::ldexp(1.0, -24) * magnitude * 1.0001;
          if (std::fabs(x[static_cast<size_t>(i)] - exact) > bound) {
            throw std::runtime_error(strCat("element ", i, ": ", x[static_cast<size_t>(i)],
                                            " vs exact ", exact, ", bound ", bound));
          }
        }
      });
      for (int r = 0; r < n; ++r) {
        EXPECT_TRUE(out[static_cast<size_t>(r)].ok())
            << algo << " on " << l.name << ", rank " << r << ": "
            << out[static_cast<size_t>(r)].message();
        EXPECT_EQ(digest[static_cast<size_t>(r)], digest[0])
            << algo << " on " << l.name << ": rank " << r << " holds other bits than rank 0";
      }
    }
  }
}

// MAX of -0 and +0 is either, by which operand comes first (reduce_ops.h keeps the second when
// neither is greater): partners that combined in their own orders would keep different zeros.
// Every rank must hold the same bits all the same.
TEST(TwoLevelAllReduce, MaxOfSignedZerosIsTheSameZeroOnEveryRank) {
  for (const std::string algo : {"hier_ring", "hier_rd", "hier_direct"}) {
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
        comm.allReduce(x.data(), count, DType::Float32, RedOp::Max, 1.0, call(0));
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

// TORCH_RING_DIRECT_BYTES is not compared at set-up (plan_choice.h): a rank that sets another
// value runs recursive doubling where the others run the direct round, and the fingerprints
// of the first messages differ: an error on every rank, before the call's timeout.
TEST(TwoLevelAllReduce, RanksWithDifferentDirectLimitsFailWithAMismatchNotAHang) {
  for (const Layout& l : {layouts()[0], layouts()[3]}) {
    const int n = static_cast<int>(l.hostOf.size());
    MemoryStore store;
    const auto start = Clock::now();
    auto out = runRanks(n, [&](int rank) {
      CommOptions o = hostOptions(l, rank, "auto");
      if (rank == 1) o.directBytes = 0;
      Communicator comm(store, rank, n, o);
      std::vector<float> x(8, 1.0f);
      comm.allReduce(x.data(), 8, DType::Float32, RedOp::Sum, 1.0,
                     CallInfo{0, std::chrono::seconds(8)});
    });
    EXPECT_LT(Clock::now() - start, std::chrono::seconds(6)) << l.name << ": ended by the timeout";
    bool named = false;
    for (int r = 0; r < n; ++r) {
      const std::string m = out[static_cast<size_t>(r)].message();
      EXPECT_FALSE(m.empty()) << l.name << " rank " << r;
      named |= m.find("two-level direct") != std::string::npos;
    }
    EXPECT_TRUE(named) << l.name << ": " << out[0].message();
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

}  // namespace
}  // namespace ring
