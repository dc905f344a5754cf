// The direct (one-round) path of small collectives, beyond the closed-form suite that
// test_communicator.cc runs on it ("worldN_direct"): the order of a floating-point sum and
// the same bits on every rank, where the threshold lies, and ranks that are configured
// differently (an error on every rank, never a hang or a silently different algorithm).
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "comm_test_support.h"
#include "common/errors.h"

namespace ring {
namespace {

using namespace testing_support;

// mailboxBytes 0: the direct round through the FIFOs; 256 (the slot): in mailbox rounds.
CommOptions directOptions(int64_t directBytes, int64_t mailboxBytes = 0) {
  CommOptions o = smallSlotOptions();
  o.directBytes = directBytes;
  o.mailboxBytes = mailboxBytes;
  return o;
}

// Contributions whose float sum depends on the order: large values of opposite signs and
// different magnitudes (float spacing 2 near 3e7, 1 near 1e7) on the even ranks, and small
// ones on the odd ranks that survive or vanish depending on which large value they meet first.
float contribution(int r, int64_t i) {
  if (r % 2 == 1) return 0.75f + 0.25f * static_cast<float>(i % 3);
  return (r / 2 + i) % 2 == 0 ? 3.0e7f : -1.0e7f;
}

// Same bits on every rank, and those bits are the sum in rank order (x0 + x1) + x2 + ...:
// the order every rank follows (direct_collectives.h), computed here in plain float.
TEST(DirectAllReduce, FloatSumsFollowRankOrderAndAgreeBitwise) {
  for (int64_t mailboxBytes : {0, 256})
  for (int n : {2, 3, 4, 5, 7}) {
    const int64_t count = 60;  // 240 bytes: one slot
    std::vector<std::vector<float>> result(static_cast<size_t>(n));
    auto outcomes = runGroup(
        n,
        [&](Communicator& comm) {
          std::vector<float> data(count);
          for (int64_t i = 0; i < count; ++i) data[i] = contribution(comm.rank(), i);
          runAllReduce(comm, data.data(), count, DType::Float32, RedOp::Sum, 1.0, call(0));
          result[static_cast<size_t>(comm.rank())] = data;
        },
        directOptions(256 * (n - 1), mailboxBytes));
    for (int r = 0; r < n; ++r) ASSERT_TRUE(outcomes[r].ok()) << outcomes[r].message();
    int orderMatters = 0;
    for (int64_t i = 0; i < count; ++i) {
      float inOrder = contribution(0, i);
      for (int r = 1; r < n; ++r) inOrder += contribution(r, i);
      // Another order (from rank 1 around to rank 0, as a ring's reduce-scatter may add).
      float rotated = contribution(1 % n, i);
      for (int k = 2; k <= n; ++k) rotated += contribution(k % n, i);
      orderMatters += inOrder != rotated;
      for (int r = 0; r < n; ++r) {
        EXPECT_EQ(std::memcmp(&result[r][i], &inOrder, sizeof(float)), 0)
            << "n=" << n << " mailbox " << mailboxBytes << " rank " << r << " element " << i
            << ": " << result[r][i]
            << " instead of " << inOrder;
      }
    }
    if (n >= 3) EXPECT_GT(orderMatters, 0) << "n=" << n << ": the inputs do not test the order";
  }
}

// "At most directBytes" sent per rank, the message once to each of the n-1 others: with 3
// ranks and a limit of 256 bytes, 32 floats (128 bytes, 256 sent) go direct, 33 do not. Shown
// through ranks whose limit is two whole slots: they agree on the first and disagree on the
// second, and say so.
TEST(DirectThreshold, AMessageOfExactlyTheLimitGoesDirect) {
  for (int64_t count : {32, 33}) {
    auto outcomes = runGroupEach(3, {directOptions(256), directOptions(512), directOptions(512)},
                                 [&](Communicator& comm) {
                                   std::vector<float> data(count, 1.0f);
                                   runAllReduce(comm, data.data(), count, DType::Float32, RedOp::Sum,
                                                  1.0, call(0, std::chrono::seconds(5)));
                                   for (float v : data) ASSERT_EQ(v, 3.0f);
                                 });
    for (int r = 0; r < 3; ++r) {
      EXPECT_EQ(outcomes[r].ok(), count == 32)
          << "count " << count << " rank " << r << ": " << outcomes[r].message();
    }
  }
}

// Ranks configured differently (TORCH_RING_DIRECT_BYTES set on some ranks only): every rank
// fails, well within the timeout, and the ranks are told why: a collective mismatch whose words
// describe both plans (one side direct, the other not), not only a disagreement about the
// messages' sizes, for every split of direct and ring ranks in worlds of 2 to 4.
// The direct ranks in mailbox rounds too (the ring ranks wait on FIFOs that the direct ones
// never fill, and the direct ones on mailboxes that the ring ones never post to).
TEST(DirectThreshold, RanksConfiguredDifferentlyFailWithAMismatchNotAHang) {
  for (int64_t mailboxBytes : {0, 256})
  for (int n : {2, 3, 4}) {
    for (int directMask = 1; directMask < (1 << n) - 1; ++directMask) {
      std::vector<CommOptions> opts;
      for (int r = 0; r < n; ++r) {
        opts.push_back(directOptions((directMask >> r) & 1 ? 1024 : 0, mailboxBytes));
      }
      const auto start = Clock::now();
      auto outcomes = runGroupEach(n, opts, [&](Communicator& comm) {
        std::vector<float> data(8, 1.0f);
        runAllReduce(comm, data.data(), 8, DType::Float32, RedOp::Sum, 1.0,
                       call(0, std::chrono::seconds(8)));
      });
      EXPECT_LT(Clock::now() - start, std::chrono::seconds(6))
          << "n=" << n << " mask " << directMask << " mailbox " << mailboxBytes
          << ": ended by the timeout";
      bool named = false;
      for (int r = 0; r < n; ++r) {
        EXPECT_TRUE(threw<CommError>(outcomes[r]))
            << "n=" << n << " mask " << directMask << " rank " << r << ": "
            << outcomes[r].message();
        EXPECT_FALSE(threw<TimeoutError>(outcomes[r])) << outcomes[r].message();
        const std::string& words = outcomes[r].message();
        named |= words.find("collective mismatch") != std::string::npos &&
                 words.find("direct") != std::string::npos;
      }
      EXPECT_TRUE(named) << "n=" << n << " mask " << directMask << ": "
                         << outcomes[0].message();
    }
  }
}

}  // namespace
}  // namespace ring
