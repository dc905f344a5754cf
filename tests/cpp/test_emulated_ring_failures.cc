// CudaRingLinks over the emulated CUDA runtime when the kernels must not, or cannot, run:
// declines that every rank reports with the same reason (ranks on different hosts, differing
// FIFO geometry, the kernels disabled on one rank, an IPC export that fails between
// processes), the co-residency refusal with its numbers (and, without it, the hang it
// prevents), the device stack sized at set-up, and the abort word stopping a kernel that
// waits for a peer that never comes.
#include <cuda_emulator.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/errors.h"
#include "emulated_ring_support.h"
#include "executor/cuda_errors.h"
#include "memory_store.h"
#include "protocol/message_header.h"
#include "rank_threads.h"

namespace ring {
namespace {

using namespace testing_support;
using namespace std::chrono_literals;

class EmulatedRingThreadsFailures : public ::testing::Test {
 protected:
  void SetUp() override {
    cudaemu::clearFailures();
    cudaemu::setConfig(cudaemu::Config{});
  }
  void TearDown() override {
    cudaemu::clearFailures();
    cudaemu::setConfig(cudaemu::Config{});
  }
};

// Sets up links on `world` thread ranks, each with the options `optionsOf(rank)` gives, and
// hands back what each rank saw (usable, reason) while the links still exist.
struct SetUpResult {
  std::vector<RankOutcome> outcomes;
  std::vector<int> usable;  // not vector<bool>: each rank's thread writes its own element
  std::vector<std::string> reasons;
  int allocationsWhileAlive = 0;  // live cudaMalloc'ed blocks once every rank had set up
};
SetUpResult setUpThreads(int world, const std::function<CudaLinkOptions(int)>& optionsOf) {
  SetUpResult r;
  r.usable.assign(world, 0);
  r.reasons.assign(world, "");
  MemoryStore store;
  std::vector<std::unique_ptr<CudaRingLinks>> links(world);
  r.outcomes = runRanks(world, [&](int rank) {
    links[rank] = std::make_unique<CudaRingLinks>(store, rank, world, optionsOf(rank));
    r.usable[rank] = links[rank]->usable() ? 1 : 0;
    r.reasons[rank] = links[rank]->declineReason();
  });
  r.allocationsWhileAlive = cudaemu::counters().liveDeviceAllocations;
  return r;
}

TEST_F(EmulatedRingThreadsFailures, RanksOnDifferentHostsDeclineAlike) {
  const int before = cudaemu::counters().liveDeviceAllocations;
  SetUpResult r = setUpThreads(3, [](int rank) {
    CudaLinkOptions o = linkOptions(0, geometryFor(2));
    if (rank == 2) o.hostId = "another-host";
    return o;
  });
  for (int rank = 0; rank < 3; ++rank) {
    ASSERT_TRUE(r.outcomes[rank].ok()) << r.outcomes[rank].message();
    EXPECT_FALSE(r.usable[rank]);
    EXPECT_EQ(r.reasons[rank], r.reasons[0]) << "rank " << rank;
  }
  EXPECT_NE(r.reasons[0].find("the ranks are on different hosts"), std::string::npos)
      << r.reasons[0];
  // A declined ring frees its memory at once: no kernel ever ran.
  EXPECT_EQ(r.allocationsWhileAlive, before);
}

TEST_F(EmulatedRingThreadsFailures, AGeometryMismatchDeclinesWithBothGeometries) {
  SetUpResult r = setUpThreads(2, [](int rank) {
    return linkOptions(0, geometryFor(rank == 1 ? 3 : 2));
  });
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_TRUE(r.outcomes[rank].ok()) << r.outcomes[rank].message();
    EXPECT_FALSE(r.usable[rank]);
  }
  EXPECT_NE(r.reasons[0].find("FIFO geometry differs (2x3x512 vs 3x4x256)"), std::string::npos)
      << r.reasons[0];
  EXPECT_EQ(r.reasons[1], r.reasons[0]);
}

TEST_F(EmulatedRingThreadsFailures, OneRankWithTheKernelsDisabledDeclinesEveryRank) {
  SetUpResult r = setUpThreads(2, [](int rank) {
    CudaLinkOptions o = linkOptions(0, geometryFor(1));
    o.enabled = rank != 1;
    return o;
  });
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_TRUE(r.outcomes[rank].ok()) << r.outcomes[rank].message();
    EXPECT_FALSE(r.usable[rank]);
    EXPECT_NE(r.reasons[rank].find("TORCH_RING_CUDA_KERNELS=0"), std::string::npos);
  }
}

