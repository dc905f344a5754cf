// The torch-free CUDA engine with its ranks as separate processes over the emulated runtime
// (inboxes mapped through CUDA IPC, the communicator over shared memory between processes, as
// torchrun's ranks are): all_reduces complete with the sums, and a peer process killed while
// the others' kernels wait for it ends their collectives with an error naming it, on every
// surviving rank, well within the timeout - the watchdog learns of the death through the
// group's health, raises the abort word, and the kernels stop.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "cuda_emulator.h"
#include "cuda_engine_group.h"
#include "emulated_ring_support.h"

namespace ring {
namespace {

using namespace std::chrono_literals;
using testing_support::awaitFinished;
using testing_support::callOf;
using testing_support::DeviceFloats;
using testing_support::describeOutcomes;
using testing_support::EngineGroupOptions;
using testing_support::EngineRank;
using testing_support::errorOf;
using testing_support::floatsAfterTask;
using testing_support::ProcessOutcome;
using testing_support::runEngineRank;
using testing_support::runRankProcesses;
using testing_support::SharedMemoryStore;
using testing_support::StreamGate;

constexpr int64_t kCount = 3000;

// One all_reduce of rank-dependent floats (every sum exact): "" or what went wrong.
std::string allReduceMatches(EngineRank& r, uint64_t seq) {
  std::vector<float> in(kCount);
  for (int64_t i = 0; i < kCount; ++i) in[i] = static_cast<float>((r.rank + 1) * 1000 + i % 97);
  DeviceFloats data(in);
  auto task = r.engine.allReduce(callOf(r, seq, 20s), data.data(), kCount, DType::Float32,
                                 RedOp::Sum, 1.0);
  awaitFinished(*task, 25s);
  if (const std::string e = errorOf(*task); !e.empty()) return strCat("all_reduce ", seq, ": ", e);
  const std::vector<float> out = floatsAfterTask(*task, r.caller, data);
  for (int64_t i = 0; i < kCount; ++i) {
    float want = 0;
    for (int k = 0; k < r.size; ++k) want += static_cast<float>((k + 1) * 1000 + i % 97);
    if (out[i] != want) return strCat("all_reduce ", seq, ": element ", i, " is ", out[i], ", not ", want);
  }
  return "";
}

TEST(CudaEngineProcesses, AllReducesCompleteWithTheSums) {
  cudaemu::clearFailures();
  for (int n : {2, 3}) {
    SCOPED_TRACE(testing::Message() << "world " << n);
    SharedMemoryStore store;
    auto outcomes = runRankProcesses(n, store, [&](int rank) {
      std::string result;
      runEngineRank(store, rank, n, [&](EngineRank& r) {
        for (uint64_t seq = 0; seq < 3 && result.empty(); ++seq) result = allReduceMatches(r, seq);
      }, EngineGroupOptions{});
      return result;
    }, 120s);
    for (const ProcessOutcome& o : outcomes) {
      EXPECT_EQ(o.exitCode, 0) << describeOutcomes(outcomes);
      EXPECT_EQ(o.result, "") << describeOutcomes(outcomes);
    }
  }
}

// After one good all_reduce, ranks 0 and 1 enqueue the next; rank 2 enqueues it behind a
// stream it never opens (its kernel never starts) and is killed with SIGKILL. The survivors'
// tasks fail naming rank 2's exit, long before their 20 s timeout, with their kernels stopped.
TEST(CudaEngineProcesses, APeerKilledMidCollectiveFailsTheOthersNamingIt) {
  cudaemu::clearFailures();
  const int n = 3;
  const auto timeout = 20s;
  SharedMemoryStore store;
  EngineGroupOptions o;
  o.groupTimeout = 2000ms;  // bounds the survivors' close protocol with a rank gone
  auto outcomes = runRankProcesses(n, store, [&](int rank) {
    std::string result;
    runEngineRank(store, rank, n, [&](EngineRank& r) {
      result = allReduceMatches(r, 0);
      if (!result.empty()) return;
      DeviceFloats data(std::vector<float>(kCount, 1.0f));
      StreamGate gate;
      if (r.rank == 2) gate.close(r.caller);
      auto task = r.engine.allReduce(callOf(r, 1, timeout), data.data(), kCount, DType::Float32,
                                     RedOp::Sum, 1.0);
      store.set(strCat("test/enqueued/", r.rank), "1");
      if (r.rank == 2) {
        std::this_thread::sleep_for(60s);  // killed here
        result = "not killed";
        return;
      }
      const auto took = awaitFinished(*task, timeout + 5s);
      const std::string error = errorOf(*task);
      if (error.find("rank 2") == std::string::npos ||
          error.find("has exited") == std::string::npos) {
        result = strCat("the task's error does not name rank 2's exit: '", error, "'");
      } else if (took > 10s) {
        result = strCat("the task failed after ", took.count(), " ms");
      } else if (!r.engine.state().links().abortRequested()) {
        result = "the abort word was not raised";
      } else {
        const auto start = std::chrono::steady_clock::now();
        while (!task->poll() && std::chrono::steady_clock::now() - start < 5s) {
          std::this_thread::sleep_for(1ms);
        }
        if (!task->poll()) result = "the kernel did not stop after the abort word";
      }
    }, o);
    return result;
  }, 120s, [&](const std::vector<pid_t>& pids) {
    for (int r = 0; r < n; ++r) store.get(strCat("test/enqueued/", r), 60s);
    std::this_thread::sleep_for(100ms);  // the survivors' kernels are waiting now
    kill(pids[2], SIGKILL);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(outcomes[r].exitCode, 0) << describeOutcomes(outcomes);
    EXPECT_EQ(outcomes[r].result, "") << describeOutcomes(outcomes);
  }
  EXPECT_EQ(outcomes[2].exitCode, 128 + SIGKILL) << describeOutcomes(outcomes);
}

}  // namespace
}  // namespace ring
