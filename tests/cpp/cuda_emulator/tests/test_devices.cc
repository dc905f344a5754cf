// Devices, peer access, error words and the test controls: the current device is per host
// thread (cudaSetDevice); a bad ordinal is cudaErrorInvalidDevice; no devices at all is
// cudaErrorNoDevice; a device is not its own peer, enabling peer access to itself is refused,
// enabling it twice is cudaErrorPeerAccessAlreadyEnabled (Peer Device Memory Access); every
// code has its name and text; the environment configures a process the tests start.
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "test_support.h"

namespace emutest {
namespace {

class EmulatorDevices : public Emulator {};

TEST_F(EmulatorDevices, TheCurrentDeviceIsPerHostThread) {
  cudaemu::Config c;
  c.devices = 3;
  cudaemu::setConfig(c);
  int n = 0;
  ASSERT_EQ(cudaGetDeviceCount(&n), cudaSuccess);
  EXPECT_EQ(n, 3);
  ASSERT_EQ(cudaSetDevice(2), cudaSuccess);
  int mine = -1, theirs = -1;
  std::thread([&] { (void)cudaGetDevice(&theirs); }).join();
  ASSERT_EQ(cudaGetDevice(&mine), cudaSuccess);
  EXPECT_EQ(mine, 2);
  EXPECT_EQ(theirs, 0);
  EXPECT_EQ(cudaSetDevice(3), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaSetDevice(-1), cudaErrorInvalidDevice);
  EXPECT_STREQ(cudaGetErrorString(cudaErrorInvalidDevice), "invalid device ordinal");
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  (void)cudaGetLastError();
}

// A primary context is made on the calling thread's current device by the first call that
// needs one (a thread that never set its device makes it on device 0), and by cudaSetDevice on
// its device (CUDA 12.0 and later); device and error queries make none. In a child: a fresh
// runtime, with no context yet.
TEST_F(EmulatorDevices, ContextsAreMadeOnTheCurrentDeviceAtFirstUse) {
  const pid_t child = forkChild([] {
    cudaemu::Config c;
    c.devices = 3;
    cudaemu::setConfig(c);
    int n = 0, d = -1;
    cudaDeviceProp prop;
    if (cudaGetDeviceCount(&n) != cudaSuccess || cudaGetDevice(&d) != cudaSuccess ||
        cudaGetDeviceProperties(&prop, 1) != cudaSuccess) {
      return 10;
    }
    (void)cudaGetLastError();
    if (cudaemu::hasContext(0) || cudaemu::hasContext(1)) return 11;  // queries make none
    if (cudaSetDevice(2) != cudaSuccess || !cudaemu::hasContext(2)) return 12;
    cudaEvent_t e = nullptr;
    if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess) return 13;
    if (cudaemu::hasContext(0)) return 14;  // made on device 2, the current one
    // Another thread starts on device 0: its first event query makes device 0's context.
    std::thread([&] { (void)cudaEventQuery(e); }).join();
    if (!cudaemu::hasContext(0) || cudaemu::hasContext(1)) return 15;
    (void)cudaEventDestroy(e);
    return 0;
  });
  EXPECT_EQ(waitChild(child), 0);
}

TEST_F(EmulatorDevices, PropertiesAndAttributesDescribeTheConfiguredDevice) {
  cudaemu::Config c;
  c.devices = 2;
  c.smsPerDevice = 7;
  c.blocksPerSm = 3;
  cudaemu::setConfig(c);
  cudaDeviceProp a, b;
  ASSERT_EQ(cudaGetDeviceProperties(&a, 0), cudaSuccess);
  ASSERT_EQ(cudaGetDeviceProperties(&b, 1), cudaSuccess);
  EXPECT_EQ(a.multiProcessorCount, 7);
  EXPECT_NE(std::memcmp(a.uuid.bytes, b.uuid.bytes, 16), 0) << "two devices, one UUID";
  EXPECT_NE(std::string(a.name).find("Emulated"), std::string::npos);
  int v = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, 1), cudaSuccess);
  EXPECT_EQ(v, 7);
  ASSERT_EQ(cudaDeviceGetAttribute(&v, cudaDevAttrMaxBlocksPerMultiprocessor, 1), cudaSuccess);
  EXPECT_EQ(v, 3);
  EXPECT_EQ(cudaDeviceGetAttribute(&v, static_cast<cudaDeviceAttr>(12345), 0),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaDeviceGetAttribute(&v, cudaDevAttrWarpSize, 2), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaGetDeviceProperties(&a, 2), cudaErrorInvalidDevice);
  // The same UUID in another process: the ranks find one GPU by it.
  const pid_t child = forkChild([&a] {
    cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) return 1;
    return std::memcmp(p.uuid.bytes, a.uuid.bytes, 16) == 0 ? 0 : 2;
  });
  EXPECT_EQ(waitChild(child), 0);
  (void)cudaGetLastError();
}

