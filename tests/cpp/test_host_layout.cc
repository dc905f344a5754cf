// The two-level all_reduce's pure parts: hosts from the ranks' groups, the segments between
// hosts (checked against chunkRange's partition, not against hostSegments' own arithmetic),
// the reduce and gather halves of the ring plan (in the plan simulator, against closed-form
// sums), and recursive doubling's round count (the textbook ceil(log2 m), +2 off powers of two).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "executor/plan_choice.h"
#include "schedule/radix_schedule.h"
#include "plan_simulator.h"
#include "schedule/host_layout.h"
#include "schedule/ring_plan.h"

namespace ring {
namespace {

TEST(HostLayout, HostsAreNumberedByTheirLowestRank) {
  HostLayout l = layoutFromGroups({5, 3, 5, 3, 9});
  ASSERT_EQ(l.hosts(), 3);
  EXPECT_EQ(l.members[0], (std::vector<int>{0, 2}));
  EXPECT_EQ(l.members[1], (std::vector<int>{1, 3}));
  EXPECT_EQ(l.members[2], (std::vector<int>{4}));
  EXPECT_EQ(l.hostOf, (std::vector<int>{0, 1, 0, 1, 2}));
  EXPECT_EQ(l.localIndex(2), 1);
  EXPECT_EQ(l.localIndex(4), 0);
}

std::vector<std::vector<int>> layouts() {
  return {
      {0, 0, 2, 2},           // 2 hosts x 2
      {0, 0, 0, 3},           // 3 + 1
      {0, 1, 2, 1, 2, 2},     // 1 + 2 + 3, interleaved
      {0, 1, 2, 3, 4},        // 5 hosts of one rank
      {0, 0, 2, 2, 4, 4},     // 3 hosts x 2
      {0, 0, 0, 0, 4, 4, 4},  // 4 + 3
  };
}

// Every element of [0, count) is in exactly one segment; each segment is inside the chunk its
// owner on every host holds after the reduce half (chunk local+1 of chunkRange's partition);
// and each rank's chunk is exactly the union of the segments it owns (no part of a host's
// partial sum is left out between hosts).
TEST(HostSegments, CoverTheBufferOnceAndLieInsideEveryOwnersChunk) {
  for (const auto& groups : layouts()) {
    const HostLayout l = layoutFromGroups(groups);
    for (int64_t count : {1, 2, 3, 5, 6, 7, 12, 100, 101}) {
      SCOPED_TRACE(testing::Message() << groups.size() << " ranks, count " << count);
      const auto segments = hostSegments(l, count);
      int64_t next = 0;
      std::vector<int64_t> ownedElems(groups.size(), 0);
      for (const HostSegment& s : segments) {
        EXPECT_EQ(s.range.offset, next);
        EXPECT_GT(s.range.count, 0);
        next = s.range.offset + s.range.count;
        ASSERT_EQ(static_cast<int>(s.owners.size()), l.hosts());
        for (int h = 0; h < l.hosts(); ++h) {
          const int owner = s.owners[static_cast<size_t>(h)];
          ASSERT_EQ(l.hostOf[static_cast<size_t>(owner)], h);
          const int parts = static_cast<int>(l.members[static_cast<size_t>(h)].size());
          const Range chunk = chunkRange(count, parts, (l.localIndex(owner) + 1) % parts);
          EXPECT_GE(s.range.offset, chunk.offset);
          EXPECT_LE(s.range.offset + s.range.count, chunk.offset + chunk.count);
          ownedElems[static_cast<size_t>(owner)] += s.range.count;
        }
      }
      EXPECT_EQ(next, count);
      for (int r = 0; r < static_cast<int>(groups.size()); ++r) {
        const int h = l.hostOf[static_cast<size_t>(r)];
        EXPECT_EQ(ownedElems[static_cast<size_t>(r)],
                  ownedChunk(l, h, l.localIndex(r), count).count)
            << "rank " << r;
      }
    }
  }
}

TEST(HostSegments, EqualHostsMakeOneSegmentPerLocalRank) {
  const HostLayout l = layoutFromGroups({0, 0, 0, 3, 3, 3});
  const auto segments = hostSegments(l, 100);
  ASSERT_EQ(segments.size(), 3u);
  for (int k = 0; k < 3; ++k) {
    const Range chunk = chunkRange(100, 3, k);
    EXPECT_EQ(segments[static_cast<size_t>(k)].range.offset, chunk.offset);
    // Chunk k is held by local rank k-1 of each host: ranks (k+2)%3 and 3+(k+2)%3.
    EXPECT_EQ(segments[static_cast<size_t>(k)].owners,
              (std::vector<int>{(k + 2) % 3, 3 + (k + 2) % 3}));
  }
  EXPECT_TRUE(hostSegments(l, 0).empty());
}

int64_t value(int r, int64_t i) { return (r + 1) * 1000003 + 7 * i; }
int64_t sumOverRanks(int n, int64_t i) { return 1000003LL * n * (n + 1) / 2 + 7LL * n * i; }

// The reduce half leaves chunk r+1 summed at rank r; the gather half, started from just that,
// leaves every element summed on every rank. Closed-form sums, in the plan simulator.
TEST(AllReduceHalves, ReduceThenGatherGiveTheSumEverywhere) {
  for (int n : {2, 3, 4, 7}) {
    for (int64_t count : {0, 1, 5, 37, 100}) {
      SCOPED_TRACE(testing::Message() << n << " ranks, count " << count);
      const int64_t slice = 4;
      std::vector<sim::RankState> ranks(static_cast<size_t>(n));
      for (int r = 0; r < n; ++r) {
        auto& st = ranks[static_cast<size_t>(r)];
        st.steps = planAllReduceReduceHalf(n, r, count, slice);
        for (int64_t i = 0; i < count; ++i) st.output.push_back(value(r, i));
        st.inputIsOutput = true;
      }
      sim::RingSimulator reduce(ranks, slice, 2);
      ASSERT_EQ(reduce.run(), sim::Outcome::Completed);
      std::vector<sim::RankState> second(static_cast<size_t>(n));
      for (int r = 0; r < n; ++r) {
        const Range owned = chunkRange(count, n, (r + 1) % n);
        const auto& out = reduce.rank(r).output;
        for (int64_t i = owned.offset; i < owned.offset + owned.count; ++i) {
          ASSERT_EQ(out[static_cast<size_t>(i)], sumOverRanks(n, i)) << "rank " << r << " elem " << i;
        }
        auto& st = second[static_cast<size_t>(r)];
        st.steps = planAllReduceGatherHalf(n, r, count, slice);
        // Only the owned chunk is meaningful: everything else must be overwritten.
        st.output.assign(static_cast<size_t>(count), -1);
        for (int64_t i = owned.offset; i < owned.offset + owned.count; ++i) {
          st.output[static_cast<size_t>(i)] = out[static_cast<size_t>(i)];
        }
        st.inputIsOutput = true;
      }
      sim::RingSimulator gather(second, slice, 2);
      ASSERT_EQ(gather.run(), sim::Outcome::Completed);
      for (int r = 0; r < n; ++r) {
        for (int64_t i = 0; i < count; ++i) {
          ASSERT_EQ(gather.rank(r).output[static_cast<size_t>(i)], sumOverRanks(n, i))
              << "rank " << r << " elem " << i;
        }
      }
    }
  }
}

// Recursive doubling's exchanges (Thakur, Rabenseifner and Gropp 2005): log2 m rounds, and two
// more off powers of two (the extra ranks fold in and out).
TEST(RadixSchedule, RoundsOfTwoAreRecursiveDoubling) {
  const std::vector<std::pair<int, int>> roundsOf = {{1, 0}, {2, 1}, {3, 3}, {4, 2},
                                                     {5, 4}, {8, 3}, {128, 7}, {100, 8}};
  for (auto [m, rounds] : roundsOf) {
    const RadixSchedule s = doublingSchedule(m);
    EXPECT_EQ(s.rounds(), rounds) << m << " ranks";
    int p = 1;
    while (p * 2 <= m) p *= 2;
    EXPECT_EQ(s.product(), p) << m << " ranks";
    for (int r : s.radices) EXPECT_EQ(r, 2);
  }
}

TEST(RadixSchedule, FewestExchangesThenFewestCopies) {
  // 128 hosts, rounds of up to 17: two rounds (16 x 8 = 128, 22 copies).
  EXPECT_EQ(radixSchedule(128, 17).radices, (std::vector<int>{16, 8}));
  EXPECT_EQ(radixSchedule(128, 17).copiesSent(), 22);
  EXPECT_EQ(radixSchedule(128, 500).radices, (std::vector<int>{128}));  // the direct round
  EXPECT_EQ(radixSchedule(9, 3).radices, (std::vector<int>{3, 3}));
  EXPECT_EQ(radixSchedule(6, 3).radices, (std::vector<int>{3, 2}));
  // 8 by threes: 3 x 2 with two folded is four exchanges; three rounds of 2 are three.
  EXPECT_EQ(radixSchedule(8, 3).radices, (std::vector<int>{2, 2, 2}));
  // 7 is prime: rounds of 3 and 2 with one rank folded (four exchanges, as recursive doubling
  // takes, but five copies against its four: so doubling).
  EXPECT_EQ(radixSchedule(7, 3).rounds(), 4);
  EXPECT_EQ(radixSchedule(7, 3).radices, (std::vector<int>{2, 2}));
  // 5 by fours: three exchanges whatever the round (4 or 3, with ranks folded); a round of 3
  // sends two copies, one of 4 three.
  EXPECT_EQ(radixSchedule(5, 4).radices, (std::vector<int>{3}));
  EXPECT_EQ(radixSchedule(5, 4).folded(), 2);
  EXPECT_EQ(radixSchedule(5, 4).rounds(), 3);
  // 1024 by up to 17: three rounds; 16 x 8 x 8 sends 29 copies, 16 x 16 x 4 sends 33.
  EXPECT_EQ(radixSchedule(1024, 17).radices, (std::vector<int>{16, 8, 8}));
  EXPECT_TRUE(radixSchedule(1, 5).radices.empty());
}

// Against every schedule there is, for small m: enumerate all radix sequences (2..k, product
// at most m and at least m/2) breadth first and keep the best by (exchanges, copies, folded).
TEST(RadixSchedule, NoScheduleBeatsTheChosenOne) {
  for (int m = 2; m <= 96; ++m) {
    for (int k = 2; k <= 12; ++k) {
      std::vector<std::vector<int>> frontier = {{}};
      std::tuple<int, int, int> best{1 << 30, 0, 0};
      while (!frontier.empty()) {
        std::vector<std::vector<int>> next;
        for (const auto& seq : frontier) {
          int p = 1, copies = 0;
          for (int r : seq) p *= r, copies += r - 1;
          if (2 * p >= m) {
            const int exchanges = static_cast<int>(seq.size()) + (p < m ? 2 : 0);
            best = std::min(best, std::make_tuple(exchanges, copies, m - p));
          }
          for (int r = 2; r <= k && p * r <= m; ++r) {
            auto longer = seq;
            longer.push_back(r);
            next.push_back(longer);
          }
        }
        frontier.swap(next);
      }
      const RadixSchedule s = radixSchedule(m, k);
      for (int r : s.radices) EXPECT_TRUE(r >= 2 && r <= k) << m << " by " << k;
      EXPECT_LE(s.product(), m);
      EXPECT_GE(2 * s.product(), m);
      EXPECT_EQ(std::make_tuple(s.rounds(), s.copiesSent(), s.folded()), best)
          << m << " ranks by up to " << k;
    }
  }
}

TEST(PlanChoice, TheTableOfPlanChoiceH) {
  PlanSettings s;
  s.rdBytes = 1000;
  s.directBytes = 300;
  const HostLayout one = layoutFromGroups({0, 0, 0});
  const HostLayout two = layoutFromGroups({0, 0, 2, 2});
  EXPECT_EQ(chooseAllReduce(s, one, 10), Algorithm::Ring);
  EXPECT_EQ(chooseAllReduce(s, one, 1 << 20), Algorithm::Ring);
  EXPECT_EQ(chooseAllReduce(s, two, 300), Algorithm::HierDirect);  // 300 x (2-1) <= 300
  EXPECT_EQ(chooseAllReduce(s, two, 301), Algorithm::HierRd);
  const HostLayout four = layoutFromGroups({0, 1, 2, 3});
  EXPECT_EQ(chooseAllReduce(s, four, 100), Algorithm::HierDirect);  // 100 x 3 <= 300
  EXPECT_EQ(chooseAllReduce(s, four, 101), Algorithm::HierRd);
  EXPECT_EQ(chooseAllReduce(s, two, 1000), Algorithm::HierRd);
  // Eight hosts: rounds of up to 1 + 300 / S hosts. 60 bytes: 5, so 4 x 2 (two rounds); 100
  // bytes: 4, 4 x 2 again; 101 bytes: 3, and by threes eight hosts are three rounds of 2.
  const HostLayout eight = layoutFromGroups({0, 1, 2, 3, 4, 5, 6, 7});
  EXPECT_EQ(chooseAllReduce(s, eight, 42), Algorithm::HierDirect);  // 42 x 7 <= 300
  EXPECT_EQ(chooseAllReduce(s, eight, 43), Algorithm::HierRadix);
  EXPECT_EQ(chooseAllReducePlan(s, eight, 60).rounds.radices,
            (std::vector<int>{4, 2}));
  EXPECT_EQ(chooseAllReduce(s, eight, 100), Algorithm::HierRadix);
  EXPECT_EQ(chooseAllReduce(s, eight, 101), Algorithm::HierRd);
  EXPECT_EQ(chooseAllReducePlan(s, eight, 101).rounds.radices,
            (std::vector<int>{2, 2, 2}));
  EXPECT_EQ(chooseAllReduce(s, eight, 1000), Algorithm::HierRd);
  EXPECT_EQ(chooseAllReduce(s, eight, 1001), Algorithm::HierRing);
  // Compared at set-up only where it bounds the rounds between hosts.
  EXPECT_EQ(settingsLine(s, one), "algo=auto rd_bytes=1000");
  EXPECT_EQ(settingsLine(s, eight),
            "algo=auto rd_bytes=1000 direct_bytes=300 shm_link=2e-06,1e+10 "
            "net_link=2.5e-05,1.25e+09");
  EXPECT_EQ(chooseAllReduce(s, two, 1001), Algorithm::HierRing);
  s.forced = Algorithm::Ring;
  EXPECT_EQ(chooseAllReduce(s, two, 10), Algorithm::Ring);
  s.forced = Algorithm::HierRd;
  EXPECT_EQ(chooseAllReduce(s, two, 1 << 20), Algorithm::HierRd);
  s.forced = Algorithm::HierRing;
  EXPECT_EQ(chooseAllReduce(s, one, 10), Algorithm::HierRing);
  s.forced = Algorithm::HierDirect;
  EXPECT_EQ(chooseAllReduce(s, two, 1 << 20), Algorithm::HierDirect);
  s.forced = Algorithm::HierRadix;
  EXPECT_EQ(chooseAllReduce(s, two, 1 << 20), Algorithm::HierRadix);
  EXPECT_EQ(chooseAllReducePlan(s, eight, 1 << 20).rounds.radices,
            (std::vector<int>{2, 2, 2}));
  EXPECT_EQ(chooseAllReducePlan(s, eight, 10).rounds.radices,
            (std::vector<int>{8}));
  // The words README's knob table gives TORCH_RING_ALGO, and nothing else: the direct round
  // inside one host is auto's alone.
  const std::vector<std::string> words = {"auto",    "ring",       "hier_ring",
                                          "hier_rd", "hier_radix", "hier_direct"};
  for (const std::string& word : words) {
    EXPECT_EQ(algoKnobName(parseAlgoKnob(word)), word);
  }
  for (const char* refused : {"tree", "direct", "Ring "}) {
    try {
      parseAlgoKnob(refused);
      ADD_FAILURE() << "'" << refused << "' was taken as a plan";
    } catch (const UsageError& e) {
      const std::string text = e.what();
      EXPECT_NE(text.find(strCat("'", refused, "'")), std::string::npos) << text;
      EXPECT_NE(text.find("TORCH_RING_ALGO"), std::string::npos) << text;
      // The choices offered, exactly README's words: every one, and nothing else ("direct").
      const size_t from = text.find("one of ");
      const size_t to = text.find(" (TORCH_RING_ALGO)");
      ASSERT_TRUE(from != std::string::npos && to != std::string::npos && from < to) << text;
      std::vector<std::string> offered;
      std::string list = text.substr(from + 7, to - from - 7) + ", ";
      for (size_t at = 0, comma; (comma = list.find(", ", at)) != std::string::npos; at = comma + 2) {
        offered.push_back(list.substr(at, comma - at));
      }
      std::vector<std::string> want = words;
      std::sort(offered.begin(), offered.end());
      std::sort(want.begin(), want.end());
      EXPECT_EQ(offered, want) << text;
    }
  }
  // Settings made in code, not parsed, are held to the same rows.
  PlanSettings forcedDirect;
  forcedDirect.forced = Algorithm::Direct;
  EXPECT_THROW(checkPlanSettings(forcedDirect), UsageError);
  forcedDirect.forced = Algorithm::HierDirect;
  EXPECT_NO_THROW(checkPlanSettings(forcedDirect));
}

// The whole choice of a call inside one host (plan_choice.h's first two rows): the direct round
// where S x (n-1) fits TORCH_RING_DIRECT_BYTES (through the mailboxes up to their capacity),
// past it the flat ring for every collective under auto; a barrier is one mailbox round
// whatever the knob; a knob that names two levels is obeyed even on one host.
TEST(PlanChoice, InsideOneHostTheDirectRoundThenTheFlatRing) {
  PlanSettings s;
  s.ranks = 3;
  s.oneSharedMemory = true;
  s.mailboxBytes = 64;
  s.directBytes = 300;
  s.slotBytes = 1024;
  const HostLayout one = layoutFromGroups({0, 0, 0});
  CallPlan small = chooseCallPlan(s, one, Collective::AllReduce, 64);
  EXPECT_EQ(small.algorithm, Algorithm::Direct);
  EXPECT_TRUE(small.mailboxRound);
  CallPlan direct = chooseCallPlan(s, one, Collective::AllGather, 150);  // 150 x 2 <= 300
  EXPECT_EQ(direct.algorithm, Algorithm::Direct);
  EXPECT_FALSE(direct.mailboxRound);
  for (Collective k : {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter,
                       Collective::Broadcast, Collective::Reduce}) {
    for (int64_t bytes : {int64_t{151}, int64_t{1} << 20}) {
      const CallPlan p = chooseCallPlan(s, one, k, bytes);
      EXPECT_EQ(p.algorithm, Algorithm::Ring) << collectiveName(k) << " of " << bytes;
      EXPECT_FALSE(p.mailboxRound) << collectiveName(k) << " of " << bytes;
      EXPECT_TRUE(p.rounds.radices.empty()) << collectiveName(k) << " of " << bytes;
    }
  }
  EXPECT_TRUE(chooseCallPlan(s, one, Collective::Barrier, 0).mailboxRound);
  s.forced = Algorithm::HierRing;
  EXPECT_EQ(chooseCallPlan(s, one, Collective::AllReduce, 1 << 20).algorithm,
            Algorithm::HierRing);
  EXPECT_TRUE(chooseCallPlan(s, one, Collective::Barrier, 0).mailboxRound);
}

// Past the rounds, auto takes the cheaper of the flat ring and two levels
// (schedule/ring_costs.h). Links with no latency, shared memory at 1e10 B/s and the network at
// 1e9, 1 MB slots, a 128 MB all_reduce, worked by hand:
//   4 hosts of 8 (n = 32): flat, 62 hops of 4 MB pieces cut into 4 loops of 1 MB: the chain
//     7.75 x 1 ms + 54.25 x 0.1 ms plus 3 loops x 62 x 1 ms = 0.199 s, under the slowest
//     link's 4 x 62 x 1 MB = 0.248 s, so 0.248 s; two levels 14 x 1.6 ms (16 MB per shared-
//     memory step) + 6 x 32 ms (4 MB at 1e9 / 8) = 0.2144 s: two levels.
//   16 hosts of 8 (n = 128): flat 254 x 1 MB / 1e9 = 0.254 s; two levels 0.0224 + 30 x 8 ms =
//     0.2624 s: the flat ring (past beta_shm / beta_net = 10 hosts two levels lose).
// all_gather of the same 128 MB: 4 x 8 flat 4 x 31 x 1 MB = 0.124 s against 3 x 32 ms + 7 x
// 1.6 ms = 0.1072 s; 16 x 8 flat 127 ms against 15 x 8 + 11.2 ms = 131.2 ms.
TEST(PlanChoice, LargeMessagesTakeTheCheaperRingByItsPrice) {
  PlanSettings s;
  s.shmLink = LinkCost{0, 1e10};
  s.netLink = LinkCost{0, 1e9};
  s.slotBytes = 1000000;
  std::vector<int> fourOfEight, sixteenOfEight;
  for (int r = 0; r < 32; ++r) fourOfEight.push_back(r / 8);
  for (int r = 0; r < 128; ++r) sixteenOfEight.push_back(r / 8);
  const HostLayout four = layoutFromGroups(fourOfEight);
  const HostLayout sixteen = layoutFromGroups(sixteenOfEight);
  RingShape shape;
  shape.ranksPerHost = 8;
  shape.shm = s.shmLink;
  shape.net = s.netLink;
  shape.slotBytes = 1e6;
  shape.hosts = 4;
  EXPECT_NEAR(flatAllReduceSeconds(shape, 128e6), 0.248, 1e-12);
  EXPECT_NEAR(twoLevelAllReduceSeconds(shape, 128e6), 0.2144, 1e-12);
  EXPECT_NEAR(flatAllGatherSeconds(shape, 128e6), 0.124, 1e-12);
  EXPECT_NEAR(twoLevelAllGatherSeconds(shape, 128e6), 0.1072, 1e-12);
  shape.hosts = 16;
  EXPECT_NEAR(flatAllReduceSeconds(shape, 128e6), 0.254, 1e-12);
  EXPECT_NEAR(twoLevelAllReduceSeconds(shape, 128e6), 0.2624, 1e-12);
  EXPECT_NEAR(flatAllGatherSeconds(shape, 128e6), 0.127, 1e-12);
  EXPECT_NEAR(twoLevelAllGatherSeconds(shape, 128e6), 0.1312, 1e-12);
  // With latency the flat ring's chain shows: 2 hosts of 2, 4 MB, alphas 1 us and 10 us:
  // flat max(3 x 1.01 ms + 3 x 0.101 ms, 6 ms) = 6 ms; two levels 2 x 2 x 0.101 ms (each
  // shared-memory step is two slots of 1 MB, each paying the latency) + 2 x 2.01 ms.
  RingShape small = shape;
  small.hosts = 2;
  small.ranksPerHost = 2;
  small.shm = LinkCost{1e-6, 1e10};
  small.net = LinkCost{1e-5, 1e9};
  EXPECT_NEAR(flatAllReduceSeconds(small, 4e6), 6e-3, 1e-15);
  EXPECT_NEAR(twoLevelAllReduceSeconds(small, 4e6), 4.424e-3, 1e-15);
  // Latency only, 3 hosts of 2, chunks of three 8-byte slots: a loop's steps wait on each
  // other, so each of the 3 loops is the chain of 5 network and 5 shared-memory hops, 3 x 55 s
  // (every further hop priced over the network would give 55 + 2 x 10 x 10 = 255 s). With
  // the network at 0.5 B/s, its 10 pieces of a loop (16 s each) outlast the chain: 3 x 160 s.
  RingShape loops;
  loops.hosts = 3;
  loops.ranksPerHost = 2;
  loops.shm = LinkCost{1.0, 1e30};
  loops.net = LinkCost{10.0, 1e30};
  loops.slotBytes = 8;
  EXPECT_DOUBLE_EQ(flatAllReduceSeconds(loops, 6 * 24), 3 * (5 * 10.0 + 5 * 1.0));
  loops.net = LinkCost{10.0, 0.5};
  EXPECT_DOUBLE_EQ(flatAllReduceSeconds(loops, 6 * 24), 3 * 10 * 16.0);
  // One host: two levels are the flat ring over its ranks, in the same slots, so the same
  // price at any size (64 MiB over 8 ranks at the default links: 32 slots a step, 12.640 ms).
  RingShape oneHost;
  oneHost.ranksPerHost = 8;
  for (double bytes : {4096.0, 1048576.0, 67108864.0, 100e6 + 12}) {
    EXPECT_DOUBLE_EQ(twoLevelAllReduceSeconds(oneHost, bytes), flatAllReduceSeconds(oneHost, bytes))
        << bytes;
    EXPECT_DOUBLE_EQ(twoLevelAllGatherSeconds(oneHost, bytes), flatAllGatherSeconds(oneHost, bytes))
        << bytes;
  }
  EXPECT_NEAR(twoLevelAllReduceSeconds(oneHost, 67108864.0), 32 * 14 * (2e-6 + 262144 / 10e9),
              1e-15);

  const int64_t bytes = 128000000;
  EXPECT_EQ(chooseAllReduce(s, four, bytes), Algorithm::HierRing);
  EXPECT_EQ(chooseAllReduce(s, sixteen, bytes), Algorithm::Ring);
  EXPECT_EQ(chooseAllGather(s, four, bytes / 32), Algorithm::HierRing);
  EXPECT_EQ(chooseAllGather(s, sixteen, bytes / 128), Algorithm::Ring);
  EXPECT_EQ(chooseReduceScatter(s, four, bytes / 32), Algorithm::HierRing);
  EXPECT_EQ(chooseReduceScatter(s, sixteen, bytes / 128), Algorithm::Ring);
  // Only past the rounds: at TORCH_RING_RD_BYTES the rounds stay whatever the prices say.
  EXPECT_EQ(chooseAllReduce(s, sixteen, s.rdBytes), Algorithm::HierRd);
  // The knobs still force a plan.
  s.forced = Algorithm::HierRing;
  EXPECT_EQ(chooseAllReduce(s, sixteen, bytes), Algorithm::HierRing);
  EXPECT_EQ(chooseReduceScatter(s, sixteen, bytes / 128), Algorithm::HierRing);
  // The default links (10 GbE): two levels on 4 hosts of 8 at 64 MiB, the flat ring on 16
  // (the model's table, docs/scale.md).
  PlanSettings byDefault;
  EXPECT_EQ(chooseAllReduce(byDefault, four, 64 << 20), Algorithm::HierRing);
  EXPECT_EQ(chooseAllReduce(byDefault, sixteen, 64 << 20), Algorithm::Ring);
}

// Hosts of unequal size: the two-level ring's chain through the segments, and the rounds
// through the leaders, worked by hand as in tests/python/test_scale_model.py
// (test_two_level_all_reduce_on_unequal_hosts_by_hand). Hosts of 2 and 1 ranks, 1200 B; shared
// memory 1 us + 1 GB/s, network 1 ms + 1 MB/s, shared by the widest host's 2 ranks where every
// rank crosses it (the segments), whole where only the leaders do. Host 0 cuts at 600 B: two
// segments, both through host 1's rank. Its reduce half is one step of 600 B (1.6 us); each
// segment's ring between 2 hosts is two steps of 300 B at 0.5 MB/s; the second starts when
// the first ends.
TEST(PlanChoice, UnequalHostsPayTheChainThroughTheSegments) {
  const HostLayout twoAndOne = layoutFromGroups({0, 0, 2});
  RingShape shape;
  shape.hosts = 2;
  shape.ranksPerHost = 2;
  shape.shm = LinkCost{1e-6, 1e9};
  shape.net = LinkCost{1e-3, 1e6};
  const double half = 1e-6 + 600 / 1e9;
  EXPECT_NEAR(segmentedAllReduceSeconds(shape, twoAndOne, 1200),
              half + 2 * 2 * (1e-3 + 300 / 0.5e6) + half, 1e-15);
  // On hosts of equal size it is the equal-hosts price.
  const HostLayout twoAndTwo = layoutFromGroups({0, 0, 2, 2});
  for (double bytes : {1200.0, 4e6}) {
    EXPECT_NEAR(segmentedAllReduceSeconds(shape, twoAndTwo, bytes),
                twoLevelAllReduceSeconds(shape, bytes), 1e-15);
  }
  // Through the leaders: host 0's chain of one hop of the whole 1200 B to its leader, one
  // direct round of 1200 B between the two leaders at the link's whole rate, the chain down.
  const BetweenHosts direct{};
  const double hop = 1e-6 + 1200 / 1e9;
  EXPECT_NEAR(leadersAllReduceSeconds(shape, twoAndOne, 1200, direct),
              hop + (1e-3 + 1200 / 1e6) + hop, 1e-15);
  // Hosts of 3, 1 and 2 ranks, 6000 B, recursive doubling: host 0's chain is two hops of
  // 6000 B; among 3 leaders one folds in and out (two exchanges) around one round of two.
  const HostLayout threeOneTwo = layoutFromGroups({0, 0, 0, 3, 4, 4});
  RingShape wide = shape;
  wide.hosts = 3;
  wide.ranksPerHost = 3;
  const RadixSchedule doubling = doublingSchedule(3);
  const double chain = 2 * (1e-6 + 6000 / 1e9), exchange = 1e-3 + 6000 / 1e6;
  EXPECT_NEAR(leadersAllReduceSeconds(wide, threeOneTwo, 6000,
                                      BetweenHosts{&doubling}),
              chain + 3 * exchange + chain, 1e-15);
  // The direct round: one step of two copies.
  EXPECT_NEAR(leadersAllReduceSeconds(wide, threeOneTwo, 6000, direct),
              chain + (1e-3 + 12000 / 1e6) + chain, 1e-15);
  // In slots of 2000 B a round goes slice by slice in lock step (direct_collectives.cc), each
  // of the 3 slices paying the latency; folding in and out streams the 6000 B, one step each.
  // The chains inside the hosts: 2 hops + 2 further slots of 2000 B.
  RingShape slots = wide;
  slots.slotBytes = 2000;
  const double slotChain = 4 * (1e-6 + 2000 / 1e9);
  EXPECT_NEAR(leadersAllReduceSeconds(slots, threeOneTwo, 6000, direct),
              slotChain + 3 * (1e-3 + 4000 / 1e6) + slotChain, 1e-15);
  EXPECT_NEAR(leadersAllReduceSeconds(slots, threeOneTwo, 6000,
                                      BetweenHosts{&doubling}),
              slotChain + 3 * (1e-3 + 2000 / 1e6) + 2 * exchange + slotChain, 1e-15);

  // auto on hosts of 3, 1 and 2 ranks: the direct round within its budget, then the
  // cheapest. At the default links, 64 KiB: the leaders' direct round, priced past its budget
  // (0.164 ms against the flat ring's 0.194, the segments' ring 0.63, recursive doubling
  // through the leaders 0.267: the model's auto_plan); 128 KiB: the flat ring (0.232 against
  // the direct round's 0.295). At the emulated hosts' links (docs/scale.md: 104 us + 5 GB/s,
  // 1.233 ms + 0.47 GB/s) the direct round (1.98 ms against doubling's 4.59 and the flat
  // ring's 7.78); and two levels with a ring where shared memory is the slow link (1 ms +
  // 100 MB/s against 1 us + 10 GB/s: flat 11.5 ms, ring 4.9 ms, doubling and direct 6.6).
  PlanSettings s;
  EXPECT_EQ(chooseAllReduce(s, threeOneTwo, 4096), Algorithm::HierDirect);
  EXPECT_EQ(chooseAllReduce(s, threeOneTwo, 65536), Algorithm::HierDirect);
  EXPECT_EQ(chooseAllReduce(s, threeOneTwo, 131072), Algorithm::Ring);
  EXPECT_EQ(chooseAllReduce(s, threeOneTwo, 1 << 20), Algorithm::Ring);
  // Between 4 hosts the direct round sends three copies where doubling sends two in two
  // latencies: at 32 KiB on hosts of 4, 4, 4 and 2, doubling 0.1341 ms, direct 0.1353.
  const HostLayout fourFourFourTwo = layoutFromGroups({0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3});
  EXPECT_EQ(chooseAllReduce(s, fourFourFourTwo, 32768), Algorithm::HierRd);
  PlanSettings emulated;
  emulated.shmLink = LinkCost{104e-6, 5e9};
  emulated.netLink = LinkCost{1233e-6, 0.47e9};
  EXPECT_EQ(chooseAllReduce(emulated, threeOneTwo, 65536), Algorithm::HierDirect);
  EXPECT_EQ(chooseAllReduce(emulated, threeOneTwo, 1 << 20), Algorithm::Ring);
  s.shmLink = LinkCost{1e-3, 1e8};
  s.netLink = LinkCost{1e-6, 1e10};
  EXPECT_EQ(chooseAllReduce(s, threeOneTwo, 65536), Algorithm::HierRing);
  // A knob still forces a plan.
  s.forced = Algorithm::HierRd;
  EXPECT_EQ(chooseAllReduce(s, threeOneTwo, 65536), Algorithm::HierRd);
}

TEST(PlanChoice, LinkCostsParseOrNameTheKnob) {
  const LinkCost c = parseLinkCost("25e-6,1.25e9", "TORCH_RING_NET_LINK", kDefaultShmLink);
  EXPECT_DOUBLE_EQ(c.alphaSeconds, 25e-6);
  EXPECT_DOUBLE_EQ(c.bytesPerSecond, 1.25e9);
  const LinkCost unset = parseLinkCost("", "TORCH_RING_NET_LINK", kDefaultNetLink);
  EXPECT_DOUBLE_EQ(unset.alphaSeconds, kDefaultNetLink.alphaSeconds);
  EXPECT_DOUBLE_EQ(unset.bytesPerSecond, kDefaultNetLink.bytesPerSecond);
  for (const char* bad : {"25e-6", "25e-6,", ",1e9", "a,b", "-1e-6,1e9", "1e-6,0", "1e-6,-5",
                          "1e-6,1e9x", "1e-6,inf", "nan,1e9", "1e-6;1e9"}) {
    try {
      parseLinkCost(bad, "TORCH_RING_SHM_LINK", kDefaultShmLink);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(strCat("TORCH_RING_SHM_LINK='", bad, "'")),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(HostLayout, LocalIndexGroupsAndTheHostMajorRing) {
  // Hosts by lowest rank: {0, 2}, {1, 3}, {4, 5}.
  const HostLayout l = layoutFromGroups({5, 7, 5, 7, 9, 9});
  EXPECT_EQ(l.ranksPerHost(), 2);
  EXPECT_EQ(ranksOfLocalIndex(l, 0), (std::vector<int>{0, 1, 4}));
  EXPECT_EQ(ranksOfLocalIndex(l, 1), (std::vector<int>{2, 3, 5}));
  // Local index first, then host: the parts of one local index are neighbours.
  std::vector<int> position;
  for (int r = 0; r < 6; ++r) position.push_back(localMajorPosition(l, r));
  EXPECT_EQ(position, (std::vector<int>{0, 1, 3, 4, 2, 5}));
  EXPECT_EQ(hostMajorRing(l), (std::vector<int>{0, 2, 1, 3, 4, 5}));
  EXPECT_EQ(layoutFromGroups({0, 0, 1}).ranksPerHost(), 0);
  EXPECT_EQ(layoutFromGroups({3, 3, 3}).ranksPerHost(), 3);
  EXPECT_EQ(hostMajorRing(layoutFromGroups({0, 1, 0, 1, 1})), (std::vector<int>{0, 2, 1, 3, 4}));
}

TEST(PlanChoice, TheGatherScatterAndBroadcastRowsOfPlanChoiceH) {
  PlanSettings s;
  s.directBytes = 300;
  const HostLayout one = layoutFromGroups({0, 0, 0});
  const HostLayout twoOfTwo = layoutFromGroups({0, 1, 0, 1});
  const HostLayout uneven = layoutFromGroups({0, 0, 0, 1});
  const HostLayout fourOfOne = layoutFromGroups({0, 1, 2, 3});
  EXPECT_EQ(chooseAllGather(s, one, 10), Algorithm::Ring);
  // Unequal hosts: the leaders' direct round, each sending its block of the widest host's 3
  // parts to the 1 other leader, while 3 x P x 1 <= 300; then the flat ring.
  EXPECT_EQ(chooseAllGather(s, uneven, 10), Algorithm::HierDirect);
  EXPECT_EQ(chooseAllGather(s, uneven, 100), Algorithm::HierDirect);
  EXPECT_EQ(chooseAllGather(s, uneven, 101), Algorithm::Ring);
  EXPECT_EQ(chooseReduceScatter(s, uneven, 100), Algorithm::HierDirect);
  EXPECT_EQ(chooseAllGather(s, twoOfTwo, 300), Algorithm::HierDirect);  // 300 x (2-1) <= 300
  EXPECT_EQ(chooseAllGather(s, twoOfTwo, 301), Algorithm::HierRing);
  EXPECT_EQ(chooseAllGather(s, fourOfOne, 100), Algorithm::HierDirect);  // 100 x 3 <= 300
  EXPECT_EQ(chooseAllGather(s, fourOfOne, 101), Algorithm::Ring);  // the same ring
  EXPECT_EQ(chooseReduceScatter(s, twoOfTwo, 300), Algorithm::HierDirect);  // as all_gather
  EXPECT_EQ(chooseReduceScatter(s, twoOfTwo, 301), Algorithm::HierRing);
  EXPECT_EQ(chooseReduceScatter(s, fourOfOne, 100), Algorithm::HierDirect);
  EXPECT_EQ(chooseReduceScatter(s, twoOfTwo, 1000), Algorithm::HierRing);
  EXPECT_EQ(chooseReduceScatter(s, fourOfOne, 1000), Algorithm::Ring);
  EXPECT_EQ(chooseReduceScatter(s, uneven, 1000), Algorithm::Ring);
  EXPECT_EQ(chooseBroadcast(s, one), Algorithm::Ring);
  EXPECT_EQ(chooseBroadcast(s, uneven), Algorithm::HierRing);
  s.forced = Algorithm::HierDirect;
  EXPECT_EQ(chooseAllGather(s, twoOfTwo, 1 << 20), Algorithm::HierDirect);
  EXPECT_EQ(chooseAllGather(s, uneven, 1 << 20), Algorithm::HierDirect);
  EXPECT_EQ(chooseReduceScatter(s, fourOfOne, 1000), Algorithm::HierDirect);
  EXPECT_EQ(chooseReduceScatter(s, uneven, 10), Algorithm::HierDirect);
  s.forced = Algorithm::HierRd;
  EXPECT_EQ(chooseAllGather(s, twoOfTwo, 10), Algorithm::HierRing);
  EXPECT_EQ(chooseAllGather(s, uneven, 10), Algorithm::HierRing);  // the leaders' ring
  s.forced = Algorithm::HierRing;
  EXPECT_EQ(chooseReduceScatter(s, uneven, 1 << 20), Algorithm::HierRing);
  s.forced = Algorithm::Ring;
  EXPECT_EQ(chooseAllGather(s, twoOfTwo, 10), Algorithm::Ring);
  EXPECT_EQ(chooseReduceScatter(s, twoOfTwo, 1000), Algorithm::Ring);
  EXPECT_EQ(chooseBroadcast(s, twoOfTwo), Algorithm::Ring);
}

}  // namespace
}  // namespace ring
