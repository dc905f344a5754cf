// all_gather, reduce_scatter and broadcast across made-up hosts (threads as ranks,
// CommOptions::hostId: shared memory inside a "host", TCP on loopback between): under every
// TORCH_RING_ALGO, on equal hosts with contiguous and interleaved ranks and on unequal hosts,
// the plan is the one plan_choice.h's table names, and the results are what the collectives'
// definitions say (torch.distributed's documentation): all_gather's block r is rank r's input,
// reduce_scatter's output on rank r is the reduction of every rank's block r (closed forms,
// closed_forms.h), a broadcast leaves the root's buffer everywhere.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
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
      {"2x2 interleaved", {0, 1, 0, 1}},
      {"3x2 interleaved", {0, 1, 2, 0, 1, 2}},
      {"2x3", {0, 0, 0, 1, 1, 1}},
      {"4 hosts of 1", {0, 1, 2, 3}},
      {"3+1 (unequal)", {0, 0, 0, 1}},
      {"1+2+3 interleaved (unequal)", {0, 1, 2, 1, 2, 2}},
  };
}

CommOptions hostOptions(const Layout& l, int rank, const std::string& algo) {
  return madeUpHostOptions(l, rank, algo, "hier-gs");
}

struct Shape {
  int hosts;
  int perHost;  // 0: unequal
  int widest;   // the largest host's ranks
};

Shape shapeOf(const Layout& l) {
  std::vector<int> count;
  for (int h : l.hostOf) {
    if (h >= static_cast<int>(count.size())) count.resize(static_cast<size_t>(h) + 1, 0);
    ++count[static_cast<size_t>(h)];
  }
  int each = count[0];
  int widest = 0;
  for (int c : count) {
    each = c == each ? each : 0;
    widest = c > widest ? c : widest;
  }
  return Shape{static_cast<int>(count.size()), each, widest};
}

// plan_choice.h's table, written out again (the direct budget of made-up hosts: 1024 bytes).
// reduce_scatter's is the same.
Algorithm expectedGatherPlan(const std::string& algo, const Shape& s, int64_t partBytes) {
  if (algo == "ring" || s.hosts == 1) return Algorithm::Ring;
  if (algo == "hier_direct") return Algorithm::HierDirect;
  if (algo != "auto") return Algorithm::HierRing;
  if (s.perHost == 0) {  // unequal hosts: through the leaders, each sending its padded block
    return partBytes * s.widest * (s.hosts - 1) <= 1024 ? Algorithm::HierDirect
                                                         : Algorithm::Ring;
  }
  if (partBytes * (s.hosts - 1) <= 1024) return Algorithm::HierDirect;
  return s.perHost >= 2 ? Algorithm::HierRing : Algorithm::Ring;
}

Algorithm expectedScatterPlan(const std::string& algo, const Shape& s, int64_t partBytes) {
  return expectedGatherPlan(algo, s, partBytes);
}

// Exact in every dtype used (0..199); `call` changes every block from one call to the next, so a
// part the plan failed to write cannot keep a right value from the call before.
double gathered(int r, int64_t i, uint64_t call) {
  return static_cast<double>((r * 37 + i * 11 + static_cast<int64_t>(call) * 13) % 200);
}

// Runs `body` on every rank of every layout, with the plan knob `algo`; every rank must end
// without an error.
void onEveryLayout(const std::string& algo,
                   const std::function<void(Communicator&, const Shape&)>& body) {
  for (const Layout& l : layouts()) {
    const int n = static_cast<int>(l.hostOf.size());
    const Shape shape = shapeOf(l);
    MemoryStore store;
    auto out = runRanks(n, [&](int rank) {
      Communicator comm(store, rank, n, hostOptions(l, rank, algo));
      body(comm, shape);
    });
    expectEveryRankOk(out, algo + " on " + l.name);
  }
}

