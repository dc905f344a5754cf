// What the runtime says of memory, and the copies beyond the basic ones, from the CUDA Runtime
// API (cudaPointerGetAttributes, cudaHostRegister, cudaMemGetInfo, cudaMemcpy2DAsync,
// cudaMemset, cudaEventElapsedTime):
//   - device memory is cudaMemoryTypeDevice on its device; page-locked host memory
//     (cudaHostAlloc, cudaHostRegister) is cudaMemoryTypeHost and, with unified addressing,
//     reachable by the device at the host's address; other host memory is
//     cudaMemoryTypeUnregistered and the call still succeeds (since CUDA 11);
//   - a registered range can be copied to and from as device-reachable memory; overlapping
//     registrations are refused; unregistering takes the base address;
//   - free memory falls by what is allocated;
//   - a 2D copy moves `height` rows of `width` bytes between pitched buffers;
//   - elapsed time between two timing events is their order on the device; events without
//     timing, or never recorded, have none; an unfinished one is not ready.
#include <cstring>
#include <vector>

#include "test_support.h"

namespace emutest {
namespace {

using namespace std::chrono_literals;

class EmulatorMemoryQueries : public Emulator {};

TEST_F(EmulatorMemoryQueries, PointerAttributesTellDeviceFromHostMemory) {
  void* device = nullptr;
  void* pinned = nullptr;
  ASSERT_EQ(cudaMalloc(&device, 256), cudaSuccess);
  ASSERT_EQ(cudaHostAlloc(&pinned, 256, cudaHostAllocDefault), cudaSuccess);
  std::vector<char> plain(256);
  cudaPointerAttributes a;
  ASSERT_EQ(cudaPointerGetAttributes(&a, static_cast<char*>(device) + 100), cudaSuccess);
  EXPECT_EQ(a.type, cudaMemoryTypeDevice);
  EXPECT_EQ(a.device, 0);
  EXPECT_EQ(a.devicePointer, static_cast<char*>(device) + 100);
  EXPECT_EQ(a.hostPointer, nullptr);
  ASSERT_EQ(cudaPointerGetAttributes(&a, pinned), cudaSuccess);
  EXPECT_EQ(a.type, cudaMemoryTypeHost);
  EXPECT_EQ(a.hostPointer, pinned);
  EXPECT_EQ(a.devicePointer, pinned);
  ASSERT_EQ(cudaPointerGetAttributes(&a, plain.data()), cudaSuccess);
  EXPECT_EQ(a.type, cudaMemoryTypeUnregistered);
  EXPECT_EQ(cudaPointerGetAttributes(nullptr, plain.data()), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(device), cudaSuccess);
  EXPECT_EQ(cudaFreeHost(pinned), cudaSuccess);
  (void)cudaGetLastError();
}

TEST_F(EmulatorMemoryQueries, RegisteredHostMemoryIsReachableUntilUnregistered) {
  std::vector<int> host(64, 0);
  void* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, 64 * sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaMemset(device, 1, 64 * sizeof(int)), cudaSuccess);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  // Unregistered memory is not device memory: a device-to-device copy into it is refused.
  EXPECT_EQ(cudaMemcpyAsync(host.data(), device, 64, cudaMemcpyDeviceToDevice, s),
            cudaErrorInvalidValue);
  ASSERT_EQ(cudaHostRegister(host.data(), 64 * sizeof(int), cudaHostRegisterDefault),
            cudaSuccess);
  EXPECT_EQ(cudaHostRegister(host.data() + 8, 16, cudaHostRegisterDefault),
            cudaErrorInvalidValue);  // overlaps the registered range
  cudaPointerAttributes a;
  ASSERT_EQ(cudaPointerGetAttributes(&a, host.data() + 3), cudaSuccess);
  EXPECT_EQ(a.type, cudaMemoryTypeHost);
  ASSERT_EQ(cudaMemcpyAsync(host.data(), device, 64 * sizeof(int), cudaMemcpyDeviceToDevice, s),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(host[63], 0x01010101);
  EXPECT_EQ(cudaHostUnregister(host.data() + 1), cudaErrorInvalidValue);  // not the base
  EXPECT_EQ(cudaHostUnregister(host.data()), cudaSuccess);
  ASSERT_EQ(cudaPointerGetAttributes(&a, host.data()), cudaSuccess);
  EXPECT_EQ(a.type, cudaMemoryTypeUnregistered);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  EXPECT_EQ(cudaFree(device), cudaSuccess);
  (void)cudaGetLastError();
}

TEST_F(EmulatorMemoryQueries, FreeMemoryFallsByWhatIsAllocated) {
  size_t free0 = 0, total = 0, free1 = 0;
  ASSERT_EQ(cudaMemGetInfo(&free0, &total), cudaSuccess);
  EXPECT_LE(free0, total);
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 1 << 20), cudaSuccess);
  ASSERT_EQ(cudaMemGetInfo(&free1, &total), cudaSuccess);
  EXPECT_EQ(free0 - free1, size_t{1} << 20);
  EXPECT_EQ(cudaFree(p), cudaSuccess);
}

TEST_F(EmulatorMemoryQueries, A2DCopyMovesRowsBetweenPitches) {
  // Four rows of 3 bytes from a pitch of 5 to a pitch of 4.
  std::vector<unsigned char> src(20), dst(16, 0xee);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i);
  void* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, 16), cudaSuccess);
  ASSERT_EQ(cudaMemcpy2DAsync(device, 4, src.data(), 5, 3, 4, cudaMemcpyHostToDevice, nullptr),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dst.data(), device, 16, cudaMemcpyDeviceToHost), cudaSuccess);
  for (size_t row = 0; row < 4; ++row) {
    for (size_t col = 0; col < 3; ++col) EXPECT_EQ(dst[row * 4 + col], src[row * 5 + col]);
  }
  EXPECT_EQ(cudaMemcpy2DAsync(device, 2, src.data(), 5, 3, 4, cudaMemcpyHostToDevice, nullptr),
            cudaErrorInvalidValue);  // a row wider than the destination's pitch
  EXPECT_EQ(cudaFree(device), cudaSuccess);
  (void)cudaGetLastError();
}

TEST_F(EmulatorMemoryQueries, ElapsedTimeIsTheOrderOfTwoTimingEventsOnTheDevice) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  cudaEvent_t start, end, untimed;
  ASSERT_EQ(cudaEventCreate(&start), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&end), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming), cudaSuccess);
  float ms = -1;
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, end), cudaErrorInvalidResourceHandle);  // unrecorded
  Gate gate;
  ASSERT_EQ(cudaEventRecord(start, s), cudaSuccess);
  ASSERT_EQ(launchOne(&waitAt, s, &gate), cudaSuccess);
  ASSERT_EQ(cudaEventRecordWithFlags(end, s, cudaEventRecordDefault), cudaSuccess);
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, end), cudaErrorNotReady);
  std::this_thread::sleep_for(30ms);
  gate.release();
  ASSERT_EQ(cudaEventSynchronize(end), cudaSuccess);
  ASSERT_EQ(cudaEventElapsedTime(&ms, start, end), cudaSuccess);
  EXPECT_GE(ms, 30.0f);
  ASSERT_EQ(cudaEventRecord(untimed, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, untimed), cudaErrorInvalidResourceHandle);
  for (cudaEvent_t e : {start, end, untimed}) EXPECT_EQ(cudaEventDestroy(e), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  (void)cudaGetLastError();
}

}  // namespace
}  // namespace emutest