// Threads of one process use each other's pointers: a failing export changes nothing.
TEST_F(EmulatedRingThreadsFailures, AnExportFailureDoesNotMatterBetweenThreads) {
  cudaemu::failCall("cudaIpcGetMemHandle", cudaErrorNotSupported);
  for (const std::string& p : runThreadRankCases(2, geometryFor(2), casesFor(2, 0, 40))) {
    ADD_FAILURE() << p;
  }
  EXPECT_GE(cudaemu::calls("cudaIpcGetMemHandle"), 2u);
}

// Between processes the same failure declines the ring, on every rank with one reason. Rank 1
// has already opened rank 0's inbox when both learn of the decline, and unmaps it slowly: rank
// 0 must not free that inbox before rank 1 has closed it (undefined in CUDA, fatal here).
TEST(EmulatedRingProcessesFailures, AnExportFailureDeclinesEveryRank) {
  cudaemu::clearFailures();
  cudaemu::setConfig(cudaemu::Config{});
  SharedMemoryStore store;
  auto outcomes = runRankProcesses(2, store, [&](int rank) -> std::string {
    if (rank == 1) {
      cudaemu::failCall("cudaIpcGetMemHandle", cudaErrorNotSupported);
      cudaemu::delayCall("cudaIpcCloseMemHandle", std::chrono::milliseconds(300));
    }
    CudaRingLinks links(store, rank, 2, linkOptions(0, geometryFor(2)));
    if (links.usable()) return "usable although rank 1 could not export its inbox";
    return links.declineReason();
  }, 60s);
  const std::string expected =
      "rank 0 -> rank 1: the peer could not export its inbox for CUDA IPC: cudaIpcGetMemHandle "
      "failed on rank 1: operation not supported (cudaErrorNotSupported)";
  for (const ProcessOutcome& o : outcomes) {
    EXPECT_EQ(o.exitCode, 0) << describeOutcomes(outcomes);
    EXPECT_EQ(o.result, expected) << describeOutcomes(outcomes);
  }
}

// ---- co-residency -------------------------------------------------------------------------------

void configureDevice(int sms, int blocksPerSm) {
  cudaemu::Config c;
  c.smsPerDevice = sms;
  c.blocksPerSm = blocksPerSm;
  cudaemu::setConfig(c);
}

TEST_F(EmulatedRingThreadsFailures, MoreBlocksThanTheGpuHoldsAreRefusedWithTheNumbers) {
  configureDevice(3, 1);
  const int before = cudaemu::counters().liveDeviceAllocations;
  SetUpResult r = setUpThreads(2, [](int) { return linkOptions(0, geometryFor(2)); });
  const std::string expected =
      "rank 0: 2 ranks of this process share one GPU, each running 2 ring-kernel blocks that "
      "wait for one another: 4 blocks must be resident at once, but the GPU holds 3 (3 SMs x 1 "
      "blocks). Lower TORCH_RING_CUDA_CHANNELS to at most 1, or run the ranks as separate "
      "processes";
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_FALSE(r.outcomes[rank].ok()) << "rank " << rank << " set up a ring that cannot run";
    EXPECT_TRUE(threw<RingError>(r.outcomes[rank]));
    EXPECT_EQ(r.outcomes[rank].message(), expected);
  }
  EXPECT_EQ(cudaemu::counters().liveDeviceAllocations, before);
  // One channel each fits: the same two ranks set up.
  SetUpResult fits = setUpThreads(2, [](int) { return linkOptions(0, geometryFor(1)); });
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_TRUE(fits.outcomes[rank].ok()) << fits.outcomes[rank].message();
    EXPECT_TRUE(fits.usable[rank]);
  }
}

