// The CUDA ring path's failures over the emulated runtime, threads as ranks: each ends in the
// error the GPU path promises, on every rank that called, within its bound - a timeout, a
// group broken by another rank (the watchdog raises the abort word and the kernels stop), a
// collective mismatch (named on every rank), and a task whose outcome is known from the error
// record before its own kernel ran (it still ends only with its end event).
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "cuda_engine_group.h"

namespace ring {
namespace {

using namespace std::chrono_literals;
using testing_support::awaitFinished;
using testing_support::callOf;
using testing_support::DeviceFloats;
using testing_support::EngineGroupOptions;
using testing_support::EngineRank;
using testing_support::errorOf;
using testing_support::Latch;
using testing_support::runEngineGroup;
using testing_support::StreamGate;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Polls the task (as the watchdog and Work.isCompleted do) until its kernel has ended.
std::chrono::milliseconds awaitKernelEnd(CudaTask& t, std::chrono::milliseconds bound) {
  const auto start = std::chrono::steady_clock::now();
  while (!t.poll() && std::chrono::steady_clock::now() - start < bound) {
    std::this_thread::sleep_for(1ms);
  }
  return std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
}

// The last rank never calls: every rank that did fails with the timeout's words, within the
// timeout and a poll/health interval or two, its kernel stopped.
TEST(CudaEngineFailures, ATimeoutFailsEveryCallingRankWithinTheBound) {
  const auto timeout = 300ms;
  for (int n : {2, 3}) {
    SCOPED_TRACE(testing::Message() << "world " << n);
    Latch callersDone(n);
    EngineGroupOptions o;
    o.groupTimeout = 1000ms;  // the rank that stayed out closes alone
    auto outcomes = runEngineGroup(n, [&](EngineRank& r) {
      if (r.rank == n - 1) {
        callersDone.arriveAndWait();
        return;
      }
      DeviceFloats data(std::vector<float>(512, 1.0f));
      auto task = r.engine.allReduce(callOf(r, 0, timeout), data.data(), 512, DType::Float32,
                                     RedOp::Sum, 1.0);
      const auto took = awaitFinished(*task, timeout + 3s);
      const std::string error = errorOf(*task);
      callersDone.arriveAndWait();
      EXPECT_TRUE(contains(error, "timed out after") &&
                  contains(error, "(the timeout is 300 ms)") &&
                  contains(error, "its CUDA ring kernel did not finish"))
          << "rank " << r.rank << ": " << error;
      EXPECT_LT(took, timeout + 1500ms) << "rank " << r.rank;
      EXPECT_TRUE(r.engine.state().links().abortRequested()) << "rank " << r.rank;
      EXPECT_LT(awaitKernelEnd(*task, 5s), 5s) << "rank " << r.rank << ": the kernel did not stop";
      EXPECT_THROW(r.engine.waitIdle(), CommError);
    }, o);
    for (const auto& out : outcomes) EXPECT_TRUE(out.ok()) << out.message();
  }
}

// Rank 0 aborts the group while the others' kernels wait for it: their watchdogs see the broken
// group (its health), raise the abort word and fail the tasks long before the timeout.
TEST(CudaEngineFailures, ABrokenGroupStopsTheKernelsInFlight) {
  const auto timeout = 3s;  // only a watchdog that never looked at the group would wait this long
  for (int n : {2, 4}) {
    SCOPED_TRACE(testing::Message() << "world " << n);
    Latch enqueued(n);
    EngineGroupOptions o;
    o.groupTimeout = 1000ms;
    auto outcomes = runEngineGroup(n, [&](EngineRank& r) {
      if (r.rank == 0) {
        enqueued.arriveAndWait();
        std::this_thread::sleep_for(50ms);
        r.comm.abort("the test stops rank 0");
        return;
      }
      DeviceFloats data(std::vector<float>(512, 1.0f));
      auto task = r.engine.allReduce(callOf(r, 0, timeout), data.data(), 512, DType::Float32,
                                     RedOp::Sum, 1.0);
      enqueued.arriveAndWait();
      const auto took = awaitFinished(*task, timeout + 2s);
      const std::string error = errorOf(*task);
      EXPECT_TRUE(contains(error, "was stopped") &&
                  contains(error, "rank 0 aborted the group: the test stops rank 0"))
          << "rank " << r.rank << ": " << error;
      EXPECT_LT(took, 1500ms) << "rank " << r.rank;
      EXPECT_TRUE(r.engine.state().links().abortRequested()) << "rank " << r.rank;
      // The abort word reached the kernel: it ends now, not at its own spin limit.
      EXPECT_LT(awaitKernelEnd(*task, 2s), 2s) << "rank " << r.rank << ": the kernel did not stop";
      EXPECT_THROW(r.engine.waitIdle(), CommError);
    }, o);
    for (const auto& out : outcomes) EXPECT_TRUE(out.ok()) << out.message();
  }
}

// The last rank calls with another count: every rank's task fails naming both calls.
TEST(CudaEngineFailures, AMismatchNamesBothCallsOnEveryRank) {
  for (int n : {2, 3}) {
    SCOPED_TRACE(testing::Message() << "world " << n);
    auto outcomes = runEngineGroup(n, [&](EngineRank& r) {
      const int64_t count = r.rank == n - 1 ? 96 : 64;
      DeviceFloats data(std::vector<float>(static_cast<size_t>(count), 1.0f));
      auto task = r.engine.allReduce(callOf(r, 0, 10s), data.data(), count, DType::Float32,
                                     RedOp::Sum, 1.0);
      awaitFinished(*task, 8s);
      const std::string error = errorOf(*task);
      EXPECT_TRUE(contains(error, "collective mismatch: rank") &&
                  contains(error, "all_reduce of 64 float32 (op SUM), sequence 0") &&
                  contains(error, "all_reduce of 96 float32 (op SUM), sequence 0"))
          << "rank " << r.rank << ": " << error;
      EXPECT_LT(awaitKernelEnd(*task, 5s), 5s) << "rank " << r.rank;
      EXPECT_THROW(r.engine.waitIdle(), CommError);
    });
    for (const auto& out : outcomes) EXPECT_TRUE(out.ok()) << out.message();
  }
}

// Sequence 0 fails (a mismatch: its kernel leaves an error record); sequence 1 is queued behind
// it, but its kernel cannot start while the caller's stream is held. The record already says
// that sequence 1 cannot succeed, yet its kernel has not ended: the task must not count as
// ended (the watchdog would drop it, waitIdle and shutdown would go on while it may still run)
// until its end event completes. It fails at once all the same (the group broke).
TEST(CudaEngineFailures, ATaskEndsOnlyWithItsEndEvent) {
  auto outcomes = runEngineGroup(2, [&](EngineRank& r) {
    const int64_t count = r.rank == 1 ? 96 : 64;
    DeviceFloats first(std::vector<float>(96, 1.0f)), second(std::vector<float>(64, 1.0f));
    auto failing = r.engine.allReduce(callOf(r, 0, 10s), first.data(), count, DType::Float32,
                                      RedOp::Sum, 1.0);
    StreamGate gate;
    gate.close(r.caller);
    auto held = r.engine.allReduce(callOf(r, 1, 10s), second.data(), 64, DType::Float32,
                                   RedOp::Sum, 1.0);
    awaitFinished(*failing, 8s);
    EXPECT_TRUE(contains(errorOf(*failing), "collective mismatch")) << errorOf(*failing);
    ASSERT_LT(awaitKernelEnd(*failing, 5s), 5s);
    ASSERT_NE(r.engine.state().links().errorRecord().status, kDeviceOk)
        << "rank " << r.rank << ": the failed kernel left no record";
    for (int i = 0; i < 100; ++i) {
      ASSERT_FALSE(held->poll()) << "rank " << r.rank << ": sequence 1 counted as ended while its "
                                    "kernel was still held behind the caller's stream";
      std::this_thread::sleep_for(2ms);
    }
    EXPECT_EQ(cudaEventQuery(held->endEvent()), cudaErrorNotReady);
    (void)cudaGetLastError();
    gate.open();
    EXPECT_LT(awaitKernelEnd(*held, 5s), 5s);
    const std::string error = errorOf(*held);
    EXPECT_TRUE(contains(error, "sequence 1") && contains(error, "collective mismatch"))
        << "rank " << r.rank << ": " << error;
    EXPECT_THROW(r.engine.waitIdle(), CommError);
  });
  for (const auto& out : outcomes) EXPECT_TRUE(out.ok()) << out.message();
}

// A timeout too long for nanoseconds (python's timedelta.max is 2.7e9 years) means "wait as
// long as it takes": the kernels' spin limit, set beyond the timeout, must not wrap around. This
// one is chosen so that (timeout + the 30 s margin) x 1e6 wraps to under a millisecond.
TEST(CudaEngineFailures, AnEnormousTimeoutNeverStopsAKernelThatWaits) {
  const std::chrono::milliseconds wraps{18446744073710LL - 30000};
  const auto outcomes = runEngineGroup(2, [&](EngineRank& r) {
    DeviceFloats data(std::vector<float>(256, 1.0f));
    if (r.rank == 1) std::this_thread::sleep_for(100ms);  // rank 0's kernel waits for it
    auto task = r.engine.allReduce(callOf(r, 0, wraps), data.data(), 256, DType::Float32,
                                   RedOp::Sum, 1.0);
    awaitFinished(*task, 10s);
    EXPECT_EQ(errorOf(*task), "") << "rank " << r.rank;
    r.engine.waitIdle();
  });
  for (const auto& out : outcomes) EXPECT_TRUE(out.ok()) << out.message();
}

// Rank 1's part of the two tests below: it aborts with a kernel in flight, which its watchdog
// stops, marking its group broken; its task fails.
void abortWithAKernelInFlight(EngineRank& r, const DeviceFloats& data) {
  auto task =
      r.engine.allReduce(callOf(r, 0), data.data(), 64, DType::Float32, RedOp::Sum, 1.0);
  r.comm.abort("the test stops rank 1");
  awaitFinished(*task, 10s);
  EXPECT_NE(errorOf(*task), "");
}

// Rank 1 aborts with a kernel in flight (its watchdog stops it and marks its group broken);
// rank 0, with none in flight, learns of it only when its next collective is refused. From
// then on rank 0's group is broken too: waitIdle (what a barrier calls) says so, and its
// shutdown does not wait to close the CUDA links with rank 1, which skips the close.
TEST(CudaEngineFailures, ARankToldOfAFailureAtEnqueueIsBrokenToo) {
  EngineGroupOptions o;
  o.groupTimeout = 20s;  // the close wait is the lesser of it and 30 s
  Latch failed(2);
  std::vector<std::chrono::milliseconds> shutdownTook(2);
  auto outcomes = runEngineGroup(2, [&](EngineRank& r) {
    DeviceFloats data(std::vector<float>(64, 1.0f));
    if (r.rank == 1) abortWithAKernelInFlight(r, data);
    failed.arriveAndWait();
    if (r.rank == 0) {
      EXPECT_THROW(r.engine.allReduce(callOf(r, 0), data.data(), 64, DType::Float32,
                                      RedOp::Sum, 1.0),
                   CommError);
      EXPECT_THROW(r.engine.waitIdle(), CommError);
    }
    const auto start = std::chrono::steady_clock::now();
    r.engine.shutdown();
    shutdownTook[r.rank] = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - start);
  }, o);
  EXPECT_LT(shutdownTook[0], 5s);
  EXPECT_LT(shutdownTook[1], 5s);
}

// The same failure, and rank 0 never calls again: its shutdown asks the group's health itself
// and does not wait for rank 1 to close the links either.
TEST(CudaEngineFailures, ARankOfAFailedGroupDoesNotWaitToCloseAtShutdown) {
  EngineGroupOptions o;
  o.groupTimeout = 20s;
  Latch failed(2);
  std::chrono::milliseconds shutdownTook{0};
  auto outcomes = runEngineGroup(2, [&](EngineRank& r) {
    DeviceFloats data(std::vector<float>(64, 1.0f));
    if (r.rank == 1) abortWithAKernelInFlight(r, data);
    failed.arriveAndWait();
    if (r.rank == 0) {
      const auto start = std::chrono::steady_clock::now();
      r.engine.shutdown();
      shutdownTook = std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::steady_clock::now() - start);
    }
  }, o);
  EXPECT_LT(shutdownTook, 5s);
}

}  // namespace
}  // namespace ring
