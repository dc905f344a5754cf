// A call's mailbox message posted ahead of the call (Communicator::prepare, then post), as the
// backend does before it asks whether every peer has issued a small all_reduce, all_gather or
// barrier (backend/work_queue.h). Ranks as threads over shared memory, checked against what the
// collectives promise whoever posts ahead: the definitions of all_reduce (SUM, AVG with
// integers truncated toward zero, PREMUL_SUM scaling each contribution once, MAX), of
// all_gather (the input apart or inside the output) and of a barrier; a post ahead where the
// call takes no mailbox round is nothing; the question "has every peer issued it" answered
// by the peers' posts, and by their announcements once the patience is over; ranks that
// disagree still end in a mismatch on every rank; nothing posted into a broken group; a post
// made for another call than the one that runs is named instead of read as that call's.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "comm_test_support.h"
#include "common/errors.h"

namespace ring {
namespace {

using namespace testing_support;

// What the backend does for a call it may run on the caller's thread: announce it, prepare it,
// post it ahead, ask (the answer only decides which thread runs the rest; here it runs on
// regardless). The call then runs with the prepared call (`*prepared`, in the CallInfo
// returned).
CallInfo announceAndPostAhead(Communicator& comm, const CallInfo& c, const CollectiveArgs& args,
                              const void* input, void* output, PreparedCall* prepared) {
  comm.announceIssued(c.seq + 1);
  *prepared = comm.prepare(args, c.seq);
  const bool posted = comm.post(*prepared, input, output);
  (void)comm.allIssued(c.seq + 1, std::chrono::microseconds(200), posted ? prepared : nullptr);
  CallInfo planned = c;
  planned.prepared = prepared;
  return planned;
}

double input(int r, int64_t i, int c) { return static_cast<double>((r * 7 + i * 3 + c) % 13) - 4; }

TEST(PostedAhead, AllReduceMatchesItsDefinitionWhoeverPostsAhead) {
  struct Case {
    DType t;
    RedOp op;
    double factor;
  };
  const std::vector<Case> cases = {{DType::Float32, RedOp::Sum, 1.0},
                                   {DType::Float64, RedOp::PreMulSum, 0.5},
                                   {DType::Float32, RedOp::Avg, 1.0},
                                   {DType::Int32, RedOp::Avg, 1.0},
                                   {DType::Float64, RedOp::Max, 1.0}};
  // Inside the head line, a few lines, the mailbox's edge, then through the FIFOs.
  const std::vector<int64_t> counts = {1, 2, 100, 512, 1024, 1025, 3000};
  for (int n : {2, 3, 4}) {
    for (const Case& k : cases) {
      auto outcomes = runGroup(
          n,
          [&](Communicator& comm) {
            std::mt19937 rng(static_cast<unsigned>(comm.rank() * 31 + n));
            const int64_t es = static_cast<int64_t>(elementSize(k.t));
            for (int c = 0; c < 60; ++c) {
              const int64_t count = counts[static_cast<size_t>(c) % counts.size()] * 4 / es;
              auto data =
                  buffer(k.t, count, [&](int64_t i) { return input(comm.rank(), i, c); });
              CallInfo info = call(static_cast<uint64_t>(c));
              PreparedCall prepared;
              // Ranks differ in which calls they post ahead, and drift apart now and then.
              if ((c + comm.rank()) % 3 != 0) {
                info = announceAndPostAhead(comm, info,
                                            CollectiveArgs::allReduce(count, k.t, k.op, k.factor),
                                            data.data(), data.data(), &prepared);
              }
              if (rng() % 8 == 0) {
                std::this_thread::sleep_for(std::chrono::microseconds(rng() % 300));
              }
              runAllReduce(comm, data.data(), count, k.t, k.op, k.factor, info);
              const int64_t bad = firstMismatch(k.t, data.data(), count, [&](int64_t i) {
                double acc = k.op == RedOp::Max ? -1e9 : 0.0;
                for (int r = 0; r < n; ++r) {
                  const double x = input(r, i, c);
                  if (k.op == RedOp::Max) {
                    acc = std::max(acc, x);
                  } else {
                    acc += k.op == RedOp::PreMulSum ? x * k.factor : x;
                  }
                }
                if (k.op != RedOp::Avg) return acc;
                // The sum is exact; the division rounds once, in the element's own type.
                if (k.t == DType::Int32) return std::trunc(acc / n);
                return static_cast<double>(static_cast<float>(acc) / static_cast<float>(n));
              });
              ASSERT_EQ(bad, -1) << "n=" << n << " " << dtypeName(k.t) << " " << redOpName(k.op)
                                 << " call " << c << " count " << count << " rank "
                                 << comm.rank();
            }
          },
          threePathOptions(n));
      for (int r = 0; r < n; ++r) {
        ASSERT_TRUE(outcomes[r].ok()) << dtypeName(k.t) << " " << outcomes[r].message();
      }
    }
  }
}

// Block r of every rank's output is rank r's input, whoever posts ahead, with the input apart
// from the output or as the rank's own block of it (FSDP), and through the FIFOs above the
// mailbox's size.
TEST(PostedAhead, AllGatherMatchesItsDefinitionWhoeverPostsAhead) {
  for (int n : {2, 3}) {
    auto outcomes = runGroup(
        n,
        [&](Communicator& comm) {
          const int me = comm.rank();
          for (int c = 0; c < 40; ++c) {
            const int64_t count = c % 4 == 3 ? 1500 : 1 + (c * 37) % 300;
            const bool inPlace = c % 2 == 1;
            std::vector<float> out(static_cast<size_t>(n * count), -1.0f), apart;
            for (int64_t i = 0; i < count; ++i) {
              const float v = static_cast<float>(input(me, i, c));
              if (inPlace) {
                out[static_cast<size_t>(me * count + i)] = v;
              } else {
                apart.push_back(v);
              }
            }
            const float* in = inPlace ? out.data() + me * count : apart.data();
            CallInfo info = call(static_cast<uint64_t>(c));
            PreparedCall prepared;
            if ((c + me) % 3 != 0) {
              info = announceAndPostAhead(comm, info,
                                          CollectiveArgs::allGather(count, DType::Float32), in,
                                          out.data(), &prepared);
            }
            runAllGather(comm, in, out.data(), count, DType::Float32, info);
            for (int r = 0; r < n; ++r) {
              for (int64_t i = 0; i < count; ++i) {
                ASSERT_EQ(out[static_cast<size_t>(r * count + i)],
                          static_cast<float>(input(r, i, c)))
                    << "n=" << n << " call " << c << " block " << r << " element " << i
                    << " rank " << me;
              }
            }
          }
        },
        threePathOptions(n));
    for (int r = 0; r < n; ++r) ASSERT_TRUE(outcomes[r].ok()) << outcomes[r].message();
  }
}

// No rank leaves a barrier before every rank has entered it, whether it posted ahead or not.
TEST(PostedAhead, BarrierWaitsForEveryRank) {
  for (int n : {2, 3}) {
    std::atomic<int> entered{0};
    auto outcomes = runGroup(
        n,
        [&](Communicator& comm) {
          for (int round = 0; round < 6; ++round) {
            CallInfo info = call(static_cast<uint64_t>(2 * round));
            PreparedCall prepared;
            std::this_thread::sleep_for(std::chrono::milliseconds(3 * comm.rank()));
            entered.fetch_add(1);
            if ((round + comm.rank()) % 2 == 0) {
              info = announceAndPostAhead(comm, info, CollectiveArgs::barrier(), nullptr, nullptr,
                                          &prepared);
            }
            runBarrier(comm, info);
            ASSERT_GE(entered.load(), n * (round + 1)) << "round " << round;
            runBarrier(comm, call(static_cast<uint64_t>(2 * round + 1)));  // all have checked
          }
        },
        threePathOptions(n));
    for (int r = 0; r < n; ++r) ASSERT_TRUE(outcomes[r].ok()) << outcomes[r].message();
  }
}

// allIssued after a post ahead: false while a peer has neither posted nor announced the call
// (after waiting out the patience); true once it has announced it without posting (its thread
// may still be in an earlier call), and at once when it has posted.
TEST(PostedAhead, AskingLooksAtThePeersPostsThenAtTheirAnnouncements) {
  std::atomic<int> stage{0};
  auto outcomes = runGroup(
      2,
      [&](Communicator& comm) {
        std::vector<float> data(8, static_cast<float>(comm.rank() + 1));
        CallInfo info = call(0);
        PreparedCall p =
            comm.prepare(CollectiveArgs::allReduce(8, DType::Float32, RedOp::Sum, 1.0), 0);
        info.prepared = &p;
        if (comm.rank() == 1) {
          while (stage.load() < 1) std::this_thread::yield();
          comm.announceIssued(1);  // issued, not posted
          stage.store(2);
          while (stage.load() < 3) std::this_thread::yield();
          ASSERT_TRUE(comm.post(p, data.data(), data.data()));
          stage.store(4);
          runAllReduce(comm, data.data(), 8, DType::Float32, RedOp::Sum, 1.0, info);
        } else {
          comm.announceIssued(1);
          ASSERT_TRUE(comm.post(p, data.data(), data.data()));
          const auto start = Clock::now();
          EXPECT_FALSE(comm.allIssued(1, std::chrono::milliseconds(20), &p));
          EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(20));
          stage.store(1);
          while (stage.load() < 2) std::this_thread::yield();
          EXPECT_TRUE(comm.allIssued(1, std::chrono::milliseconds(20), &p));
          stage.store(3);
          while (stage.load() < 4) std::this_thread::yield();
          EXPECT_TRUE(comm.allIssued(1, std::chrono::microseconds(0), &p));
          runAllReduce(comm, data.data(), 8, DType::Float32, RedOp::Sum, 1.0, info);
        }
        for (float v : data) EXPECT_EQ(v, 3.0f) << "rank " << comm.rank();
      },
      threePathOptions(2));
  for (int r = 0; r < 2; ++r) ASSERT_TRUE(outcomes[r].ok()) << outcomes[r].message();
}

// A rank that posted a small all_reduce ahead while a peer runs something else at that
// sequence (another count, a broadcast, an all_reduce too large for the mailbox): every rank
// fails with a collective mismatch, well before the timeout.
TEST(PostedAhead, RanksThatDisagreeStillFailWithAMismatchOnEveryRank) {
  enum Call { OtherCount, Broadcast, Large };
  for (Call odd : {OtherCount, Broadcast, Large}) {
    for (int oddRank = 0; oddRank < 2; ++oddRank) {
      const auto start = Clock::now();
      auto outcomes = runGroup(
          2,
          [&](Communicator& comm) {
            std::vector<float> data(30000, 1.0f);
            const CallInfo info = call(0, std::chrono::seconds(8));
            if (comm.rank() != oddRank || odd == OtherCount) {
              const int64_t count = comm.rank() == oddRank ? 11 : 10;
              PreparedCall prepared;
              const CallInfo planned = announceAndPostAhead(
                  comm, info, CollectiveArgs::allReduce(count, DType::Float32, RedOp::Sum, 1.0),
                  data.data(), data.data(), &prepared);
              runAllReduce(comm, data.data(), count, DType::Float32, RedOp::Sum, 1.0, planned);
            } else if (odd == Broadcast) {
              runBroadcast(comm, data.data(), 10, DType::Float32, 0, info);
            } else {
              runAllReduce(comm, data.data(), 30000, DType::Float32, RedOp::Sum, 1.0, info);
            }
            runBarrier(comm, call(1, std::chrono::seconds(8)));
          },
          threePathOptions(2));
      const std::string what = strCat("odd call ", static_cast<int>(odd), " on rank ", oddRank);
      EXPECT_LT(Clock::now() - start, std::chrono::seconds(5)) << what << ": ended by the timeout";
      bool named = false;
      for (int r = 0; r < 2; ++r) {
        EXPECT_TRUE(threw<CommError>(outcomes[r])) << what << " rank " << r;
        EXPECT_FALSE(threw<TimeoutError>(outcomes[r])) << what << ": " << outcomes[r].message();
        named |= outcomes[r].message().find("collective mismatch") != std::string::npos;
      }
      EXPECT_TRUE(named) << what << ": " << outcomes[0].message();
    }
  }
}

// A rank whose group is already broken posts nothing ahead (it throws what the call would):
// a peer waiting in that round would otherwise complete on it, as if the group were whole.
TEST(PostedAhead, NothingIsPostedIntoABrokenGroup) {
  std::atomic<int> stage{0};
  auto outcomes = runGroup(
      2,
      [&](Communicator& comm) {
        std::vector<float> data(8, 1.0f);
        CallInfo info = call(0, std::chrono::seconds(5));
        PreparedCall p =
            comm.prepare(CollectiveArgs::allReduce(8, DType::Float32, RedOp::Sum, 1.0), 0);
        info.prepared = &p;
        if (comm.rank() == 0) {
          ASSERT_TRUE(comm.post(p, data.data(), data.data()));
          stage.store(1);
          runAllReduce(comm, data.data(), 8, DType::Float32, RedOp::Sum, 1.0, info);
          return;
        }
        while (stage.load() < 1) std::this_thread::yield();
        std::this_thread::sleep_for(std::chrono::milliseconds(50));  // rank 0 waits in its round
        comm.transport().markBroken("rank 1 failed in an earlier call (the test)");
        EXPECT_THROW(comm.post(p, data.data(), data.data()), CommError);
      },
      threePathOptions(2));
  EXPECT_TRUE(threw<CommError>(outcomes[0])) << outcomes[0].message();
  EXPECT_NE(outcomes[0].message().find("rank 1 failed in an earlier call"), std::string::npos)
      << outcomes[0].message();
  EXPECT_TRUE(outcomes[1].ok()) << outcomes[1].message();
}

// A post ahead for one call followed by another call (a caller's bug): named, not read as the
// later call's message.
TEST(PostedAhead, APostForAnotherCallIsNamed) {
  auto outcomes = runGroup(
      2,
      [&](Communicator& comm) {
        if (comm.rank() == 1) return;
        std::vector<float> data(8, 1.0f);
        PreparedCall p =
            comm.prepare(CollectiveArgs::allReduce(8, DType::Float32, RedOp::Sum, 1.0), 0);
        ASSERT_TRUE(comm.post(p, data.data(), data.data()));
        runAllReduce(comm, data.data(), 8, DType::Float32, RedOp::Sum, 1.0, call(1));
      },
      threePathOptions(2));
  EXPECT_TRUE(outcomes[1].ok()) << outcomes[1].message();
  EXPECT_NE(outcomes[0].message().find("collective 1 runs while the post of collective 0"),
            std::string::npos)
      << outcomes[0].message();
}

}  // namespace
}  // namespace ring
