// Mailbox rounds (transport/link.h, Mailbox; executor/round_links.h, MailboxRound), ranks as threads
// over shared memory, checked against what the collectives promise whatever the path: closed
// forms for every message size around the line edges (8 bytes in the header line, then 56 a
// line), fresh inputs on every call so that a stale or torn line shows, the same bits on every
// rank, nothing through the FIFOs, and ranks that disagree ending in a mismatch error on every
// rank instead of a timeout, whether both wait in mailbox rounds or one waits in a FIFO.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "comm_test_support.h"
#include "common/errors.h"

namespace ring {
namespace {

using namespace testing_support;

// Direct rounds for every message of at most one 64 KiB slot, through the mailbox up to
// `mailboxBytes`.
CommOptions mailboxOptions(int n, int64_t mailboxBytes = 64 * 1024) {
  CommOptions o = smallSlotOptions();
  o.slotBytes = 64 * 1024;
  o.directBytes = o.slotBytes * (n - 1);
  o.mailboxBytes = mailboxBytes;
  return o;
}

uint64_t fifoMessagesSent(Communicator& comm) {
  uint64_t sent = 0;
  for (int p = 0; p < comm.size(); ++p) {
    if (p != comm.rank()) sent += comm.transport().sendLink(Channel::Collective, p).messagesSent();
  }
  return sent;
}

// Byte counts around the edges of the layout: 0, inside the header line's 8 bytes, exactly
// it, one more, one whole line more (8 + 56), and up to the capacity.
const std::vector<int64_t> kEdgeBytes = {0,   1,   7,   8,    9,    63,   64,   65,
                                         119, 120, 121, 4096, 4097, 65535, 65536};

// value of element i of rank r's input on call c: small integers, exact in every dtype used.
double input(int r, int64_t i, int c) { return static_cast<double>((r * 5 + i * 3 + c) % 11); }

TEST(MailboxRounds, AllReduceMatchesTheClosedFormAtEveryLineEdge) {
  for (int n : {2, 3, 4, 5}) {
    for (DType t : {DType::UInt8, DType::Float32, DType::Float64}) {
      const int64_t es = static_cast<int64_t>(elementSize(t));
      auto outcomes = runGroup(
          n,
          [&](Communicator& comm) {
            int c = 0;
            for (int64_t bytes : kEdgeBytes) {
              if (bytes % es != 0) continue;
              const int64_t count = bytes / es;
              // uint8 wraps: keep its sums below 256 with MAX.
              const RedOp op = t == DType::UInt8 ? RedOp::Max : RedOp::Sum;
              auto data = buffer(t, count, [&](int64_t i) { return input(comm.rank(), i, c); });
              runAllReduce(comm, data.data(), count, t, op, 1.0, call(static_cast<uint64_t>(c)));
              const int64_t bad = firstMismatch(t, data.data(), count, [&](int64_t i) {
                double acc = 0;
                for (int r = 0; r < n; ++r) {
                  acc = op == RedOp::Max ? std::max(acc, input(r, i, c)) : acc + input(r, i, c);
                }
                return acc;
              });
              ASSERT_EQ(bad, -1) << "n=" << n << " " << dtypeName(t) << " bytes " << bytes
                                 << " rank " << comm.rank();
              ++c;
            }
            EXPECT_EQ(fifoMessagesSent(comm), 0u) << "rank " << comm.rank();
          },
          mailboxOptions(n));
      for (int r = 0; r < n; ++r) ASSERT_TRUE(outcomes[r].ok()) << outcomes[r].message();
    }
  }
}

// The mailbox off (TORCH_RING_LL_BYTES=0): the same calls go through the FIFOs.
TEST(MailboxRounds, OffMeansTheFifos) {
  auto outcomes = runGroup(
      3,
      [&](Communicator& comm) {
        std::vector<float> data(16, 1.0f);
        runAllReduce(comm, data.data(), 16, DType::Float32, RedOp::Sum, 1.0, call(0));
        runBarrier(comm, call(1));
        EXPECT_EQ(data[15], 3.0f);
        EXPECT_GT(fifoMessagesSent(comm), 0u);
      },
      mailboxOptions(3, 0));
  for (int r = 0; r < 3; ++r) ASSERT_TRUE(outcomes[r].ok()) << outcomes[r].message();
}

// Thousands of rounds back to back with ranks drifting apart (random pauses), every input new:
// a buffer reused too early, or read from the wrong round, gives wrong sums or an error.
TEST(MailboxRounds, ManyRoundsWithRanksAtDifferentSpeeds) {
  for (int n : {2, 3}) {
    auto outcomes = runGroup(
        n,
        [&](Communicator& comm) {
          std::mt19937 rng(static_cast<unsigned>(comm.rank() * 7919 + n));
          std::vector<float> data;
          for (int c = 0; c < 3000; ++c) {
            const int64_t count = 1 + (c * 37) % 200;  // 4-800 bytes: 1 to 15 lines
            data.resize(static_cast<size_t>(count));
            for (int64_t i = 0; i < count; ++i) {
              data[static_cast<size_t>(i)] = static_cast<float>(input(comm.rank(), i, c));
            }
            if (rng() % 16 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 200));
            runAllReduce(comm, data.data(), count, DType::Float32, RedOp::Sum, 1.0,
                           call(static_cast<uint64_t>(c)));
            for (int64_t i = 0; i < count; ++i) {
              double want = 0;
              for (int r = 0; r < n; ++r) want += input(r, i, c);
              ASSERT_EQ(data[static_cast<size_t>(i)], static_cast<float>(want))
                  << "call " << c << " element " << i << " rank " << comm.rank();
            }
          }
        },
        mailboxOptions(n));
    for (int r = 0; r < n; ++r) ASSERT_TRUE(outcomes[r].ok()) << outcomes[r].message();
  }
}

// Mailbox rounds between ring collectives (a large all_reduce, a broadcast, a reduce_scatter)
// and all_gathers with the input as the rank's own block of the output (FSDP) or apart.
TEST(MailboxRounds, InterleavedWithRingCollectivesAndAllGathers) {
  const int n = 3;
  auto outcomes = runGroup(
      n,
      [&](Communicator& comm) {
        const int me = comm.rank();
        uint64_t seq = 0;
        for (int c = 0; c < 40; ++c) {
          const int64_t count = c % 2 == 0 ? 33 : 30000;  // 30000 floats: past the mailbox
          std::vector<float> data(static_cast<size_t>(count));
          for (int64_t i = 0; i < count; ++i) data[i] = static_cast<float>(input(me, i, c));
          runAllReduce(comm, data.data(), count, DType::Float32, RedOp::Sum, 1.0, call(seq++));
          for (int64_t i = 0; i < count; i += 7) {
            ASSERT_EQ(data[i], static_cast<float>(input(0, i, c) + input(1, i, c) + input(2, i, c)));
          }
          std::vector<int32_t> b(5, me == c % n ? c : -1);
          runBroadcast(comm, b.data(), 5, DType::Int32, c % n, call(seq++));
          ASSERT_EQ(b[4], c);
          const int64_t per = 1 + c % 20;
          std::vector<int64_t> gathered(static_cast<size_t>(per * n), -1);
          std::vector<int64_t> part(static_cast<size_t>(per));
          for (int64_t i = 0; i < per; ++i) part[i] = me * 1000 + i + c;
          if (c % 2 == 0) {
            runAllGather(comm, part.data(), gathered.data(), per, DType::Int64, call(seq++));
          } else {
            std::memcpy(gathered.data() + me * per, part.data(), per * sizeof(int64_t));
            runAllGather(comm, gathered.data() + me * per, gathered.data(), per, DType::Int64,
                           call(seq++));
          }
          for (int r = 0; r < n; ++r) {
            for (int64_t i = 0; i < per; ++i) ASSERT_EQ(gathered[r * per + i], r * 1000 + i + c);
          }
          std::vector<float> whole(static_cast<size_t>(n * 100), static_cast<float>(me + 1));
          std::vector<float> mine(100);
          runReduceScatter(comm, whole.data(), mine.data(), 100, DType::Float32, RedOp::Sum, 1.0,
                             call(seq++));
          ASSERT_EQ(mine[99], 6.0f);
        }
      },
      mailboxOptions(n));
  for (int r = 0; r < n; ++r) ASSERT_TRUE(outcomes[r].ok()) << outcomes[r].message();
}

// A coalesced task runs its calls back to back under one sequence number (backend/
// coalescing.cc): each is a round of its own, and a FIFO call among them is no mismatch.
TEST(MailboxRounds, CallsThatShareASequenceNumberAreRoundsOfTheirOwn) {
  for (int n : {2, 3}) {
    auto outcomes = runGroup(
        n,
        [&](Communicator& comm) {
          const int me = comm.rank();
          for (uint64_t seq = 0; seq < 20; ++seq) {
            // All under `seq`: counts 0, 1, 3, 1009 in mailbox rounds, then one past the
            // mailbox (through the FIFOs), then one more round.
            for (int64_t per : {0, 1, 3, 1009, 40000, 2}) {
              std::vector<int32_t> part(static_cast<size_t>(per) + 1);
              for (int64_t i = 0; i < per; ++i) part[i] = static_cast<int32_t>(me * 7 + i + seq);
              std::vector<int32_t> all(static_cast<size_t>(per * n) + 1, -1);
              runAllGather(comm, part.data(), all.data(), per, DType::Int32, call(seq));
              for (int r = 0; r < n; ++r) {
                for (int64_t i = 0; i < per; ++i) {
                  ASSERT_EQ(all[r * per + i], static_cast<int32_t>(r * 7 + i + seq))
                      << "seq " << seq << " per " << per << " rank " << me;
                }
              }
            }
          }
        },
        mailboxOptions(n));
    for (int r = 0; r < n; ++r) ASSERT_TRUE(outcomes[r].ok()) << outcomes[r].message();
  }
}

// No rank leaves a barrier before every rank has entered it.
TEST(MailboxRounds, BarrierWaitsForEveryRank) {
  for (int n : {2, 4}) {
    std::atomic<int> entered{0};
    auto outcomes = runGroup(
        n,
        [&](Communicator& comm) {
          for (int round = 0; round < 5; ++round) {
            std::this_thread::sleep_for(std::chrono::milliseconds(3 * comm.rank()));
            entered.fetch_add(1);
            runBarrier(comm, call(static_cast<uint64_t>(round)));
            ASSERT_GE(entered.load(), n * (round + 1)) << "round " << round;
            runBarrier(comm, call(static_cast<uint64_t>(100 + round)));  // all have checked
          }
          EXPECT_EQ(fifoMessagesSent(comm), 0u);
        },
        mailboxOptions(n));
    for (int r = 0; r < n; ++r) ASSERT_TRUE(outcomes[r].ok()) << outcomes[r].message();
  }
}

// Ranks that call different things at the same sequence number: every rank fails with a
// collective mismatch naming both calls, well before the timeout. Both in mailbox rounds
// (another count), and one in a round while the others wait in their FIFOs (a broadcast, an
// all_reduce too large for the mailbox).
TEST(MailboxRounds, RanksThatDisagreeFailWithAMismatchOnEveryRank) {
  enum Call { SmallAllReduce, OtherCountAllReduce, Broadcast, LargeAllReduce };
  for (int n : {2, 3}) {
    for (Call odd : {OtherCountAllReduce, Broadcast, LargeAllReduce}) {
      for (int oddRank = 0; oddRank < n; ++oddRank) {
        const auto start = Clock::now();
        auto outcomes = runGroup(
            n,
            [&](Communicator& comm) {
              const Call mine = comm.rank() == oddRank ? odd : SmallAllReduce;
              std::vector<float> data(30000, 1.0f);
              const auto c = call(0, std::chrono::seconds(8));
              if (mine == SmallAllReduce || mine == OtherCountAllReduce) {
                const int64_t count = mine == SmallAllReduce ? 10 : 11;
                runAllReduce(comm, data.data(), count, DType::Float32, RedOp::Sum, 1.0, c);
              } else if (mine == Broadcast) {
                runBroadcast(comm, data.data(), 10, DType::Float32, 0, c);
              } else {
                runAllReduce(comm, data.data(), 30000, DType::Float32, RedOp::Sum, 1.0, c);
              }
              // A rank whose call completed (a broadcast's root only sends) learns of the
              // failure in its next one.
              runBarrier(comm, call(1, std::chrono::seconds(8)));
            },
            mailboxOptions(n));
        const std::string what = strCat("n=", n, " odd call ", static_cast<int>(odd), " on rank ",
                                        oddRank);
        EXPECT_LT(Clock::now() - start, std::chrono::seconds(5)) << what << ": ended by the timeout";
        for (int r = 0; r < n; ++r) {
          EXPECT_TRUE(threw<CommError>(outcomes[r])) << what << " rank " << r;
          EXPECT_FALSE(threw<TimeoutError>(outcomes[r])) << what << ": " << outcomes[r].message();
        }
        bool named = false;
        for (int r = 0; r < n; ++r) {
          named |= outcomes[r].message().find("collective mismatch") != std::string::npos;
        }
        EXPECT_TRUE(named) << what << ": " << outcomes[0].message();
      }
    }
  }
}

// A peer that ran the sequence number as a collective that only sends through the FIFOs (a
// gather's non-root) and then called nothing more: the rank waiting in its round sees the
// FIFO message and names both calls, instead of waiting for the timeout.
TEST(MailboxRounds, APeerThatSentThroughAFifoAndWentIdleIsAMismatch) {
  const auto start = Clock::now();
  auto outcomes = runGroup(
      2,
      [&](Communicator& comm) {
        std::vector<float> data(10, 1.0f), all(20);
        if (comm.rank() == 1) {
          runGather(comm, data.data(), all.data(), 10, DType::Float32, 0, call(0));
          std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // alive, idle
          return;
        }
        runAllReduce(comm, data.data(), 10, DType::Float32, RedOp::Sum, 1.0,
                       call(0, std::chrono::seconds(8)));
      },
      mailboxOptions(2));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
  EXPECT_TRUE(outcomes[1].ok()) << outcomes[1].message();
  EXPECT_TRUE(threw<CommError>(outcomes[0]));
  EXPECT_FALSE(threw<TimeoutError>(outcomes[0])) << outcomes[0].message();
  EXPECT_NE(outcomes[0].message().find("collective mismatch"), std::string::npos)
      << outcomes[0].message();
  EXPECT_NE(outcomes[0].message().find("gather"), std::string::npos) << outcomes[0].message();
}

// A rank that never comes: the others' wait ends at the call's timeout, naming it.
TEST(MailboxRounds, APeerThatNeverComesEndsInATimeoutNamingIt) {
  auto outcomes = runGroup(
      2,
      [&](Communicator& comm) {
        if (comm.rank() == 1) {  // never calls, but stays (a closed peer is another error)
          std::this_thread::sleep_for(std::chrono::milliseconds(1500));
          return;
        }
        std::vector<float> data(10, 1.0f);
        const auto start = Clock::now();
        try {
          runAllReduce(comm, data.data(), 10, DType::Float32, RedOp::Sum, 1.0,
                         call(0, std::chrono::milliseconds(300)));
        } catch (const TimeoutError& e) {
          EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(300));
          EXPECT_LT(Clock::now() - start, std::chrono::seconds(3));
          EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
          return;
        }
        ADD_FAILURE() << "no timeout";
      },
      mailboxOptions(2));
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(outcomes[r].ok()) << outcomes[r].message();
}