// Processes on one GPU time-slice rather than run at once: each needs only its own blocks.
TEST(EmulatedRingProcessesFailures, RanksInSeparateProcessesNeedOnlyTheirOwnBlocks) {
  cudaemu::clearFailures();
  configureDevice(3, 1);
  SharedMemoryStore store;
  const std::vector<EmulatedCase> cases = casesFor(2, 1, 40);
  auto outcomes = runRankProcesses(2, store, [&](int rank) {
    std::string all;
    for (const std::string& f : runRankCases(store, rank, 2, 0, geometryFor(2), cases)) all += f;
    return all;
  }, 60s);
  cudaemu::setConfig(cudaemu::Config{});
  for (const ProcessOutcome& o : outcomes) {
    EXPECT_EQ(o.exitCode, 0) << describeOutcomes(outcomes);
    EXPECT_EQ(o.result, "") << describeOutcomes(outcomes);
  }
}

RingWaitLimits longLimits() { return RingWaitLimits{60ull * 1000 * 1000 * 1000}; }
Fingerprint allReduceOf(uint64_t seq, int64_t count) {
  return makeFingerprint(Collective::AllReduce, seq, count, DType::Float32, RedOp::Sum, -1);
}

// What the refusal prevents: links set up for a device that held them, then a device that
// holds only one rank's blocks. Rank 0's kernel takes every slot and waits for rank 1's,
// which can never start: a hang, until rank 0 is aborted; then rank 1's kernel runs, and
// waits for rank 0 in turn, until it is aborted too.
TEST_F(EmulatedRingThreadsFailures, AGridThatDoesNotFitHangsUntilAborted) {
  configureDevice(4, 1);
  MemoryStore store;
  std::vector<std::unique_ptr<CudaRingLinks>> links(2);
  auto outcomes = runRanks(2, [&](int rank) {
    links[rank] = std::make_unique<CudaRingLinks>(store, rank, 2, linkOptions(0, geometryFor(2)));
  });
  for (auto& o : outcomes) ASSERT_TRUE(o.ok()) << o.message();
  configureDevice(2, 1);
  cudaStream_t streams[2];
  ChannelCounters counters[2] = {};
  const int64_t count = 4096;
  void* data[2];
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_EQ(cudaStreamCreateWithFlags(&streams[rank], cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&data[rank], count * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMemsetAsync(data[rank], 0, count * sizeof(float), streams[rank]), cudaSuccess);
    ASSERT_EQ(launchAllReduce(links[rank]->peers(), &counters[rank], data[rank], count,
                              DType::Float32, RedOp::Sum, 1.0, allReduceOf(0, count),
                              longLimits(), streams[rank]),
              "");
    if (rank == 0) {
      const auto until = std::chrono::steady_clock::now() + 5s;
      while (cudaemu::residentBlocks(0) < 2 && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(1ms);
      }
      ASSERT_EQ(cudaemu::residentBlocks(0), 2) << "rank 0's kernel did not take the device";
    }
  }
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(cudaStreamQuery(streams[0]), cudaErrorNotReady);
  EXPECT_EQ(cudaStreamQuery(streams[1]), cudaErrorNotReady);
  EXPECT_EQ(cudaemu::residentBlocks(0), 2);
  links[0]->requestAbort();
  ASSERT_EQ(cudaStreamSynchronize(streams[0]), cudaSuccess);
  links[1]->requestAbort();
  ASSERT_EQ(cudaStreamSynchronize(streams[1]), cudaSuccess);
  const DeviceErrorRecord r0 = links[0]->errorRecord();
  EXPECT_EQ(r0.status, kDeviceAborted);
  EXPECT_EQ(r0.wait, kWaitMessage);
  EXPECT_EQ(r0.peer, 1);
  EXPECT_EQ(links[1]->errorRecord().status, kDeviceAborted);
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(cudaFree(data[rank]), cudaSuccess);
    EXPECT_EQ(cudaStreamDestroy(streams[rank]), cudaSuccess);
  }
}

