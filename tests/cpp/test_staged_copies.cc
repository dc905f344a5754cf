// A CUDA call staged through pinned host memory (executor/staged_copies.h) over the emulated
// CUDA runtime, held to ProcessGroupNCCL's stream semantics as torch documents them for
// Work.wait(): "for CUDA tensors, it blocks the currently active CUDA stream until the
// operation completes... the CPU thread is not blocked" - the copies in start after the work
// already queued on the caller's stream, the call and wait() return while the GPU is busy,
// and work the caller queues after wait() sees the result.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "common/errors.h"
#include "cuda_emulator.h"
#include "cuda_engine_group.h"
#include "executor/staged_copies.h"

namespace ring {
namespace {

using namespace std::chrono_literals;
using testing_support::cudaOk;
using testing_support::StreamGate;

constexpr size_t kCount = 256;
constexpr size_t kBytes = kCount * sizeof(float);

// A device buffer, its pinned host copy, and the two streams of a staged call.
struct StagedSetup {
  StagedSetup() {
    cudaOk(cudaSetDevice(0), "device 0");
    cudaOk(cudaMalloc(&device, kBytes), "cudaMalloc");
    cudaOk(cudaHostAlloc(&host, kBytes, cudaHostAllocPortable), "cudaHostAlloc");
    cudaOk(cudaHostAlloc(&readBack, kBytes, cudaHostAllocPortable), "cudaHostAlloc");
    cudaOk(cudaStreamCreateWithFlags(&caller, cudaStreamNonBlocking), "caller stream");
    cudaOk(cudaStreamCreateWithFlags(&copies, cudaStreamNonBlocking), "copy stream");
    fillDevice(std::vector<float>(kCount, -1.0f));
  }
  ~StagedSetup() {
    (void)cudaDeviceSynchronize();
    (void)cudaStreamDestroy(caller);
    (void)cudaStreamDestroy(copies);
    (void)cudaFree(device);
    (void)cudaFreeHost(host);
    (void)cudaFreeHost(readBack);
  }
  void fillDevice(const std::vector<float>& v) {
    cudaOk(cudaMemcpy(device, v.data(), kBytes, cudaMemcpyHostToDevice), "fill");
  }
  std::vector<HostCopy> buffers() const { return {HostCopy{device, host, kBytes}}; }
  float* hostFloats() const { return static_cast<float*>(host); }
  // The device buffer read on the caller's stream (after whatever the caller queued so far).
  void queueReadOnCaller() {
    cudaOk(cudaMemcpyAsync(readBack, device, kBytes, cudaMemcpyDeviceToHost, caller), "read");
  }
  std::vector<float> syncAndRead() {
    cudaOk(cudaStreamSynchronize(caller), "synchronize the caller");
    const float* f = static_cast<const float*>(readBack);
    return std::vector<float>(f, f + kCount);
  }
  std::vector<float> readOnCaller() {
    queueReadOnCaller();
    return syncAndRead();
  }

