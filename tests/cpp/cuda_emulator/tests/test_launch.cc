// Launches: arguments are taken at the call; a grid larger than the device runs as blocks
// finish (and a grid whose blocks wait for each other and do not all fit never finishes);
// launch configuration errors; a kernel that needs more stack than the limit waits for the
// device to go idle; cudaDeviceSetLimit(cudaLimitStackSize) waits for it too (CUDA Driver
// API, cuCtxSetLimit); the last error is kept per host thread.
#include <algorithm>

#include "test_support.h"

namespace emutest {
namespace {

using namespace std::chrono_literals;

class EmulatorLaunches : public Emulator {};

struct Occupancy {
  std::atomic<int> now{0}, peak{0}, ran{0};
};
void occupy(Occupancy* o) {
  if (threadIdx != 0) return;
  const int n = ++o->now;
  int seen = o->peak.load();
  while (n > seen && !o->peak.compare_exchange_weak(seen, n)) {
  }
  std::this_thread::sleep_for(5ms);
  --o->now;
  ++o->ran;
}

// Every block waits until all `blocks` have arrived (or the test lets them go).
struct Rendezvous {
  std::atomic<int> arrived{0};
  std::atomic<int> letGo{0};
  int blocks = 0;
};
void meetAll(Rendezvous* r) {
  if (threadIdx != 0) return;
  r->arrived.fetch_add(1);
  while (r->arrived.load() < r->blocks && r->letGo.load() == 0) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

struct Payload {
  int values[4];
};
void copyPayload(Payload p, Gate* gate, int* out) {
  waitAt(gate);
  if (threadIdx == 0) std::copy(p.values, p.values + 4, out);
}

cudaError_t launchGrid(void (*kernel)(Occupancy*), unsigned blocks, Occupancy* o,
                       cudaStream_t s) {
  void* args[] = {&o};
  return cudaLaunchKernel(kernel, dim3(blocks), dim3(64), args, 0, s);
}

TEST_F(EmulatorLaunches, AGridLargerThanTheDeviceRunsAsBlocksFinish) {
  cudaemu::Config c;
  c.smsPerDevice = 1;
  c.blocksPerSm = 2;
  cudaemu::setConfig(c);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  Occupancy o;
  ASSERT_EQ(launchGrid(&occupy, 7, &o, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(o.ran.load(), 7);
  EXPECT_EQ(o.peak.load(), 2);
  EXPECT_LE(cudaemu::counters().maxResidentBlocks, 2);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

TEST_F(EmulatorLaunches, BlocksThatWaitForEachOtherAndDoNotFitNeverFinish) {
  cudaemu::Config c;
  c.smsPerDevice = 3;
  c.blocksPerSm = 1;
  cudaemu::setConfig(c);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  for (unsigned blocks : {3u, 4u}) {
    SCOPED_TRACE(testing::Message() << blocks << " blocks on a device of 3");
    Rendezvous r;
    r.blocks = static_cast<int>(blocks);
    Rendezvous* rp = &r;
    void* args[] = {&rp};
    ASSERT_EQ(cudaLaunchKernel(&meetAll, dim3(blocks), dim3(32), args, 0, s), cudaSuccess);
    const bool finished = eventually([&] { return cudaStreamQuery(s) == cudaSuccess; }, 500ms);
    if (blocks == 3) {
      EXPECT_TRUE(finished);
    } else {
      EXPECT_FALSE(finished) << "the blocks that did not fit ran anyway";
      EXPECT_EQ(r.arrived.load(), 3);
      EXPECT_EQ(cudaemu::residentBlocks(0), 3);
      r.letGo.store(1);  // released: the last block then starts, finds it let go, ends
    }
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    EXPECT_EQ(r.arrived.load(), static_cast<int>(blocks));
  }
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

TEST_F(EmulatorLaunches, ArgumentsAreTakenWhenTheKernelIsLaunched) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  Gate gate;
  int out[4] = {0, 0, 0, 0};
  {
    Payload p{{1, 2, 3, 4}};
    Gate* g = &gate;
    int* o = out;
    void* args[] = {&p, &g, &o};
    ASSERT_EQ(cudaLaunchKernel(&copyPayload, dim3(1), dim3(1), args, 0, s), cudaSuccess);
    p.values[0] = 99;  // after the launch: the kernel must not see it
  }
  gate.release();
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(out[0], 1);
  EXPECT_EQ(out[3], 4);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

TEST_F(EmulatorLaunches, BadConfigurationsAreRefusedAndKeptAsTheLastError) {
  Occupancy o;
  Occupancy* op = &o;
  void* args[] = {&op};
  EXPECT_EQ(cudaLaunchKernel(&occupy, dim3(0), dim3(32), args, 0, nullptr),
            cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "cudaGetLastError resets it";
  EXPECT_EQ(cudaLaunchKernel(&occupy, dim3(1), dim3(2048), args, 0, nullptr),
            cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaLaunchKernel(&occupy, dim3(1), dim3(32, 32, 2), args, 0, nullptr),
            cudaErrorInvalidConfiguration);
  void (*none)(Occupancy*) = nullptr;
  EXPECT_EQ(cudaLaunchKernel(none, dim3(1), dim3(1), args, 0, nullptr),
            cudaErrorInvalidDeviceFunction);
  // Another host thread has a last error of its own.
  cudaError_t other = cudaErrorUnknown;
  std::thread([&] { other = cudaGetLastError(); }).join();
  EXPECT_EQ(other, cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDeviceFunction);
  EXPECT_EQ(o.ran.load(), 0);
}

TEST_F(EmulatorLaunches, SettingTheStackLimitWaitsForAnIdleDevice) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  Gate gate;
  ASSERT_EQ(launchOne(&waitAt, s, &gate), cudaSuccess);
  std::atomic<bool> returned{false};
  std::thread setter([&] {
    EXPECT_EQ(cudaDeviceSetLimit(cudaLimitStackSize, 8192), cudaSuccess);
    returned = true;
  });
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(returned.load()) << "the limit changed under a running kernel";
  gate.release();
  setter.join();
  size_t stack = 0;
  ASSERT_EQ(cudaDeviceGetLimit(&stack, cudaLimitStackSize), cudaSuccess);
  EXPECT_EQ(stack, 8192u);
  EXPECT_EQ(cudaDeviceGetLimit(&stack, static_cast<cudaLimit>(0x77)), cudaErrorUnsupportedLimit);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  (void)cudaGetLastError();
}

// A launch needing more stack than the limit waits for the rest of the device first.
TEST_F(EmulatorLaunches, AKernelNeedingMoreStackWaitsForTheRestOfTheDevice) {
  cudaemu::setKernelLocalBytes(reinterpret_cast<const void*>(&setFlag), 4096);
  cudaFuncAttributes attr;
  ASSERT_EQ(cudaFuncGetAttributes(&attr, &setFlag), cudaSuccess);
  EXPECT_EQ(attr.localSizeBytes, 4096u);
  cudaStream_t a, b;
  ASSERT_EQ(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking), cudaSuccess);
  Gate gate;
  std::atomic<int> flag{0};
  const uint64_t waitsBefore = cudaemu::counters().stackGrowthWaits;
  ASSERT_EQ(launchOne(&waitAt, a, &gate), cudaSuccess);
  ASSERT_EQ(launchOne(&setFlag, b, &flag, 1), cudaSuccess);
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(flag.load(), 0) << "it ran beside a running kernel";
  gate.release();
  ASSERT_EQ(cudaStreamSynchronize(b), cudaSuccess);
  EXPECT_EQ(flag.load(), 1);
  EXPECT_EQ(cudaemu::counters().stackGrowthWaits, waitsBefore + 1);
  size_t stack = 0;
  ASSERT_EQ(cudaDeviceGetLimit(&stack, cudaLimitStackSize), cudaSuccess);
  EXPECT_GE(stack, 4096u);
  // Now the limit suffices: the next launch waits for nothing.
  ASSERT_EQ(launchOne(&setFlag, b, &flag, 2), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(b), cudaSuccess);
  EXPECT_EQ(cudaemu::counters().stackGrowthWaits, waitsBefore + 1);
  cudaemu::setKernelLocalBytes(reinterpret_cast<const void*>(&setFlag), 0);
  EXPECT_EQ(cudaStreamDestroy(a), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(b), cudaSuccess);
  // The device keeps its grown limit; put the default back for the tests after this one.
  EXPECT_EQ(cudaDeviceSetLimit(cudaLimitStackSize, 1024), cudaSuccess);
}

TEST_F(EmulatorLaunches, OccupancyReportsTheConfiguredResidency) {
  cudaemu::Config c;
  c.blocksPerSm = 3;
  cudaemu::setConfig(c);
  int blocks = 0;
  ASSERT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, &occupy, 512, 0), cudaSuccess);
  EXPECT_EQ(blocks, 3);
  ASSERT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, &occupy, 4096, 0), cudaSuccess);
  EXPECT_EQ(blocks, 0);
  EXPECT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, &occupy, 0, 0),
            cudaErrorInvalidValue);
  void (*none)(Occupancy*) = nullptr;
  cudaFuncAttributes attr;
  EXPECT_EQ(cudaFuncGetAttributes(&attr, none), cudaErrorInvalidDeviceFunction);
  (void)cudaGetLastError();
}

}  // namespace
}  // namespace emutest
