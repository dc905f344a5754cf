// The special stream handles and what else a stream carries, from the CUDA Runtime API and
// the CUDA Driver API, "Stream synchronization behavior":
//   - cudaStreamLegacy names the legacy default stream (as the null stream does);
//   - cudaStreamPerThread is each host thread's own default stream: two threads' do not wait
//     for each other, and a thread's synchronizes with the legacy stream like a blocking stream;
//   - a host function (cudaLaunchHostFunc, cudaStreamAddCallback) runs in its place in the
//     stream's order, and the stream's later work waits for it;
//   - stream priorities: the device's range, a priority outside it clamped into it;
//   - the tests' slow-kernel control (CUDA_EMULATOR_LAUNCH_DELAY_MS) delays a kernel's start on
//     its stream, and with it everything ordered after the kernel.
#include <vector>

#include "test_support.h"

namespace emutest {
namespace {

using namespace std::chrono_literals;

class EmulatorStreamHandles : public Emulator {};

TEST_F(EmulatorStreamHandles, CudaStreamLegacyIsTheNullStream) {
  Gate gate;
  std::vector<int> log(4, -1);
  std::atomic<int> count{0};
  ASSERT_EQ(launchOne(&waitAt, nullptr, &gate), cudaSuccess);
  ASSERT_EQ(launchOne(&appendValue, cudaStreamLegacy, log.data(), &count, 1), cudaSuccess);
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(count.load(), 0);  // behind the gated kernel on the same stream
  gate.release();
  ASSERT_EQ(cudaStreamSynchronize(cudaStreamLegacy), cudaSuccess);
  EXPECT_EQ(count.load(), 1);
}

TEST_F(EmulatorStreamHandles, PerThreadStreamsOfTwoThreadsAreIndependent) {
  Gate gate;
  std::atomic<int> flag{0};
  std::thread first([&] { ASSERT_EQ(launchOne(&waitAt, cudaStreamPerThread, &gate), cudaSuccess); });
  first.join();
  std::thread second([&] {
    ASSERT_EQ(launchOne(&setFlag, cudaStreamPerThread, &flag, 1), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(cudaStreamPerThread), cudaSuccess);
  });
  second.join();
  EXPECT_EQ(flag.load(), 1);  // ran while the first thread's stream was held at the gate
  gate.release();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

TEST_F(EmulatorStreamHandles, APerThreadStreamSynchronizesWithTheLegacyStream) {
  Gate gate;
  std::atomic<int> flag{0};
  ASSERT_EQ(launchOne(&waitAt, cudaStreamPerThread, &gate), cudaSuccess);
  ASSERT_EQ(launchOne(&setFlag, nullptr, &flag, 1), cudaSuccess);
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(flag.load(), 0);  // the legacy stream waits for the per-thread stream
  gate.release();
  ASSERT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
  EXPECT_EQ(flag.load(), 1);
}

void appendFromHost(void* data) {
  auto* log = static_cast<std::vector<int>*>(data);
  log->push_back(static_cast<int>(log->size()) + 100);
}

struct Callback {
  std::atomic<int> calls{0};
  cudaError_t status = cudaErrorUnknown;
  cudaStream_t stream = nullptr;
};
void recordCallback(cudaStream_t stream, cudaError_t status, void* data) {
  auto* c = static_cast<Callback*>(data);
  c->stream = stream;
  c->status = status;
  ++c->calls;
}

TEST_F(EmulatorStreamHandles, HostFunctionsRunInTheirPlaceInTheStream) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  Gate gate;
  std::vector<int> log;
  ASSERT_EQ(launchOne(&waitAt, s, &gate), cudaSuccess);
  ASSERT_EQ(cudaLaunchHostFunc(s, &appendFromHost, &log), cudaSuccess);
  Callback callback;
  ASSERT_EQ(cudaStreamAddCallback(s, &recordCallback, &callback, 0), cudaSuccess);
  std::this_thread::sleep_for(20ms);
  EXPECT_TRUE(log.empty());  // behind the gated kernel
  EXPECT_EQ(cudaStreamQuery(s), cudaErrorNotReady);
  gate.release();
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(log, std::vector<int>{100});
  EXPECT_EQ(callback.calls.load(), 1);
  EXPECT_EQ(callback.status, cudaSuccess);
  EXPECT_EQ(callback.stream, s);
  EXPECT_EQ(cudaStreamAddCallback(s, &recordCallback, &callback, 1), cudaErrorInvalidValue);
  EXPECT_EQ(cudaLaunchHostFunc(s, nullptr, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  (void)cudaGetLastError();
}

TEST_F(EmulatorStreamHandles, PrioritiesComeFromTheDeviceRangeAndAreClamped) {
  int least = 1, greatest = 1;
  ASSERT_EQ(cudaDeviceGetStreamPriorityRange(&least, &greatest), cudaSuccess);
  EXPECT_LE(greatest, least);  // lower numbers are higher priorities
  cudaStream_t high, beyond;
  ASSERT_EQ(cudaStreamCreateWithPriority(&high, cudaStreamNonBlocking, greatest), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithPriority(&beyond, cudaStreamNonBlocking, greatest - 10),
            cudaSuccess);
  int p = 0;
  ASSERT_EQ(cudaStreamGetPriority(high, &p), cudaSuccess);
  EXPECT_EQ(p, greatest);
  ASSERT_EQ(cudaStreamGetPriority(beyond, &p), cudaSuccess);
  EXPECT_EQ(p, greatest);
  ASSERT_EQ(cudaStreamGetPriority(nullptr, &p), cudaSuccess);
  EXPECT_EQ(p, least);
  EXPECT_EQ(cudaStreamDestroy(high), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(beyond), cudaSuccess);
}

TEST_F(EmulatorStreamHandles, ALaunchDelayHoldsTheKernelAndWhatFollowsIt) {
  cudaemu::Config c;
  c.launchDelay = 150ms;
  cudaemu::setConfig(c);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  std::atomic<int> flag{0};
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(launchOne(&setFlag, s, &flag, 1), cudaSuccess);
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(flag.load(), 0);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(flag.load(), 1);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 150ms);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

TEST_F(EmulatorStreamHandles, AHostToDeviceCopyDelayHoldsThatCopyAndNoOther) {
  cudaemu::Config c;
  c.hostToDeviceCopyDelay = 200ms;
  cudaemu::setConfig(c);
  cudaStream_t slow, fast;
  ASSERT_EQ(cudaStreamCreateWithFlags(&slow, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&fast, cudaStreamNonBlocking), cudaSuccess);
  int* dev = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dev), 2 * sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaMemset(dev, 0, 2 * sizeof(int)), cudaSuccess);
  const int host[2] = {7, 9};
  int back[2] = {0, 0};
  const auto start = std::chrono::steady_clock::now();
  // The host-to-device copy into dev[0] waits; a device-to-device copy into dev[1] on another
  // stream, queued after it, lands first.
  ASSERT_EQ(cudaMemcpyAsync(dev, host, sizeof(int), cudaMemcpyHostToDevice, slow), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(dev + 1, dev, sizeof(int), cudaMemcpyDeviceToDevice, fast),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(fast), cudaSuccess);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 150ms);
  ASSERT_EQ(cudaMemcpy(back, dev + 1, sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(back[0], 0);  // copied before the delayed copy landed
  ASSERT_EQ(cudaStreamSynchronize(slow), cudaSuccess);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 200ms);
  ASSERT_EQ(cudaMemcpy(back, dev, sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(back[0], 7);
  EXPECT_EQ(cudaFree(dev), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(slow), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(fast), cudaSuccess);
}

}  // namespace
}  // namespace emutest