class EveryGatherScatterPlan : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryGatherScatterPlan, AllGatherPutsRankRsInputInBlockR) {
  const std::string algo = GetParam();
  onEveryLayout(algo, [&](Communicator& comm, const Shape& shape) {
      const int rank = comm.rank();
      const int n = comm.size();
      uint64_t seq = 0;
      for (DType t : {DType::Float32, DType::UInt8, DType::BFloat16, DType::Int64}) {
        for (int64_t count : {0, 1, 5, 300, 1001}) {
          const int64_t part = count * static_cast<int64_t>(elementSize(t));
          const Algorithm want = expectedGatherPlan(algo, shape, part);
          if (comm.allGatherPlan(part) != want) {
            throw std::runtime_error(strCat("all_gather plan ",
                                            static_cast<int>(comm.allGatherPlan(part)), " for ",
                                            part, " bytes, expected ", static_cast<int>(want)));
          }
          // Twice: from a separate input, and from this rank's block of the output (FSDP).
          for (bool inPlace : {false, true}) {
            const uint64_t thisCall = seq;
            auto input = buffer(t, count, [&](int64_t i) { return gathered(rank, i, thisCall); });
            auto output = buffer(t, count * n, [](int64_t) { return 255; });
            const int64_t es = static_cast<int64_t>(elementSize(t));
            const void* in = input.data();
            if (inPlace) {
              std::memcpy(output.data() + rank * count * es, input.data(),
                          static_cast<size_t>(count * es));
              in = output.data() + rank * count * es;
            }
            runAllGather(comm, in, output.data(), count, t, call(seq++));
            const int64_t bad = firstMismatch(t, output.data(), count * n, [&](int64_t g) {
              return gathered(static_cast<int>(g / count), g % count, thisCall);
            });
            if (bad >= 0) {
              throw std::runtime_error(strCat(dtypeName(t), " count ", count,
                                              inPlace ? " in place" : "", ": element ", bad,
                                              " (block ", bad / count, ") wrong"));
            }
          }
        }
      }
  });
}

TEST_P(EveryGatherScatterPlan, ReduceScatterGivesRankRTheReductionOfBlockR) {
  const std::string algo = GetParam();
  const std::vector<std::pair<DType, RedOp>> cases = {
      {DType::Float32, RedOp::Sum},   {DType::Int32, RedOp::Max},
      {DType::Int64, RedOp::Min},     {DType::Float32, RedOp::Avg},
      {DType::Int64, RedOp::Avg},     {DType::Int32, RedOp::Product},
      {DType::Float32, RedOp::PreMulSum}, {DType::Bool, RedOp::Max},
      {DType::BFloat16, RedOp::Sum}};
  onEveryLayout(algo, [&](Communicator& comm, const Shape& shape) {
      const int rank = comm.rank();
      const int n = comm.size();
      uint64_t seq = 0;
      for (const auto& [t, op] : cases) {
        for (int64_t count : {0, 1, 5, 300, 1001}) {
          const int64_t part = count * static_cast<int64_t>(elementSize(t));
          if (comm.reduceScatterPlan(part) != expectedScatterPlan(algo, shape, part)) {
            throw std::runtime_error(strCat("reduce_scatter plan ",
                                            static_cast<int>(comm.reduceScatterPlan(part)),
                                            " for ", part, " bytes"));
          }
          // Element g of the input is element g % count of block g / count.
          auto input = buffer(t, count * n, [&](int64_t g) { return inputFor(t, op, rank, g); });
          const auto untouched = input;
          auto output = buffer(t, count, [](int64_t) { return 7; });
          runReduceScatter(comm, input.data(), output.data(), count, t, op, 0.5, call(seq++));
          const int64_t bad = firstMismatch(t, output.data(), count, [&](int64_t i) {
            return expectedFor(t, op, n, rank * count + i);
          });
          if (bad >= 0 || input != untouched) {
            throw std::runtime_error(strCat(dtypeName(t), " ", redOpName(op), " count ", count,
                                            bad >= 0 ? ": an element wrong: " : ": input changed",
                                            bad));
          }
        }
      }
  });
}

