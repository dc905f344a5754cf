// The CUDA ring path's host code below torch (executor/cuda_ring_engine.h) over the emulated
// CUDA runtime, threads as ranks: the collectives complete with the right values, the kernel
// starts only after the work queued before it on the caller's stream, the flight recorder sees
// each call, and CUDA graph capture is refused in the backend's words.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "cuda_emulator.h"
#include "cuda_engine_group.h"

namespace ring {
namespace {

using namespace std::chrono_literals;
using testing_support::awaitFinished;
using testing_support::callOf;
using testing_support::DeviceFloats;
using testing_support::EngineRank;
using testing_support::errorOf;
using testing_support::readAfter;
using testing_support::runEngineGroup;
using testing_support::StreamGate;

void expectAllOk(const std::vector<testing_support::RankOutcome>& outcomes) {
  for (size_t r = 0; r < outcomes.size(); ++r) {
    EXPECT_TRUE(outcomes[r].ok()) << "rank " << r << ": " << outcomes[r].message();
  }
}

std::vector<float> floatsAfter(CudaTask& t, const EngineRank& r, const DeviceFloats& buffer) {
  return testing_support::floatsAfterTask(t, r.caller, buffer);
}

class CudaEngineWorld : public ::testing::TestWithParam<int> {};

// Two all_reduces in a row (the channel counters carry over), each value exact in float.
TEST_P(CudaEngineWorld, AllReduceCompletesAndMatches) {
  const int n = GetParam();
  const int64_t count = 1000;
  const uint64_t kernelsBefore = CudaRingEngine::kernelCallCount();
  expectAllOk(runEngineGroup(n, [&](EngineRank& r) {
    for (uint64_t seq = 0; seq < 2; ++seq) {
      std::vector<float> in(count);
      for (int64_t i = 0; i < count; ++i) {
        in[i] = static_cast<float>((r.rank + 1) * (i % 7 + seq + 1));
      }
      DeviceFloats data(in);
      auto task = r.engine.allReduce(callOf(r, seq), data.data(), count, DType::Float32,
                                     RedOp::Sum, 1.0);
      const std::vector<float> got = floatsAfter(*task, r, data);
      for (int64_t i = 0; i < count; ++i) {
        ASSERT_EQ(got[i], static_cast<float>(n * (n + 1) / 2 * (i % 7 + seq + 1)))
            << "rank " << r.rank << " element " << i << " sequence " << seq;
      }
      awaitFinished(*task, 5s);
      ASSERT_EQ(errorOf(*task), "");
    }
    r.engine.waitIdle();
    const std::vector<FlightEntry> entries = r.recorder.snapshot();
    ASSERT_EQ(entries.size(), 2u);
    EXPECT_EQ(entries[1].collective, "all_reduce");
    EXPECT_EQ(entries[1].detail, "1000 x float32, op SUM (CUDA)");
    EXPECT_EQ(entries[1].state, "completed");
  }));
  EXPECT_EQ(CudaRingEngine::kernelCallCount() - kernelsBefore, static_cast<uint64_t>(2 * n));
}

INSTANTIATE_TEST_SUITE_P(Worlds, CudaEngineWorld, ::testing::Values(1, 2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return "world" + std::to_string(i.param);
                         });

TEST(CudaEngine, ReduceScatterAllGatherAndBroadcastMatch) {
  const int n = 3;
  const int64_t per = 257;
  expectAllOk(runEngineGroup(n, [&](EngineRank& r) {
    std::vector<float> whole(static_cast<size_t>(per * n));
    for (size_t i = 0; i < whole.size(); ++i) {
      whole[i] = static_cast<float>((r.rank + 1) * (i % 5 + 1));
    }
    DeviceFloats input(whole), output(std::vector<float>(per, -1.0f));
    auto rs = r.engine.reduceScatter(callOf(r, 0, 20s, "reduce_scatter_tensor"), input.data(),
                                     output.data(), per, DType::Float32, RedOp::Sum, 1.0);
    std::vector<float> got = floatsAfter(*rs, r, output);
    for (int64_t i = 0; i < per; ++i) {
      ASSERT_EQ(got[i], static_cast<float>(n * (n + 1) / 2 * ((r.rank * per + i) % 5 + 1))) << i;
    }

    DeviceFloats mine(std::vector<float>(per, static_cast<float>(r.rank + 10)));
    DeviceFloats gathered(std::vector<float>(per * n, -1.0f));
    auto ag = r.engine.allGather(callOf(r, 1, 20s, "all_gather_into_tensor"), mine.data(),
                                 gathered.data(), per, DType::Float32);
    got = floatsAfter(*ag, r, gathered);
    for (int64_t i = 0; i < per * n; ++i) ASSERT_EQ(got[i], static_cast<float>(i / per + 10)) << i;

    DeviceFloats b(std::vector<float>(per, static_cast<float>(r.rank == 1 ? 42 : -r.rank)));
    auto bc = r.engine.broadcast(callOf(r, 2, 20s, "broadcast"), b.data(), per, DType::Float32, 1);
    got = floatsAfter(*bc, r, b);
    for (int64_t i = 0; i < per; ++i) ASSERT_EQ(got[i], 42.0f) << i;
    r.engine.waitIdle();
    for (auto* t : {rs.get(), ag.get(), bc.get()}) EXPECT_EQ(errorOf(*t), "") << t->what();
  }));
}

// The input is written on the caller's stream, behind a gate that opens only after the
// collective was enqueued: a kernel that did not wait for the caller's stream would reduce the
// stale contents (-1000 per rank) and then have them overwritten by the copy.
TEST(CudaEngine, TheKernelStartsAfterTheCallersStream) {
  for (int n : {2, 3}) {
    SCOPED_TRACE(testing::Message() << "world " << n);
    const int64_t count = 300;
    expectAllOk(runEngineGroup(n, [&](EngineRank& r) {
      DeviceFloats source(std::vector<float>(count, static_cast<float>(r.rank + 1)));
      DeviceFloats data(std::vector<float>(count, -1000.0f));
      StreamGate gate;
      gate.close(r.caller);
      testing_support::cudaOk(cudaMemcpyAsync(data.data(), source.data(), data.bytes(),
                                              cudaMemcpyDeviceToDevice, r.caller),
                              "the caller's copy");
      auto task = r.engine.allReduce(callOf(r, 0), data.data(), count, DType::Float32,
                                     RedOp::Sum, 1.0);
      std::this_thread::sleep_for(100ms);  // time for a kernel that did not wait to run
      EXPECT_FALSE(task->poll()) << "the kernel ended before the caller's stream let it start";
      gate.open();
      const std::vector<float> got = floatsAfter(*task, r, data);
      for (int64_t i = 0; i < count; ++i) {
        ASSERT_EQ(got[i], static_cast<float>(n * (n + 1) / 2)) << "rank " << r.rank << " at " << i;
      }
      r.engine.waitIdle();
    }));
  }
}

// The watchdog queries its group's end events from a thread of its own: on a host of several
// GPUs it must make the group's device current there first, or its first query creates a
// context on device 0 for every rank of the host (each costs device memory). A group on
// device 1 of two, its kernel held back so that the watchdog polls the end event while it is
// pending; in a child process, whose emulated runtime starts with no context.
TEST(CudaEngine, TheWatchdogWorksOnItsGroupsDevice) {
  EXPECT_EXIT(
      {
        cudaemu::Config c = cudaemu::config();
        c.devices = 2;
        cudaemu::setConfig(c);
        testing_support::EngineGroupOptions o;
        o.device = 1;
        const auto outcomes = runEngineGroup(2, [&](EngineRank& r) {
          DeviceFloats data(std::vector<float>(64, 1.0f));
          StreamGate gate;
          gate.close(r.caller);
          auto task = r.engine.allReduce(callOf(r, 0), data.data(), 64, DType::Float32,
                                         RedOp::Sum, 1.0);
          std::this_thread::sleep_for(50ms);  // the watchdog polls the pending end event
          gate.open();
          awaitFinished(*task, 5s);
          r.engine.waitIdle();
        }, o);
        bool ok = cudaemu::hasContext(1) && !cudaemu::hasContext(0);
        for (const auto& out : outcomes) {
          if (!out.ok()) std::fprintf(stderr, "a rank failed: %s\n", out.message().c_str());
          ok = ok && out.ok();
        }
        if (cudaemu::hasContext(0)) std::fprintf(stderr, "a context was made on device 0\n");
        std::_Exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

// A captured stream is refused before anything is queued, with the words the backend shows;
// the group stays usable.
TEST(CudaEngine, GraphCaptureIsRefused) {
  expectAllOk(runEngineGroup(2, [&](EngineRank& r) {
    DeviceFloats data(std::vector<float>(16, 1.0f));
    testing_support::cudaOk(cudaStreamBeginCapture(r.caller, cudaStreamCaptureModeThreadLocal),
                            "begin capture");
    try {
      r.engine.allReduce(callOf(r, 0), data.data(), 16, DType::Float32, RedOp::Sum, 1.0);
      ADD_FAILURE() << "a captured all_reduce was enqueued";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(
                    "CUDA graph capture is not supported by the ring backend"),
                std::string::npos)
          << e.what();
    }
    cudaGraph_t graph = nullptr;
    testing_support::cudaOk(cudaStreamEndCapture(r.caller, &graph), "end capture");
    if (graph != nullptr) (void)cudaGraphDestroy(graph);
    auto task =
        r.engine.allReduce(callOf(r, 0), data.data(), 16, DType::Float32, RedOp::Sum, 1.0);
    const std::vector<float> got = floatsAfter(*task, r, data);
    EXPECT_EQ(got[0], 2.0f);
    r.engine.waitIdle();
  }));
}

}  // namespace
}  // namespace ring