TEST_F(EmulatorDevices, NoDevicesAtAll) {
  cudaemu::Config c;
  c.devices = 0;
  cudaemu::setConfig(c);
  int n = -1;
  EXPECT_EQ(cudaGetDeviceCount(&n), cudaErrorNoDevice);
  EXPECT_EQ(n, 0);
  void* p = nullptr;
  cudaStream_t s;
  EXPECT_EQ(cudaStreamCreate(&s), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaMalloc(&p, 0), cudaSuccess);
  (void)cudaGetLastError();
}

TEST_F(EmulatorDevices, PeerAccessFollowsTheDocumentedRules) {
  cudaemu::Config c;
  c.devices = 2;
  cudaemu::setConfig(c);
  int can = -1;
  ASSERT_EQ(cudaDeviceCanAccessPeer(&can, 0, 1), cudaSuccess);
  EXPECT_EQ(can, 1);
  ASSERT_EQ(cudaDeviceCanAccessPeer(&can, 0, 0), cudaSuccess);
  EXPECT_EQ(can, 0) << "a device is not its own peer";
  EXPECT_EQ(cudaDeviceCanAccessPeer(&can, 0, 5), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaDeviceEnablePeerAccess(0, 0), cudaErrorInvalidDevice);  // itself
  EXPECT_EQ(cudaDeviceEnablePeerAccess(1, 1), cudaErrorInvalidValue);   // flags
  EXPECT_EQ(cudaDeviceEnablePeerAccess(1, 0), cudaSuccess);
  EXPECT_EQ(cudaDeviceEnablePeerAccess(1, 0), cudaErrorPeerAccessAlreadyEnabled);
  EXPECT_EQ(cudaDeviceEnablePeerAccess(9, 0), cudaErrorInvalidDevice);
  c.peerAccess = false;
  cudaemu::setConfig(c);
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  ASSERT_EQ(cudaDeviceCanAccessPeer(&can, 1, 0), cudaSuccess);
  EXPECT_EQ(can, 0);
  EXPECT_EQ(cudaDeviceEnablePeerAccess(0, 0), cudaErrorPeerAccessUnsupported);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  (void)cudaGetLastError();
}

TEST_F(EmulatorDevices, EveryCodeHasItsNameAndText) {
  const std::pair<cudaError_t, const char*> expected[] = {
      {cudaSuccess, "cudaSuccess"},
      {cudaErrorInvalidValue, "cudaErrorInvalidValue"},
      {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation"},
      {cudaErrorInvalidDevice, "cudaErrorInvalidDevice"},
      {cudaErrorDeviceUninitialized, "cudaErrorDeviceUninitialized"},
      {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle"},
      {cudaErrorNotReady, "cudaErrorNotReady"},
      {cudaErrorPeerAccessAlreadyEnabled, "cudaErrorPeerAccessAlreadyEnabled"},
      {cudaErrorNotSupported, "cudaErrorNotSupported"},
      {cudaErrorStreamCaptureUnsupported, "cudaErrorStreamCaptureUnsupported"},
  };
  for (const auto& [code, name] : expected) {
    EXPECT_STREQ(cudaGetErrorName(code), name);
    EXPECT_STRNE(cudaGetErrorString(code), "unrecognized error code") << name;
  }
  EXPECT_STREQ(cudaGetErrorString(cudaSuccess), "no error");
  EXPECT_STREQ(cudaGetErrorString(cudaErrorInvalidValue), "invalid argument");
  EXPECT_STREQ(cudaGetErrorString(cudaErrorNotReady), "device not ready");
  EXPECT_STREQ(cudaGetErrorString(static_cast<cudaError_t>(4242)), "unrecognized error code");
  EXPECT_EQ(static_cast<int>(cudaErrorDeviceUninitialized), 201);
  EXPECT_EQ(static_cast<int>(cudaErrorInvalidResourceHandle), 400);
  EXPECT_EQ(static_cast<int>(cudaErrorPeerAccessAlreadyEnabled), 704);
}

TEST_F(EmulatorDevices, InjectedFailuresAndCounters) {
  cudaemu::failCall("cudaMalloc", cudaErrorMemoryAllocation);
  void* p = nullptr;
  const uint64_t before = cudaemu::calls("cudaMalloc");
  EXPECT_EQ(cudaMalloc(&p, 64), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaemu::calls("cudaMalloc"), before + 1);
  EXPECT_EQ(cudaemu::counters().liveDeviceAllocations, 0);
  // A forked child inherits the configuration and the failures, not the objects.
  const pid_t child = forkChild([] {
    void* q = nullptr;
    return cudaMalloc(&q, 64) == cudaErrorMemoryAllocation ? 0 : 1;
  });
  EXPECT_EQ(waitChild(child), 0);
  cudaemu::delayCall("cudaGetDeviceCount", std::chrono::milliseconds(50));
  const auto start = std::chrono::steady_clock::now();
  int n = 0;
  EXPECT_EQ(cudaGetDeviceCount(&n), cudaSuccess);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(50));
  cudaemu::clearFailures();
  ASSERT_EQ(cudaMalloc(&p, 64), cudaSuccess);
  EXPECT_EQ(cudaemu::counters().liveDeviceAllocations, 1);
  EXPECT_EQ(cudaFree(p), cudaSuccess);
  (void)cudaGetLastError();
}

// Run by TheEnvironmentConfiguresAStartedProcess in a process of its own.
TEST(EmulatorEnvironment, ReadsTheConfiguration) {
  if (std::getenv("CUDA_EMULATOR_ENV_CHECK") == nullptr) GTEST_SKIP() << "run by another test";
  int n = 0;
  ASSERT_EQ(cudaGetDeviceCount(&n), cudaSuccess);
  EXPECT_EQ(n, 2);
  int sms = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 1), cudaSuccess);
  EXPECT_EQ(sms, 5);
  size_t stack = 0;
  ASSERT_EQ(cudaDeviceGetLimit(&stack, cudaLimitStackSize), cudaSuccess);
  EXPECT_EQ(stack, 2048u);
  cudaIpcMemHandle_t h;
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 64), cudaSuccess);
  EXPECT_EQ(cudaIpcGetMemHandle(&h, p), cudaErrorNotSupported);
  EXPECT_EQ(cudaemu::config().hostToDeviceCopyDelay, std::chrono::milliseconds(7));
}

