// The flight recorder as its readers rely on it (torch's flight recorder keeps the last N
// entries in a ring buffer, TORCH_FR_BUFFER_SIZE of them, oldest first in a dump): the last
// `capacity` calls oldest first, updates by id that find nothing once an entry is gone, and no
// field of an overwritten entry showing through in the call that replaced it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "executor/flight_recorder.h"

namespace ring {
namespace {

std::vector<uint64_t> seqs(const FlightRecorder& r) {
  std::vector<uint64_t> out;
  for (const FlightEntry& e : r.snapshot()) out.push_back(e.seq);
  return out;
}

// A call's tensors as the backend describes them: a 2 x 3 float input and output.
const int64_t kTwoByThree[] = {2, 3};
const TensorShapeView kFloatTwoByThree{kTwoByThree, 2, "Float"};
const ShapeList kOneTwoByThree{&kFloatTwoByThree, 1};

TEST(FlightRecorder, KeepsTheLastEntriesOldestFirstAcrossManyWrapArounds) {
  FlightRecorder r(4);
  for (uint64_t seq = 0; seq < 3; ++seq) r.recordQueued(seq, "all_reduce", "d");
  EXPECT_EQ(seqs(r), (std::vector<uint64_t>{0, 1, 2}));
  for (uint64_t seq = 3; seq < 103; ++seq) r.recordQueued(seq, "all_reduce", "d");
  EXPECT_EQ(seqs(r), (std::vector<uint64_t>{99, 100, 101, 102}));
}

TEST(FlightRecorder, UpdatesReachTheirEntryAndNothingOnceItIsOverwritten) {
  FlightRecorder r(2);
  const uint64_t first = r.recordQueued(10, "broadcast", "d");
  const uint64_t second = r.recordQueued(11, "all_reduce", "d");
  r.markStarted(second, "caller");
  r.markEnded(second, "");
  r.recordQueued(12, "barrier", "d");  // overwrites `first`
  r.markStarted(first, "worker");      // gone: must not touch the entry that took its place
  r.markEnded(first, "late error");
  const std::vector<FlightEntry> s = r.snapshot();
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].seq, 11u);
  EXPECT_EQ(s[0].state, "completed");
  EXPECT_EQ(s[0].thread, "caller");
  EXPECT_EQ(s[1].seq, 12u);
  EXPECT_EQ(s[1].collective, "barrier");
  EXPECT_EQ(s[1].state, "queued");
  EXPECT_EQ(s[1].thread, "");
  EXPECT_EQ(s[1].error, "");
}

TEST(FlightRecorder, AnOverwrittenEntryLeavesNothingOfItselfBehind) {
  FlightRecorder r(1);
  const uint64_t failed =
      r.recordQueued(1, "all_gather", CallDetail("a long detail that needs the heap"),
                     kOneTwoByThree, kOneTwoByThree, 5000);
  r.markStarted(failed, "worker");
  r.markEnded(failed, "ring: it failed");
  r.recordQueued(2, "barrier", "");
  const std::vector<FlightEntry> s = r.snapshot();
  ASSERT_EQ(s.size(), 1u);
  const FlightEntry& e = s[0];
  EXPECT_EQ(e.seq, 2u);
  EXPECT_EQ(e.collective, "barrier");
  EXPECT_EQ(e.detail, "");
  EXPECT_EQ(e.state, "queued");
  EXPECT_EQ(e.thread, "");
  EXPECT_EQ(e.error, "");
  EXPECT_EQ(e.startedAtMs, -1);
  EXPECT_EQ(e.endedAtMs, -1);
  EXPECT_EQ(e.timeoutMs, 0);
  EXPECT_TRUE(e.shapes.inputSizes.empty() && e.shapes.outputSizes.empty());
  EXPECT_TRUE(e.shapes.inputDtypes.empty() && e.shapes.outputDtypes.empty());
  // And the call's shapes land in the entry, copied (the views may go once it returns).
  {
    const int64_t sizes[] = {4, 5, 6};
    const TensorShapeView views[] = {{sizes, 3, "BFloat16"}, {sizes, 1, "BFloat16"}};
    r.recordQueued(3, "all_reduce", CallDetail(), ShapeList{views, 2}, kOneTwoByThree);
  }
  EXPECT_EQ(r.snapshot()[0].shapes.inputSizes,
            (std::vector<std::vector<int64_t>>{{4, 5, 6}, {4}}));
  EXPECT_EQ(r.snapshot()[0].shapes.inputDtypes,
            (std::vector<std::string_view>{"BFloat16", "BFloat16"}));
  EXPECT_EQ(r.snapshot()[0].shapes.outputSizes, (std::vector<std::vector<int64_t>>{{2, 3}}));
  EXPECT_EQ(r.snapshot()[0].shapes.outputDtypes, (std::vector<std::string_view>{"Float"}));
  // A call with fewer tensors in the same entry leaves none of the earlier ones behind.
  r.recordQueued(4, "broadcast", CallDetail(), kOneTwoByThree, kOneTwoByThree);
  EXPECT_EQ(r.snapshot()[0].shapes.inputSizes, (std::vector<std::vector<int64_t>>{{2, 3}}));
  EXPECT_EQ(r.snapshot()[0].shapes.inputDtypes, (std::vector<std::string_view>{"Float"}));
}