TEST_P(EveryGatherScatterPlan, BroadcastLeavesTheRootsBufferEverywhere) {
  const std::string algo = GetParam();
  onEveryLayout(algo, [&](Communicator& comm, const Shape& shape) {
      const int rank = comm.rank();
      const int n = comm.size();
      const Algorithm want = algo == "ring" || shape.hosts == 1 ? Algorithm::Ring
                                                                : Algorithm::HierRing;
      if (comm.broadcastPlan() != want) {
        throw std::runtime_error(strCat("broadcast plan ", static_cast<int>(comm.broadcastPlan())));
      }
      uint64_t seq = 0;
      for (int root = 0; root < n; ++root) {
        for (int64_t count : {0, 1, 700}) {
          auto data = buffer(DType::Int32, count, [&](int64_t i) {
            return rank == root ? root * 1000 + i : -1;
          });
          runBroadcast(comm, data.data(), count, DType::Int32, root, call(seq++));
          const int64_t bad = firstMismatch(DType::Int32, data.data(), count,
                                            [&](int64_t i) { return root * 1000 + i; });
          if (bad >= 0) throw std::runtime_error(strCat("root ", root, ": element ", bad));
        }
      }
  });
}

INSTANTIATE_TEST_SUITE_P(Plans, EveryGatherScatterPlan,
                         ::testing::Values("ring", "hier_ring", "hier_rd", "hier_direct", "auto"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

// Float sums whose value depends on the order of additions: the two-level reduce_scatter is
// within the float bound (n-1) * eps * sum |x| of the exact sum, as the flat ring is.
TEST(TwoLevelReduceScatter, FloatSumsAreWithinTheBoundOfTheExactSum) {
  for (const Layout& l : {layouts()[1], layouts()[2], layouts()[6]}) {
    const int n = static_cast<int>(l.hostOf.size());
    const int64_t count = 333;
    auto value = [](int r, int64_t g) {
      std::mt19937 gen(static_cast<unsigned>(r * 100003 + g));
      std::uniform_real_distribution<float> u(-1.0f, 1.0f);
      return u(gen) * ((r + g) % 3 == 0 ? 3.0e7f : 1.0f);
    };
    MemoryStore store;
    auto out = runRanks(n, [&](int rank) {
      Communicator comm(store, rank, n, hostOptions(l, rank, "hier_ring"));
      std::vector<float> x(static_cast<size_t>(count * n)), y(static_cast<size_t>(count));
      for (int64_t g = 0; g < count * n; ++g) x[static_cast<size_t>(g)] = value(rank, g);
      runReduceScatter(comm, x.data(), y.data(), count, DType::Float32, RedOp::Sum, 1.0, call(0));
      for (int64_t i = 0; i < count; ++i) {
        double exact = 0, magnitude = 0;
        for (int r = 0; r < n; ++r) {
          exact += value(r, rank * count + i);
          magnitude += std::fabs(value(r, rank * count + i));
        }
        const double bound = (n - 1) * std::ldexp(1.0, -24) * magnitude * 1.0001;
        if (std::fabs(y[static_cast<size_t>(i)] - exact) > bound) {
          throw std::runtime_error(strCat("element ", i, ": ", y[static_cast<size_t>(i)],
                                          " vs exact ", exact));
        }
      }
    });
    expectEveryRankOk(out, l.name);
  }
}


// Where each rank sends under each plan, on 3 hosts of 2 with interleaved ranks (hosts {0,3},
// {1,4}, {2,5}; local index 0: ranks 0,1,2; local index 1: ranks 3,4,5), as docs/scale.md
// describes the plans: the flat ring sends to rank+1; two levels to the next rank of the
// host (0->3->0, ...) and to the next rank of the same local index (0->1->2->0, 3->4->5->3),
// or with the direct round to every other rank of that local index; broadcast from rank 0
// along the host-major ring 0 -> 3 -> 1 -> 4 -> 2 -> 5. (Right results alone would not show
// which plan ran: the flat ring gives them too.)
using Peers = std::vector<std::vector<int>>;  // per rank, the ranks it sent to, in order

Peers sentTo(Communicator& comm, const std::vector<uint64_t>& before) {
  Peers out(1);
  for (int p = 0; p < comm.size(); ++p) {
    if (p == comm.rank()) continue;
    const uint64_t now = comm.transport().sendLink(Channel::Collective, p).messagesSent();
    if (now > before[static_cast<size_t>(p)]) out[0].push_back(p);
  }
  return out;
}

std::vector<uint64_t> sentSoFar(Communicator& comm) {
  std::vector<uint64_t> v(static_cast<size_t>(comm.size()), 0);
  for (int p = 0; p < comm.size(); ++p) {
    if (p != comm.rank()) {
      v[static_cast<size_t>(p)] = comm.transport().sendLink(Channel::Collective, p).messagesSent();
    }
  }
  return v;
}

TEST(TwoLevelPlans, SendWhereThePlanSays) {
  const Layout l{"3x2 interleaved", {0, 1, 2, 0, 1, 2}};
  const Peers flat = {{1}, {2}, {3}, {4}, {5}, {0}};
  const Peers twoLevels = {{1, 3}, {2, 4}, {0, 5}, {0, 4}, {1, 5}, {2, 3}};
  const Peers direct = {{1, 2, 3}, {0, 2, 4}, {0, 1, 5}, {0, 4, 5}, {1, 3, 5}, {2, 3, 4}};
  const Peers flatChain = {{1}, {2}, {3}, {4}, {5}, {}};
  const Peers hostChain = {{3}, {4}, {5}, {1}, {2}, {}};
  struct Expect {
    const char* algo;
    Peers allGather, reduceScatter, broadcast;
  };
  for (const Expect& e : {Expect{"ring", flat, flat, flatChain},
                          Expect{"hier_ring", twoLevels, twoLevels, hostChain},
                          Expect{"hier_direct", direct, direct, hostChain}}) {
    const int n = 6;
    std::vector<Peers> got(static_cast<size_t>(n));
    MemoryStore store;
    auto out = runRanks(n, [&](int rank) {
      Communicator comm(store, rank, n, hostOptions(l, rank, e.algo));
      const int64_t count = 600;  // several slices of every part
      std::vector<float> in(static_cast<size_t>(count * n), 1.0f), outBuf(in.size());
      auto before = sentSoFar(comm);
      runAllGather(comm, in.data(), outBuf.data(), count, DType::Float32, call(0));
      got[static_cast<size_t>(rank)] = sentTo(comm, before);
      before = sentSoFar(comm);
      runReduceScatter(comm, in.data(), outBuf.data(), count, DType::Float32, RedOp::Sum, 1.0,
                         call(1));
      got[static_cast<size_t>(rank)].push_back(sentTo(comm, before)[0]);
      before = sentSoFar(comm);
      runBroadcast(comm, in.data(), count, DType::Float32, 0, call(2));
      got[static_cast<size_t>(rank)].push_back(sentTo(comm, before)[0]);
    });
    expectEveryRankOk(out, e.algo);
    for (int r = 0; r < n; ++r) {
      const Peers& g = got[static_cast<size_t>(r)];
      ASSERT_EQ(g.size(), 3u) << e.algo << " rank " << r;
      EXPECT_EQ(g[0], e.allGather[static_cast<size_t>(r)]) << e.algo << " all_gather, rank " << r;
      EXPECT_EQ(g[1], e.reduceScatter[static_cast<size_t>(r)])
          << e.algo << " reduce_scatter, rank " << r;
      EXPECT_EQ(g[2], e.broadcast[static_cast<size_t>(r)]) << e.algo << " broadcast, rank " << r;
    }
  }
}

// Hosts of unequal size, {0}, {1, 3}, {2, 4, 5} (ranks 0, 1, 2 the leaders): inside each host
// a ring (all_gather) or a chain to the leader (reduce_scatter: 3 -> 1, 4 -> 5 -> 2), between
// the leaders a ring 0 -> 1 -> 2 -> 0 or the direct round, and each leader's chain down its
// host (1 -> 3, 2 -> 4 -> 5), as hier_gather_scatter.h describes. The flat ring would send to
// rank + 1 (it still does under "ring").
TEST(TwoLevelPlans, UnequalHostsSendThroughTheirLeaders) {
  const Layout l{"1+2+3 interleaved (unequal)", {0, 1, 2, 1, 2, 2}};
  const Peers flat = {{1}, {2}, {3}, {4}, {5}, {0}};
  const Peers leadersRing = {{1}, {2, 3}, {0, 4}, {1}, {5}, {2}};
  const Peers leadersDirect = {{1, 2}, {0, 2, 3}, {0, 1, 4}, {1}, {5}, {2}};
  struct Expect {
    const char* algo;
    Peers both;  // all_gather's and reduce_scatter's
  };
  for (const Expect& e : {Expect{"ring", flat}, Expect{"hier_ring", leadersRing},
                          Expect{"hier_direct", leadersDirect}}) {
    const int n = 6;
    std::vector<Peers> gathered(static_cast<size_t>(n)), scattered(static_cast<size_t>(n));
    MemoryStore store;
    auto out = runRanks(n, [&](int rank) {
      Communicator comm(store, rank, n, hostOptions(l, rank, e.algo));
      const int64_t count = 600;  // several slices of every part
      std::vector<float> in(static_cast<size_t>(count * n), 1.0f), outBuf(in.size());
      auto before = sentSoFar(comm);
      runAllGather(comm, in.data(), outBuf.data(), count, DType::Float32, call(0));
      gathered[static_cast<size_t>(rank)] = sentTo(comm, before);
      before = sentSoFar(comm);
      runReduceScatter(comm, in.data(), outBuf.data(), count, DType::Float32, RedOp::Sum, 1.0,
                         call(1));
      scattered[static_cast<size_t>(rank)] = sentTo(comm, before);
    });
    expectEveryRankOk(out, e.algo);
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(gathered[static_cast<size_t>(r)][0], e.both[static_cast<size_t>(r)])
          << e.algo << " all_gather, rank " << r;
      EXPECT_EQ(scattered[static_cast<size_t>(r)][0], e.both[static_cast<size_t>(r)])
          << e.algo << " reduce_scatter, rank " << r;
    }
  }
}

// Each rank's contribution a bit of its own (2^r) plus the element's index: the sum says which
// ranks were counted, and how often. (A plan that counted two ranks twice and two not at all
// can keep the sum of linear inputs; not of these.)
TEST(TwoLevelReduceScatter, CountsEveryRankOnce) {
  for (const std::string algo : {"hier_ring", "hier_direct"}) {
    for (const Layout& l : layouts()) {
      const int n = static_cast<int>(l.hostOf.size());
      const int64_t count = 97;
      MemoryStore store;
      auto out = runRanks(n, [&](int rank) {
        Communicator comm(store, rank, n, hostOptions(l, rank, algo));
        std::vector<int64_t> x(static_cast<size_t>(count * n)), y(static_cast<size_t>(count));
        for (int64_t g = 0; g < count * n; ++g) {
          x[static_cast<size_t>(g)] = (int64_t{1} << rank) + g * 4096;
        }
        runReduceScatter(comm, x.data(), y.data(), count, DType::Int64, RedOp::Sum, 1.0, call(0));
        for (int64_t i = 0; i < count; ++i) {
          const int64_t want = ((int64_t{1} << n) - 1) + n * (rank * count + i) * 4096;
          if (y[static_cast<size_t>(i)] != want) {
            throw std::runtime_error(strCat("element ", i, ": ", y[static_cast<size_t>(i)],
                                            ", expected ", want));
          }
        }
      });
      expectEveryRankOk(out, strCat(algo, " on ", l.name));
    }
  }
}

// A rank that names another root: on the host-major ring (0, 2, 1, 3) it waits on the same
// neighbour as with the others' root, whose message names root 0, so it fails with the
// mismatch long before the timeout. (As on the flat ring, the ranks that only send finish the
// call; the group is broken for their next one.)
TEST(TwoLevelPlans, ABroadcastWithAnotherRootFailsWithAMismatchNotAHang) {
  const Layout l{"2x2 interleaved", {0, 1, 0, 1}};
  MemoryStore store;
  const auto start = Clock::now();
  auto out = runRanks(4, [&](int rank) {
    Communicator comm(store, rank, 4, hostOptions(l, rank, "auto"));
    std::vector<int32_t> x(100, rank);
    runBroadcast(comm, x.data(), 100, DType::Int32, rank == 3 ? 1 : 0,
                   CallInfo{0, std::chrono::seconds(8)});
  });
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(6)) << "ended by the timeout";
  const std::string m = out[3].message();
  EXPECT_NE(m.find("collective mismatch"), std::string::npos) << m;
  EXPECT_NE(m.find("(root 0)"), std::string::npos) << m;
  EXPECT_NE(m.find("(root 1)"), std::string::npos) << m;
}

}  // namespace
}  // namespace ring
