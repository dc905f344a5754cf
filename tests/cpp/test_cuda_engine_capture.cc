// The CUDA path's own threads and a user's CUDA graph capture, over the emulated runtime, whose
// rule is CUDA's (cudaThreadExchangeStreamCaptureMode): in the default Global mode a thread's
// event query fails, and invalidates the capture, while another thread captures in Global
// mode, as torch.cuda.graph does. The backend queries events from its watchdog (a kernel's end)
// and from the thread that runs a staged call (its copies in), while the user's thread may be
// capturing: neither may break the user's capture, nor take the refused query for a failure.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include "cuda_engine_group.h"
#include "executor/staged_copies.h"

namespace ring {
namespace {

using namespace std::chrono_literals;
using testing_support::awaitFinished;
using testing_support::callOf;
using testing_support::cudaOk;
using testing_support::DeviceFloats;
using testing_support::EngineRank;
using testing_support::errorOf;
using testing_support::runEngineGroup;
using testing_support::StreamGate;

// A graph captured in Global mode on a stream of its own for `hold`: what ending it returns.
cudaError_t captureFor(std::chrono::milliseconds hold) {
  cudaStream_t s = nullptr;
  cudaOk(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "capture stream");
  cudaOk(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), "begin capture");
  std::this_thread::sleep_for(hold);
  cudaGraph_t graph = nullptr;
  const cudaError_t e = cudaStreamEndCapture(s, &graph);
  if (graph != nullptr) (void)cudaGraphDestroy(graph);
  (void)cudaStreamDestroy(s);
  (void)cudaGetLastError();
  return e;
}

TEST(CudaEngineCapture, TheWatchdogLeavesAnotherThreadsGlobalCaptureAlone) {
  // Every rank has enqueued before rank 0 captures, and calls nothing else until it is done:
  // only the watchdogs touch the runtime during the capture.
  testing_support::Latch enqueued(2), captured(2);
  const auto outcomes = runEngineGroup(2, [&](EngineRank& r) {
    DeviceFloats data(std::vector<float>(64, 1.0f));
    StreamGate gate;
    gate.close(r.caller);  // the kernel waits: the watchdog polls its end event meanwhile
    auto task =
        r.engine.allReduce(callOf(r, 0), data.data(), 64, DType::Float32, RedOp::Sum, 1.0);
    enqueued.arriveAndWait();
    if (r.rank == 0) {
      EXPECT_EQ(captureFor(100ms), cudaSuccess);
    }
    captured.arriveAndWait();
    gate.open();
    awaitFinished(*task, 10s);
    EXPECT_EQ(errorOf(*task), "");
    r.engine.waitIdle();
  });
  for (const auto& out : outcomes) EXPECT_TRUE(out.ok()) << out.message();
}

// The user's own thread asks whether the work is done inside its capture (Work.is_completed()):
// CUDA refuses that query (the thread's own capture), and the user learns so when the capture
// ends; the collective's outcome is still to come, not a failed kernel.
TEST(CudaEngineCapture, AQueryRefusedByTheCallersOwnCaptureIsNotAFailure) {
  // Both ranks are threads of this process and both capture in Global mode: neither may begin
  // before the other has set up and enqueued (a Global capture refuses the other thread's
  // synchronizing copy of its input, which then outlives its buffer), nor go on before the
  // other has ended its capture.
  testing_support::Latch enqueued(2), captured(2);
  const auto outcomes = runEngineGroup(2, [&](EngineRank& r) {
    DeviceFloats data(std::vector<float>(64, 1.0f));
    StreamGate gate;
    gate.close(r.caller);
    auto task =
        r.engine.allReduce(callOf(r, 0), data.data(), 64, DType::Float32, RedOp::Sum, 1.0);
    enqueued.arriveAndWait();
    cudaStream_t s = nullptr;
    cudaOk(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "capture stream");
    cudaOk(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), "begin capture");
    EXPECT_FALSE(task->poll());
    EXPECT_FALSE(task->finished());
    cudaGraph_t graph = nullptr;
    EXPECT_EQ(cudaStreamEndCapture(s, &graph), cudaErrorStreamCaptureInvalidated);
    captured.arriveAndWait();
    (void)cudaStreamDestroy(s);
    (void)cudaGetLastError();
    gate.open();
    awaitFinished(*task, 10s);
    EXPECT_EQ(errorOf(*task), "");
    r.engine.waitIdle();
  });
  for (const auto& out : outcomes) EXPECT_TRUE(out.ok()) << out.message();
}

TEST(CudaEngineCapture, AStagedCallsCopiesInAreAwaitedWithoutBreakingACapture) {
  cudaOk(cudaSetDevice(0), "device 0");
  void* device = nullptr;
  void* host = nullptr;
  cudaOk(cudaMalloc(&device, 1024), "cudaMalloc");
  cudaOk(cudaHostAlloc(&host, 1024, cudaHostAllocPortable), "cudaHostAlloc");
  cudaStream_t caller = nullptr, copies = nullptr;
  cudaOk(cudaStreamCreateWithFlags(&caller, cudaStreamNonBlocking), "caller stream");
  cudaOk(cudaStreamCreateWithFlags(&copies, cudaStreamNonBlocking), "copy stream");
  {
    StreamGate gate;
    gate.close(caller);  // the copies in wait behind the caller's earlier work
    StagedCopies staged("reduce (sequence 0) on rank 0", copies);
    staged.copyIn(caller, {HostCopy{device, host, 1024}});
    // The thread that runs the staged call waits for the copies in, polling their event.
    auto waited = std::async(std::launch::async, [&] {
      cudaOk(cudaSetDevice(0), "device 0");
      staged.waitCopiedIn(10s);
      return true;
    });
    EXPECT_EQ(captureFor(100ms), cudaSuccess);
    gate.open();
    EXPECT_TRUE(waited.get());
    staged.finish(nullptr);
  }
  (void)cudaStreamDestroy(caller);
  (void)cudaStreamDestroy(copies);
  (void)cudaFree(device);
  (void)cudaFreeHost(host);
}

}  // namespace
}  // namespace ring