  void* device = nullptr;
  void* host = nullptr;
  void* readBack = nullptr;
  cudaStream_t caller = nullptr;
  cudaStream_t copies = nullptr;
};

std::vector<float> ramp(float base) {
  std::vector<float> v(kCount);
  for (size_t i = 0; i < kCount; ++i) v[i] = base + static_cast<float>(i);
  return v;
}

// Runs `f` on a thread of its own. The future's destructor joins that thread, so a test first
// undoes whatever holds it up.
template <typename F>
std::future<void> startThread(F f) {
  return std::async(std::launch::async, f);
}

TEST(StagedCopies, TheCopiesInWaitForTheCallersStreamAndTheCallReturnsAtOnce) {
  StagedSetup s;
  StreamGate gate;
  gate.close(s.caller);
  // The caller's work before the call (as the kernel that produced the input would be): it
  // writes the input, and runs only once the gate opens.
  const std::vector<float> produced = ramp(10.0f);
  cudaOk(cudaMemcpyAsync(s.device, produced.data(), kBytes, cudaMemcpyHostToDevice, s.caller),
         "the producing copy");
  StagedCopies call("all_to_all (sequence 0) on rank 0", s.copies);
  const auto start = std::chrono::steady_clock::now();
  call.copyIn(s.caller, s.buffers());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s) << "copyIn waited for the GPU";
  // Still behind the caller's gate: the wait runs out with the call's name and timeout.
  try {
    call.waitCopiedIn(50ms);
    ADD_FAILURE() << "the copies in finished although the caller's stream was held";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("all_to_all (sequence 0) on rank 0"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("within 50 ms"), std::string::npos) << e.what();
  }
  gate.open();
  call.waitCopiedIn(10s);
  EXPECT_EQ(std::vector<float>(s.hostFloats(), s.hostFloats() + kCount), produced)
      << "the copy in ran before the caller's earlier work";
  call.finish(nullptr);
}

TEST(StagedCopies, WaitReturnsBeforeTheCopiesBackAndTheCallersLaterWorkSeesThem) {
  StagedSetup s;
  StagedCopies call("reduce (sequence 1) on rank 0", s.copies);
  call.copyIn(s.caller, s.buffers());
  call.waitCopiedIn(10s);
  // The host call: its result in the host buffer.
  const std::vector<float> result = ramp(100.0f);
  std::memcpy(s.host, result.data(), kBytes);
  // Hold the copy stream, so that the copies back stay queued.
  StreamGate gate;
  gate.close(s.copies);
  ASSERT_EQ(call.queueCopiesBack(s.buffers()), nullptr);
  call.finish(nullptr);
  EXPECT_FALSE(call.isCompleted()) << "completed with its copies back still queued";
  auto waiting = startThread([&] { call.wait(s.caller); });
  const bool returned = waiting.wait_for(3s) == std::future_status::ready;
  // Queued on the caller's stream after wait() and while the copies back are still held: it
  // must run after them.
  if (returned) s.queueReadOnCaller();
  gate.open();  // whatever happened, let the streams go
  waiting.get();
  ASSERT_TRUE(returned) << "wait() blocked the CPU until the copies back landed";
  EXPECT_EQ(s.syncAndRead(), result) << "the caller's stream did not wait for the copies back";
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!call.isCompleted() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_TRUE(call.isCompleted());
}

TEST(StagedCopies, WaitBlocksUntilTheHostCallEndsAndRethrowsItsError) {
  StagedSetup s;
  StagedCopies call("gather (sequence 2) on rank 1", s.copies);
  call.copyIn(s.caller, s.buffers());
  auto waiting = startThread([&] { call.wait(s.caller); });
  EXPECT_EQ(waiting.wait_for(200ms), std::future_status::timeout)
      << "wait() returned before the host call ended";
  call.finish(std::make_exception_ptr(CommError("ring: rank 0 left the group")));
  ASSERT_EQ(waiting.wait_for(10s), std::future_status::ready);
  try {
    waiting.get();
    ADD_FAILURE() << "wait() did not rethrow the host call's error";
  } catch (const CommError& e) {
    EXPECT_STREQ(e.what(), "ring: rank 0 left the group");
  }
  EXPECT_TRUE(call.isCompleted());
  EXPECT_NE(call.error(), nullptr);
  // A failed call copies nothing back: the caller's buffer keeps its contents.
  EXPECT_EQ(s.readOnCaller(), std::vector<float>(kCount, -1.0f));
}

TEST(StagedCopies, ACudaErrorWhileQueueingNamesTheCallAndTheRuntimeCall) {
  StagedSetup s;
  StagedCopies call("scatter (sequence 3) on rank 0", s.copies);
  call.copyIn(s.caller, s.buffers());
  call.waitCopiedIn(10s);
  cudaemu::failCall("cudaMemcpyAsync", cudaErrorInvalidValue);
  std::exception_ptr e = call.queueCopiesBack(s.buffers());
  cudaemu::clearFailures();
  ASSERT_NE(e, nullptr);
  call.finish(e);
  try {
    call.wait(s.caller);
    ADD_FAILURE() << "wait() did not report the failed copy";
  } catch (const RingError& x) {
    const std::string text = x.what();
    EXPECT_NE(text.find("scatter (sequence 3) on rank 0"), std::string::npos) << text;
    EXPECT_NE(text.find("cudaMemcpyAsync (host to device) failed"), std::string::npos) << text;
    EXPECT_NE(text.find("cudaErrorInvalidValue"), std::string::npos) << text;
  }
}

}  // namespace
}  // namespace ring
