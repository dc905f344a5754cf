// The CUDA path's real host code (CudaRingLinks, ring_launcher, the kernels) over the emulated
// CUDA runtime, ranks as threads of one process (direct pointers between them): every
// collective, dtype and op the kernels cover, over worlds 1-4 and channels 1-4 (each
// combination in one of the sixteen), bit for bit against the CPU executor; ranks on one GPU
// and ranks on a GPU each (peer access). scripts/tsan.sh runs these under ThreadSanitizer.
#include <cuda_emulator.h>
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "common/errors.h"
#include "emulated_ring_support.h"
#include "memory_store.h"
#include "rank_threads.h"

namespace ring {
namespace {

using namespace testing_support;

class EmulatedRingThreads : public ::testing::TestWithParam<std::tuple<int, int>> {
 protected:
  void SetUp() override {
    cudaemu::clearFailures();
    cudaemu::setConfig(cudaemu::Config{});
  }
};

TEST_P(EmulatedRingThreads, MatchTheCpuExecutorBitForBit) {
  const int world = std::get<0>(GetParam());
  const int channels = std::get<1>(GetParam());
  const std::vector<EmulatedCase> cases = casesFor(world, (world - 1) * 4 + channels - 1, 16);
  ASSERT_FALSE(cases.empty());
  const cudaemu::Counters before = cudaemu::counters();
  std::vector<std::string> described;
  for (const std::string& p : runThreadRankCases(world, geometryFor(channels), cases, false,
                                                 &described)) {
    ADD_FAILURE() << p;
  }
  if (world > 1) {
    EXPECT_NE(described[0].find("direct pointer (threads of one process, same GPU)"),
              std::string::npos) << described[0];
  }
  // Closed collectively and destroyed: nothing of the links or the cases is left.
  const cudaemu::Counters after = cudaemu::counters();
  EXPECT_EQ(after.liveDeviceAllocations, before.liveDeviceAllocations);
  EXPECT_EQ(after.liveHostAllocations, before.liveHostAllocations);
  EXPECT_EQ(after.liveStreams, before.liveStreams);
  EXPECT_GT(after.kernelsLaunched, before.kernelsLaunched);
}

std::string paramName(const ::testing::TestParamInfo<std::tuple<int, int>>& info) {
  return strCat("world", std::get<0>(info.param), "_channels", std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(WorldsAndChannels, EmulatedRingThreads,
                         ::testing::Combine(::testing::Range(1, 5), ::testing::Range(1, 5)),
                         paramName);

// A rank that launches 300 ms after its peer: the peer's kernel waits for its messages. What
// the waiting kernel reads first are its inbox's counters, never yet written by the late rank:
// they must start at zero (cudaMalloc does not clear memory; the emulator fills it with a
// non-zero byte, as uninitialized device memory would hold anything).
TEST(EmulatedRingThreadsTiming, ARankThatComesLateIsWaitedFor) {
  cudaemu::clearFailures();
  cudaemu::setConfig(cudaemu::Config{});
  const std::vector<EmulatedCase> cases = casesFor(2, 3, 40);
  MemoryStore store;
  std::vector<std::vector<std::string>> failures(2);
  auto outcomes = runRanks(2, [&](int rank) {
    failures[rank] = runRankCases(store, rank, 2, 0, geometryFor(1), cases, nullptr,
                                  std::chrono::milliseconds(rank == 1 ? 300 : 0));
  });
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_TRUE(outcomes[rank].ok()) << "rank " << rank << ": " << outcomes[rank].message();
    for (const std::string& f : failures[rank]) ADD_FAILURE() << f;
  }
}

// A GPU per rank: the links enable peer access and use the neighbours' pointers directly.
TEST(EmulatedRingThreadsAcrossDevices, UsePeerAccess) {
  cudaemu::clearFailures();
  cudaemu::Config c;
  c.devices = 3;
  cudaemu::setConfig(c);
  const int world = 3;
  const std::vector<EmulatedCase> cases = casesFor(world, 5, 12);
  std::vector<std::string> described;
  for (const std::string& p : runThreadRankCases(world, geometryFor(2), cases, true, &described)) {
    ADD_FAILURE() << p;
  }
  EXPECT_NE(
      described[1].find("direct pointer (threads of one process, cuda:1 -> cuda:2, peer access)"),
      std::string::npos)
      << described[1];
  cudaemu::setConfig(cudaemu::Config{});
}

}  // namespace
}  // namespace ring