// ---- the device stack ---------------------------------------------------------------------------

// Kernels that need more stack than the device's limit: set-up raises the limit, so that no
// launch has to wait for an idle device (which, with a peer's kernel spinning, never comes).
TEST_F(EmulatedRingThreadsFailures, TheStackIsSizedAtSetUpNotAtALaunch) {
  cudaemu::Config c;
  c.kernelLocalBytes = 6000;
  c.initialStackBytes = 1024;
  cudaemu::setConfig(c);
  ASSERT_EQ(cudaDeviceSetLimit(cudaLimitStackSize, 1024), cudaSuccess);
  const uint64_t waitsBefore = cudaemu::counters().stackGrowthWaits;
  for (const std::string& p : runThreadRankCases(2, geometryFor(2), casesFor(2, 2, 40))) {
    ADD_FAILURE() << p;
  }
  size_t stack = 0;
  ASSERT_EQ(cudaDeviceGetLimit(&stack, cudaLimitStackSize), cudaSuccess);
  EXPECT_GE(stack, 6000u);
  EXPECT_EQ(cudaemu::counters().stackGrowthWaits, waitsBefore)
      << "a ring kernel launch had to grow the stack (and wait for an idle device)";
  ASSERT_EQ(cudaDeviceSetLimit(cudaLimitStackSize, 1024), cudaSuccess);
}

// ---- the abort word -----------------------------------------------------------------------------

// A rank launches, its peer never does: the kernel waits for the peer's first message until
// the host raises the abort word, then stops with a record that names the wait.
TEST_F(EmulatedRingThreadsFailures, TheAbortWordStopsAKernelWaitingForAPeer) {
  MemoryStore store;
  std::vector<std::unique_ptr<CudaRingLinks>> links(2);
  auto outcomes = runRanks(2, [&](int rank) {
    links[rank] = std::make_unique<CudaRingLinks>(store, rank, 2, linkOptions(0, geometryFor(3)));
  });
  for (auto& o : outcomes) ASSERT_TRUE(o.ok()) << o.message();
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  void* data = nullptr;
  ASSERT_EQ(cudaMalloc(&data, 8192 * sizeof(float)), cudaSuccess);
  ChannelCounters counters{};
  ASSERT_EQ(launchAllReduce(links[0]->peers(), &counters, data, 8192, DType::Float32, RedOp::Sum,
                            1.0, allReduceOf(0, 8192), longLimits(), s),
            "");
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(cudaStreamQuery(s), cudaErrorNotReady);
  EXPECT_FALSE(links[0]->abortRequested());
  links[0]->requestAbort();
  EXPECT_TRUE(links[0]->abortRequested());
  ASSERT_TRUE(finishOrAbort(*links[0], s, 10s)) << "the kernel did not see the abort word";
  const DeviceErrorRecord r = links[0]->errorRecord();
  EXPECT_EQ(r.status, kDeviceAborted);
  EXPECT_EQ(r.wait, kWaitMessage);
  EXPECT_EQ(r.peer, 1);
  EXPECT_EQ(r.expected, allReduceOf(0, 8192));
  const std::string text = explainDeviceStop(r, 0);
  EXPECT_NE(text.find("the group was aborted"), std::string::npos) << text;
  EXPECT_EQ(links[1]->errorRecord().status, kDeviceOk);
  EXPECT_EQ(cudaFree(data), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

}  // namespace
}  // namespace ring