// abort() from another thread ends a rank's wait in a round at once.
TEST(MailboxRounds, AbortEndsAWaitInARound) {
  auto outcomes = runGroup(
      2,
      [&](Communicator& comm) {
        if (comm.rank() == 1) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1500));
          return;
        }
        std::thread aborter([&] {
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
          comm.abort("test abort");
        });
        std::vector<float> data(10, 1.0f);
        const auto start = Clock::now();
        EXPECT_THROW(runAllReduce(comm, data.data(), 10, DType::Float32, RedOp::Sum, 1.0,
                                    call(0, std::chrono::seconds(10))),
                     CommError);
        EXPECT_LT(Clock::now() - start, std::chrono::seconds(1));
        aborter.join();
      },
      mailboxOptions(2));
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(outcomes[r].ok()) << outcomes[r].message();
}

// Ranks with different TORCH_RING_LL_BYTES fail at set-up, naming the knob.
TEST(MailboxRounds, DifferentSizesFailAtSetUp) {
  auto outcomes = runGroupEach(2, {mailboxOptions(2, 4096), mailboxOptions(2, 8192)},
                               [](Communicator&) {});
  for (int r = 0; r < 2; ++r) {
    EXPECT_FALSE(outcomes[r].ok()) << "rank " << r;
    EXPECT_NE(outcomes[r].message().find("TORCH_RING_LL_BYTES"), std::string::npos)
        << outcomes[r].message();
  }
}

}  // namespace
}  // namespace ring
