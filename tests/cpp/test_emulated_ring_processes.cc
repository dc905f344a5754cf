// The CUDA path's real host code over the emulated CUDA runtime, ranks as separate processes
// (forked, meeting through a shared-memory store): each rank exports its inbox, opens its
// neighbours' IPC handles, runs the kernels on its own stream, and compares every result bit
// for bit with the CPU executor (shared memory between the same processes). Worlds 1-4, each
// with another channel count, every (collective, dtype, op) in one of them; world 3 with a GPU
// per rank.
#include <cuda_emulator.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/errors.h"
#include "emulated_ring_support.h"

namespace ring {
namespace {

using namespace testing_support;

class EmulatedRingProcesses : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    cudaemu::clearFailures();
    cudaemu::setConfig(cudaemu::Config{});
  }
  void TearDown() override { cudaemu::setConfig(cudaemu::Config{}); }
};

int channelsFor(int world) { return world % 4 + 1; }

TEST_P(EmulatedRingProcesses, MatchTheCpuExecutorBitForBit) {
  const int world = GetParam();
  const bool gpuPerRank = world == 3;
  if (gpuPerRank) {
    cudaemu::Config c;
    c.devices = world;
    cudaemu::setConfig(c);  // the rank processes inherit it
  }
  const std::vector<EmulatedCase> cases = casesFor(world, world - 1, 4);
  SharedMemoryStore store;
  auto outcomes = runRankProcesses(world, store, [&](int rank) {
    std::string described;
    std::vector<std::string> failures =
        runRankCases(store, rank, world, gpuPerRank ? rank : 0, geometryFor(channelsFor(world)),
                     cases, &described);
    if (world > 1) {
      const char* expected = gpuPerRank ? "CUDA IPC (cuda:" : "CUDA IPC (same GPU)";
      if (described.find(expected) == std::string::npos) {
        failures.push_back(strCat("links: ", described, " (expected ", expected, ")"));
      }
    }
    // Every allocation freed, every handle closed: the close protocol ran.
    const cudaemu::Counters c = cudaemu::counters();
    if (c.liveDeviceAllocations != 0 || c.liveIpcMappings != 0 || c.liveHostAllocations != 0) {
      failures.push_back(strCat("left behind: ", c.liveDeviceAllocations, " allocations, ",
                                c.liveIpcMappings, " IPC mappings, ", c.liveHostAllocations,
                                " host allocations"));
    }
    std::string all;
    for (const std::string& f : failures) all += f + "; ";
    return all;
  }, std::chrono::seconds(120));
  for (const ProcessOutcome& o : outcomes) {
    EXPECT_EQ(o.exitCode, 0) << describeOutcomes(outcomes);
    EXPECT_EQ(o.result, "") << describeOutcomes(outcomes);
  }
}

INSTANTIATE_TEST_SUITE_P(Worlds, EmulatedRingProcesses, ::testing::Range(1, 5),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return strCat("world", info.param, "_channels",
                                         channelsFor(info.param));
                         });

}  // namespace
}  // namespace ring
