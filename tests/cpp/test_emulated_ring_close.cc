// The end of a CUDA ring between processes, over the emulated runtime (where freeing memory
// that another live process still has open through IPC ends the process loudly, as CUDA
// leaves it undefined): closeCollectively unmaps the neighbours' inboxes, waits at the store
// for every rank, and only then may the inbox be freed, so a rank that closes late trips
// nothing; a rank that never arrives leaves the memory kept, with the warning; and a rank
// killed while its peer's kernel waits for it leaves that kernel spinning until the host
// raises the abort word, the record read after the stream has finished.
#include <cuda_emulator.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "common/errors.h"
#include "emulated_ring_support.h"
#include "executor/cuda_errors.h"
#include "protocol/message_header.h"

namespace ring {
namespace {

using namespace testing_support;
using namespace std::chrono_literals;

class EmulatedRingProcessesClose : public ::testing::Test {
 protected:
  void SetUp() override {
    cudaemu::clearFailures();
    cudaemu::setConfig(cudaemu::Config{});
  }
};

RingWaitLimits longLimits() { return RingWaitLimits{60ull * 1000 * 1000 * 1000}; }
Fingerprint allReduceOf(uint64_t seq, int64_t count) {
  return makeFingerprint(Collective::AllReduce, seq, count, DType::Float32, RedOp::Sum, -1);
}

// One all_reduce of `count` floats on the rank's links: "" or what went wrong.
std::string oneAllReduce(CudaRingLinks& links, ChannelCounters* counters, cudaStream_t s,
                         uint64_t seq, int rank, int world) {
  EmulatedCase c{Collective::AllReduce, DType::Float32, RedOp::Sum, 3000, 0, false, 0};
  std::vector<char> out;
  return launchCase(c, seq, rank, world, links, counters, s, inputFor(c, world, seq, rank), &out);
}

void expectEveryRankFine(const std::vector<ProcessOutcome>& outcomes) {
  for (const ProcessOutcome& o : outcomes) {
    EXPECT_EQ(o.exitCode, 0) << describeOutcomes(outcomes);
    EXPECT_EQ(o.result, "") << describeOutcomes(outcomes);
    EXPECT_EQ(o.log.find("FATAL"), std::string::npos) << describeOutcomes(outcomes);
  }
}

// The last rank closes 400 ms after the others: the others wait at the store before freeing,
// so nobody frees an inbox the late rank still has mapped.
TEST_F(EmulatedRingProcessesClose, ALateCloserTripsNothing) {
  const int world = 3;
  SharedMemoryStore store;
  auto outcomes = runRankProcesses(world, store, [&](int rank) -> std::string {
    std::string error;
    {
      CudaRingLinks links(store, rank, world, linkOptions(0, geometryFor(2)));
      if (!links.usable()) return "declined: " + links.declineReason();
      cudaStream_t s;
      if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) return "stream";
      ChannelCounters counters{};
      error = oneAllReduce(links, &counters, s, 0, rank, world);
      (void)cudaStreamDestroy(s);
      if (rank == world - 1) std::this_thread::sleep_for(400ms);
      links.closeCollectively(store, 20s);
    }
    const cudaemu::Counters c = cudaemu::counters();
    if (error.empty() && (c.liveDeviceAllocations != 0 || c.liveHostAllocations != 0 ||
                          c.liveIpcMappings != 0)) {
      error = strCat("left allocated: ", c.liveDeviceAllocations, " device, ",
                     c.liveHostAllocations, " host, ", c.liveIpcMappings, " IPC mappings");
    }
    return error;
  }, 60s);
  expectEveryRankFine(outcomes);
}

// Rank 1 is killed after set-up: rank 0's close waits its bounded time, warns, and keeps the
// inbox and the control block rather than free memory a peer might still write.
TEST_F(EmulatedRingProcessesClose, APeerGoneAtCloseLeavesTheMemoryKept) {
  SharedMemoryStore store;
  auto outcomes = runRankProcesses(2, store, [&](int rank) -> std::string {
    CudaRingLinks* links = new CudaRingLinks(store, rank, 2, linkOptions(0, geometryFor(1)));
    if (!links->usable()) return "declined: " + links->declineReason();
    store.set(strCat("test/up/", rank), "1");
    if (rank == 1) {
      std::this_thread::sleep_for(60s);  // killed here
      return "not killed";
    }
    store.get("test/killed", 20s);
    links->closeCollectively(store, 300ms);
    delete links;
    const cudaemu::Counters c = cudaemu::counters();
    if (c.liveDeviceAllocations != 1 || c.liveHostAllocations != 1) {
      return strCat("expected the inbox and control block kept, found ", c.liveDeviceAllocations,
                    " device and ", c.liveHostAllocations, " host allocations");
    }
    return "";
  }, 60s, [&](const std::vector<pid_t>& pids) {
    store.get("test/up/0", 20s);
    store.get("test/up/1", 20s);
    kill(pids[1], SIGKILL);
    store.set("test/killed", "1");
  });
  ASSERT_EQ(outcomes[0].exitCode, 0) << describeOutcomes(outcomes);
  EXPECT_EQ(outcomes[0].result, "") << describeOutcomes(outcomes);
  EXPECT_EQ(outcomes[1].exitCode, 128 + SIGKILL);
  EXPECT_NE(outcomes[0].log.find("not every rank of the group closed its CUDA links within 300 ms; "
                                 "keeping this rank's CUDA inbox allocated"),
            std::string::npos) << outcomes[0].log;
  EXPECT_NE(outcomes[0].log.find("keeping the CUDA inbox of an aborted group allocated"),
            std::string::npos) << outcomes[0].log;
}

// Both ranks finish one all_reduce; rank 0 has launched the next when rank 1 is killed. Its
// kernel keeps waiting for rank 1's message (the host is the only one who can tell it to
// stop) until requestAbort(); the record, read once the stream has finished, names the wait.
TEST_F(EmulatedRingProcessesClose, APeerKilledMidCollectiveLeavesTheKernelSpinningUntilAborted) {
  SharedMemoryStore store;
  auto outcomes = runRankProcesses(2, store, [&](int rank) -> std::string {
    CudaRingLinks* links = new CudaRingLinks(store, rank, 2, linkOptions(0, geometryFor(2)));
    if (!links->usable()) return "declined: " + links->declineReason();
    cudaStream_t s;
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) return "stream";
    ChannelCounters counters{};
    std::string error = oneAllReduce(*links, &counters, s, 0, rank, 2);
    if (!error.empty()) return error;
    if (rank == 1) {
      store.set("test/first-done", "1");
      std::this_thread::sleep_for(60s);  // killed here
      return "not killed";
    }
    void* data = nullptr;
    if (cudaMalloc(&data, 4096 * sizeof(float)) != cudaSuccess) return "cudaMalloc";
    error = launchAllReduce(links->peers(), &counters, data, 4096, DType::Float32, RedOp::Sum, 1.0,
                            allReduceOf(1, 4096), longLimits(), s);
    if (!error.empty()) return error;
    store.get("test/killed", 20s);
    std::this_thread::sleep_for(300ms);
    if (cudaStreamQuery(s) != cudaErrorNotReady) return "the kernel ended without its peer";
    links->requestAbort();
    if (!finishOrAbort(*links, s, 10s)) return "the kernel did not see the abort word";
    const DeviceErrorRecord r = links->errorRecord();
    if (r.status != kDeviceAborted || r.wait != kWaitMessage || r.peer != 1) {
      return strCat("record: status ", r.status, " wait ", r.wait, " peer ", r.peer);
    }
    const std::string text = explainDeviceStop(r, 0);
    if (text.find("the group was aborted") == std::string::npos) return "explained: " + text;
    // A peer's kernel might still write here: the memory stays.
    links->keepMemory();
    links->closeCollectively(store, 200ms);
    delete links;
    return "";
  }, 60s, [&](const std::vector<pid_t>& pids) {
    store.get("test/first-done", 20s);
    kill(pids[1], SIGKILL);
    store.set("test/killed", "1");
  });
  ASSERT_EQ(outcomes[0].exitCode, 0) << describeOutcomes(outcomes);
  EXPECT_EQ(outcomes[0].result, "") << describeOutcomes(outcomes);
  EXPECT_EQ(outcomes[1].exitCode, 128 + SIGKILL);
}

}  // namespace
}  // namespace ring