TEST(FlightRecorder, ANewCapacityKeepsTheNewestEntriesInOrder) {
  FlightRecorder r(4);
  for (uint64_t seq = 0; seq < 6; ++seq) r.recordQueued(seq, "all_reduce", "");  // 2 3 4 5
  r.setCapacity(2);
  EXPECT_EQ(seqs(r), (std::vector<uint64_t>{4, 5}));
  r.setCapacity(3);
  for (uint64_t seq = 6; seq < 8; ++seq) r.recordQueued(seq, "all_reduce", "");
  EXPECT_EQ(seqs(r), (std::vector<uint64_t>{5, 6, 7}));
  r.setCapacity(0);  // off: keeps nothing, records nothing, ids still advance
  EXPECT_FALSE(r.enabled());
  const uint64_t a =
      r.recordQueued(8, "all_reduce", CallDetail(), kOneTwoByThree, kOneTwoByThree);
  const uint64_t b = r.recordQueued(9, "all_reduce", "");
  EXPECT_TRUE(r.snapshot().empty());
  EXPECT_EQ(b, a + 1);
  r.setCapacity(2);
  r.recordQueued(10, "all_reduce", "");
  EXPECT_EQ(seqs(r), (std::vector<uint64_t>{10}));
}

// The words of an entry, as the collectives' messages and docs/observability.md write them
// ("1000 x float32, op SUM"), from the parts a call keeps instead of a string.
TEST(FlightRecorder, AnEntrysDetailReadsAsTheCallsWords) {
  EXPECT_EQ(CallDetail::counted(1000, "float32", "SUM").asText(), "1000 x float32, op SUM");
  EXPECT_EQ(CallDetail::counted(7, "int64", nullptr, 3).asText(), "7 x int64, root 3");
  EXPECT_EQ(CallDetail::counted(0, "bfloat16", "MAX", 0).asText(), "0 x bfloat16, op MAX, root 0");
  EXPECT_EQ(CallDetail::counted(12, "uint8").asText(), "12 x uint8");
  CallDetail staged = CallDetail::counted(5, "float16", "AVG");
  staged.note = " (CUDA, staged through host memory)";
  EXPECT_EQ(staged.asText(), "5 x float16, op AVG (CUDA, staged through host memory)");
  CallDetail then = CallDetail::counted(8, "float32");
  then.text = " in, 16 out";
  EXPECT_EQ(then.asText(), "8 x float32 in, 16 out");
  EXPECT_EQ(CallDetail("3 tensors").asText(), "3 tensors");
  EXPECT_EQ(CallDetail().asText(), "");
  // Written into a reused entry: nothing of the previous call's words is left.
  FlightRecorder r(1);
  r.recordQueued(0, "all_reduce", CallDetail::counted(123456789, "float64", "PREMUL_SUM", 12));
  r.recordQueued(1, "all_reduce", CallDetail::counted(2, "int8"));
  EXPECT_EQ(r.snapshot()[0].detail, "2 x int8");
  // Words over an entry whose call had counted parts and a note: only the words. And the
  // words are written out for each reading, the same every time.
  FlightRecorder w(1);
  w.recordQueued(0, "all_reduce", staged);
  w.recordQueued(1, "all_to_all", "3 tensors of float32");
  EXPECT_EQ(w.snapshot()[0].detail, "3 tensors of float32");
  EXPECT_EQ(w.snapshot()[0].detail, "3 tensors of float32");
  EXPECT_EQ(w.snapshot()[0].collective, "all_to_all");
  EXPECT_NE(w.dump().find("seq 1 all_to_all 3 tensors of float32 queued"), std::string::npos)
      << w.dump();
  // And parts over words: the words are gone.
  w.recordQueued(2, "all_reduce", CallDetail::counted(4, "float32", "SUM"));
  EXPECT_EQ(w.snapshot()[0].detail, "4 x float32, op SUM");
  EXPECT_EQ(w.snapshot()[0].collective, "all_reduce");
}

}  // namespace
}  // namespace ring
