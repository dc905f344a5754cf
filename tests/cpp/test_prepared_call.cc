// A call as data (executor/prepared_call.h): Communicator::prepare plans it once and
// Communicator::run runs it, as the backend's runner does for every call that is one collective
// over one input and one output. Ranks as threads over shared memory, each result checked
// against the collective's definition (torch.distributed's documentation: all_reduce, the
// all_gather into one tensor, the reduce_scatter of one tensor, broadcast, reduce, gather into
// one tensor, scatter, barrier, and ReduceOp's PREMUL_SUM and AVG), on one rank and more,
// through the mailbox, a direct round and the ring; a call that runs with another call's plan is
// named.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <string>
#include <vector>

#include "comm_test_support.h"
#include "common/errors.h"

namespace ring {
namespace {

using namespace testing_support;

float value(int rank, int64_t i) { return static_cast<float>((rank * 5 + i * 3) % 11) - 3.0f; }

TEST(PreparedCall, EachCollectiveRunsAsItsDefinition) {
  // Elements per rank's buffer (or part): through the mailbox, a direct round, the ring.
  const std::vector<int64_t> counts = {16, 3000, 40000};
  for (int n : {1, 2, 3}) {
    std::atomic<int> leftBarrier{0};
    auto outcomes = runGroup(
        n,
        [&](Communicator& comm) {
          const int me = comm.rank();
          uint64_t seq = 0;
          const auto runPrepared = [&](const CollectiveArgs& args, const void* in, void* out) {
            const PreparedCall p = comm.prepare(args, seq);
            comm.run(p, in, out, call(seq));
            ++seq;
          };
          for (const int64_t count : counts) {
            const std::string at = strCat("n=", n, " count ", count, " rank ", me);
            std::vector<float> mine(static_cast<size_t>(count));
            for (int64_t i = 0; i < count; ++i) mine[static_cast<size_t>(i)] = value(me, i);

            std::vector<float> sum = mine;
            runPrepared(CollectiveArgs::allReduce(count, DType::Float32, RedOp::Sum, 1.0), nullptr,
                        sum.data());
            std::vector<float> gathered(static_cast<size_t>(n * count), -9.0f);
            runPrepared(CollectiveArgs::allGather(count, DType::Float32), mine.data(),
                        gathered.data());
            // reduce_scatter: rank r's input is n blocks; block b holds value(r, b * count + i).
            std::vector<float> blocks(static_cast<size_t>(n * count));
            for (int64_t i = 0; i < n * count; ++i) blocks[static_cast<size_t>(i)] = value(me, i);
            std::vector<float> part(static_cast<size_t>(count), -9.0f);
            runPrepared(CollectiveArgs::reduceScatter(count, DType::Float32, RedOp::Sum, 1.0),
                        blocks.data(), part.data());
            const int root = n - 1;
            std::vector<float> cast = mine;
            runPrepared(CollectiveArgs::broadcast(count, DType::Float32, root), nullptr,
                        cast.data());
            std::vector<float> reduced = mine;
            runPrepared(CollectiveArgs::reduce(count, DType::Float32, RedOp::Max, 1.0, 0),
                        reduced.data(), reduced.data());
            // gather to the last rank (an output there only), scatter of `blocks` from rank 0
            // (an input there only): rank r receives block r.
            std::vector<float> collected(me == root ? static_cast<size_t>(n * count) : 0, -9.0f);
            runPrepared(CollectiveArgs::gather(count, DType::Float32, root), mine.data(),
                        me == root ? collected.data() : nullptr);
            std::vector<float> dealt(static_cast<size_t>(count), -9.0f);
            runPrepared(CollectiveArgs::scatter(count, DType::Float32, 0),
                        me == 0 ? blocks.data() : nullptr, dealt.data());

            for (int64_t i = 0; i < count; ++i) {
              const size_t k = static_cast<size_t>(i);
              float total = 0, block = 0, most = value(0, i);
              for (int r = 0; r < n; ++r) {
                total += value(r, i);
                block += value(r, me * count + i);
                most = std::max(most, value(r, i));
              }
              ASSERT_EQ(sum[k], total) << "all_reduce " << at << " element " << i;
              for (int r = 0; r < n; ++r) {
                ASSERT_EQ(gathered[static_cast<size_t>(r * count + i)], value(r, i))
                    << "all_gather " << at << " block " << r << " element " << i;
              }
              ASSERT_EQ(part[k], block) << "reduce_scatter " << at << " element " << i;
              ASSERT_EQ(cast[k], value(root, i)) << "broadcast " << at << " element " << i;
              if (me == 0) ASSERT_EQ(reduced[k], most) << "reduce " << at << " element " << i;
              for (int r = 0; me == root && r < n; ++r) {
                ASSERT_EQ(collected[static_cast<size_t>(r * count + i)], value(r, i))
                    << "gather " << at << " block " << r << " element " << i;
              }
              ASSERT_EQ(dealt[k], value(0, me * count + i)) << "scatter " << at << " element " << i;
            }
          }
          // No rank leaves a prepared barrier before every rank has entered it.
          leftBarrier.fetch_add(1);
          runPrepared(CollectiveArgs::barrier(), nullptr, nullptr);
          EXPECT_EQ(leftBarrier.load(), n) << "rank " << me;
        },
        threePathOptions(n));
    for (int r = 0; r < n; ++r) ASSERT_TRUE(outcomes[r].ok()) << outcomes[r].message();
  }
}

// PREMUL_SUM and AVG, done once around every reducing collective's plan (Communicator::run),
// on one rank and on three, checked against their definitions in torch.distributed's
// ReduceOp: PREMUL_SUM multiplies each rank's input by the factor before the sum, AVG divides
// the sum by the group's size; the inputs of reduce_scatter and reduce stay as they were.
// Small integers: every sum is exact, whatever its order.
TEST(PreparedCall, PremulSumAndAvgFollowTheirDefinitionOnOneRankAndOnThree) {
  const int64_t count = 3000;  // many 256-byte slices of the ring on three ranks
  const double factor = 3.0;
  for (int n : {1, 3}) {
    auto outcomes = runGroup(
        n,
        [&](Communicator& comm) {
          const int me = comm.rank();
          uint64_t seq = 0;
          const auto runPrepared = [&](const CollectiveArgs& args, const void* in, void* out) {
            comm.run(comm.prepare(args, seq), in, out, call(seq));
            ++seq;
          };
          for (const RedOp op : {RedOp::PreMulSum, RedOp::Avg}) {
            const std::string at = strCat("n=", n, " ", redOpName(op), " rank ", me);
            std::vector<float> blocks(static_cast<size_t>(n * count));
            for (int64_t i = 0; i < n * count; ++i) blocks[static_cast<size_t>(i)] = value(me, i);
            const std::vector<float> input = blocks;

            std::vector<float> whole(blocks.begin(), blocks.begin() + count);
            runPrepared(CollectiveArgs::allReduce(count, DType::Float32, op, factor), nullptr,
                        whole.data());
            std::vector<float> part(static_cast<size_t>(count), -9.0f);
            runPrepared(CollectiveArgs::reduceScatter(count, DType::Float32, op, factor),
                        blocks.data(), part.data());
            std::vector<float> atRoot(static_cast<size_t>(count), -9.0f);
            runPrepared(CollectiveArgs::reduce(count, DType::Float32, op, factor, 0),
                        blocks.data(), atRoot.data());
            ASSERT_EQ(blocks, input) << "reduce_scatter or reduce wrote its input, " << at;

            const auto defined = [&](int64_t i) {
              float total = 0;
              for (int r = 0; r < n; ++r) {
                total += op == RedOp::PreMulSum ? static_cast<float>(factor) * value(r, i)
                                                : value(r, i);
              }
              return op == RedOp::Avg ? total / static_cast<float>(n) : total;
            };
            for (int64_t i = 0; i < count; ++i) {
              const size_t k = static_cast<size_t>(i);
              ASSERT_EQ(whole[k], defined(i)) << "all_reduce " << at << " element " << i;
              ASSERT_EQ(part[k], defined(me * count + i))
                  << "reduce_scatter " << at << " element " << i;
              if (me == 0) ASSERT_EQ(atRoot[k], defined(i)) << "reduce " << at << " element " << i;
            }
          }
        },
        smallSlotOptions());
    for (int r = 0; r < n; ++r) ASSERT_TRUE(outcomes[r].ok()) << outcomes[r].message();
  }
}

// What the plan was chosen for is what runs: a call handed another call's plan (another
// count, another sequence) is named, on the rank that made the mistake, before any message.
TEST(PreparedCall, ACallRunWithAnotherCallsPlanIsNamed) {
  auto outcomes = runGroup(
      2,
      [&](Communicator& comm) {
        if (comm.rank() == 1) return;
        std::vector<float> data(9, 1.0f);
        const PreparedCall p =
            comm.prepare(CollectiveArgs::allReduce(8, DType::Float32, RedOp::Sum, 1.0), 0);
        CallInfo info = call(0);
        info.prepared = &p;
        runAllReduce(comm, data.data(), 9, DType::Float32, RedOp::Sum, 1.0, info);
      },
      threePathOptions(2));
  EXPECT_TRUE(threw<RingError>(outcomes[0])) << outcomes[0].message();
  EXPECT_NE(outcomes[0].message().find("all_reduce (sequence 0) runs with the plan prepared for "
                                       "all_reduce (sequence 0, 8 elements; this call 9)"),
            std::string::npos)
      << outcomes[0].message();
  EXPECT_TRUE(outcomes[1].ok()) << outcomes[1].message();
}

// The same through run(PreparedCall): a plan prepared for one sequence, run at another.
TEST(PreparedCall, APlanRunAtAnotherSequenceIsNamed) {
  auto outcomes = runGroup(
      2,
      [&](Communicator& comm) {
        if (comm.rank() == 1) return;
        std::vector<float> data(8, 1.0f);
        const PreparedCall p =
            comm.prepare(CollectiveArgs::allReduce(8, DType::Float32, RedOp::Sum, 1.0), 0);
        comm.run(p, data.data(), data.data(), call(1));
      },
      threePathOptions(2));
  EXPECT_TRUE(threw<RingError>(outcomes[0])) << outcomes[0].message();
  EXPECT_NE(outcomes[0].message().find(
                "all_reduce (sequence 1) run with the plan prepared for sequence 0"),
            std::string::npos)
      << outcomes[0].message();
}

// A call is the same call as itself whatever its PREMUL_SUM factor: a NaN one too (IEEE 754's
// NaN is unequal to itself; the check that a body runs the call its runner prepared compares
// the descriptions).
TEST(PreparedCall, ACallWithANanFactorIsItself) {
  const CollectiveArgs a = CollectiveArgs::allReduce(
      4, DType::Float32, RedOp::PreMulSum, std::numeric_limits<double>::quiet_NaN());
  EXPECT_TRUE(a == a);
  EXPECT_FALSE(a == CollectiveArgs::allReduce(4, DType::Float32, RedOp::PreMulSum, 1.0));
}

}  // namespace
}  // namespace ring