TEST_F(EmulatorDevices, TheEnvironmentConfiguresAStartedProcess) {
  const pid_t child = forkChild([] {
    setenv("CUDA_EMULATOR_ENV_CHECK", "1", 1);
    setenv("CUDA_EMULATOR_DEVICES", "2", 1);
    setenv("CUDA_EMULATOR_SMS", "5", 1);
    setenv("CUDA_EMULATOR_STACK_BYTES", "2048", 1);
    setenv("CUDA_EMULATOR_FAIL", "cudaIpcGetMemHandle:801", 1);
    setenv("CUDA_EMULATOR_H2D_COPY_DELAY_MS", "7", 1);
    execl("/proc/self/exe", "ring_cuda_emulator_tests",
          "--gtest_filter=EmulatorEnvironment.ReadsTheConfiguration", static_cast<char*>(nullptr));
    return 127;
  });
  EXPECT_EQ(waitChild(child), 0);
}

// CUDA_VISIBLE_DEVICES (CUDA Programming Guide, "CUDA Environment Variables"): the listed
// devices, in the list's order, renumbered from 0; an invalid index hides itself and all after.
TEST_F(EmulatorDevices, VisibleDevicesRenumberTheMachinesDevices) {
  auto uuidsSeen = [](const std::string& visible) {
    cudaemu::Config c;
    c.devices = 3;
    c.visibleDevices = visible;
    cudaemu::setConfig(c);
    std::vector<std::string> uuids;
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
    for (int d = 0; d < count; ++d) {
      cudaDeviceProp p;
      EXPECT_EQ(cudaGetDeviceProperties(&p, d), cudaSuccess);
      uuids.emplace_back(p.uuid.bytes, sizeof p.uuid.bytes);
    }
    (void)cudaGetLastError();
    return uuids;
  };
  const std::vector<std::string> all = uuidsSeen("");
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(uuidsSeen("2,0"), (std::vector<std::string>{all[2], all[0]}));
  EXPECT_EQ(uuidsSeen("1,7,0"), (std::vector<std::string>{all[1]}));
  EXPECT_EQ(uuidsSeen("x"), std::vector<std::string>{});
  cudaemu::setConfig(cudaemu::Config{});
  (void)cudaSetDevice(0);
}

// Memory exported on one of the machine's devices opens in a process that cannot see that
// device, with peer access as cudaDeviceEnablePeerAccess would enable it, and not without it.
TEST_F(EmulatorDevices, AnIpcHandleOpensWhereItsDeviceIsNotVisible) {
  for (bool peerAccess : {true, false}) {
    cudaemu::Config c;
    c.devices = 2;
    c.peerAccess = peerAccess;
    cudaemu::setConfig(c);
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    void* d = nullptr;
    ASSERT_EQ(cudaMalloc(&d, 4096), cudaSuccess);
    cudaIpcMemHandle_t h;
    ASSERT_EQ(cudaIpcGetMemHandle(&h, d), cudaSuccess);
    const pid_t child = forkChild([h, peerAccess] {
      cudaemu::Config only1;
      only1.devices = 2;
      only1.peerAccess = peerAccess;
      only1.visibleDevices = "1";  // as a rank given one GPU (the SLURM way) would see it
      cudaemu::setConfig(only1);
      void* mine = nullptr;
      const cudaError_t e = cudaIpcOpenMemHandle(&mine, h, cudaIpcMemLazyEnablePeerAccess);
      if (peerAccess) return e == cudaSuccess && cudaIpcCloseMemHandle(mine) == cudaSuccess ? 0 : 1;
      return e == cudaErrorPeerAccessUnsupported ? 0 : 2;
    });
    EXPECT_EQ(waitChild(child), 0) << "peer access " << peerAccess;
    EXPECT_EQ(cudaFree(d), cudaSuccess);
  }
  cudaemu::setConfig(cudaemu::Config{});
}

}  // namespace
}  // namespace emutest
