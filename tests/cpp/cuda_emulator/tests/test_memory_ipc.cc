// Device memory and IPC, from the CUDA Runtime API documentation (cudaMalloc, cudaIpc*,
// cudaHostAlloc, cudaHostGetDevicePointer): a handle exported by one process maps the same
// bytes in another, in both directions; opening a handle in its own process is refused
// ("invalid device context"); opening it twice counts twice; cudaIpcCloseMemHandle unmaps;
// freeing an allocation another process still has open is undefined (fatal here); only
// mapped cudaHostAlloc memory has a device pointer.
#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "test_support.h"

namespace emutest {
namespace {

constexpr size_t kBytes = 3 * 4096 + 100;

class EmulatorMemory : public Emulator {};

cudaIpcMemHandle_t exportOf(void* p) {
  cudaIpcMemHandle_t h;
  if (cudaIpcGetMemHandle(&h, p) != cudaSuccess) std::abort();
  return h;
}

void fill(void* d, unsigned char byte, size_t bytes) {
  std::vector<unsigned char> v(bytes, byte);
  if (cudaMemcpy(d, v.data(), bytes, cudaMemcpyHostToDevice) != cudaSuccess) std::abort();
}

// The first byte that is not `byte`, or -1.
long firstNot(const void* d, unsigned char byte, size_t bytes) {
  std::vector<unsigned char> v(bytes);
  if (cudaMemcpy(v.data(), d, bytes, cudaMemcpyDeviceToHost) != cudaSuccess) return 0;
  for (size_t i = 0; i < bytes; ++i) {
    if (v[i] != byte) return static_cast<long>(i);
  }
  return -1;
}

// A child that allocates, fills the allocation with `byte`, sends its handle through `out`,
// then does `then` (its exit code) before exiting.
pid_t exporter(const Pipe& out, unsigned char byte, const std::function<int(void*)>& then) {
  return forkChild([&out, byte, then] {
    void* d = nullptr;
    if (cudaMalloc(&d, kBytes) != cudaSuccess) return 10;
    fill(d, byte, kBytes);
    cudaIpcMemHandle_t h = exportOf(d);
    out.send(&h, sizeof h);
    return then(d);
  });
}

TEST_F(EmulatorMemory, AChildMapsTheParentsBytesAndWritesThemBack) {
  void* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, kBytes), cudaSuccess);
  fill(d, 0x11, kBytes);
  const cudaIpcMemHandle_t h = exportOf(d);
  const pid_t child = forkChild([h] {
    void* mine = nullptr;
    if (cudaIpcOpenMemHandle(&mine, h, cudaIpcMemLazyEnablePeerAccess) != cudaSuccess) return 1;
    if (firstNot(mine, 0x11, kBytes) != -1) return 2;
    fill(mine, 0x22, kBytes);
    return cudaIpcCloseMemHandle(mine) == cudaSuccess ? 0 : 3;
  });
  ASSERT_EQ(waitChild(child), 0);
  EXPECT_EQ(firstNot(d, 0x22, kBytes), -1);
  EXPECT_EQ(cudaFree(d), cudaSuccess);
}

TEST_F(EmulatorMemory, TheParentMapsAChildsBytesAndTheChildSeesTheWrites) {
  Pipe handles, done;
  const pid_t child = exporter(handles, 0x33, [&done](void* d) {
    char byte;
    if (!done.receive(&byte, 1)) return 4;
    if (firstNot(d, 0x44, kBytes) != -1) return 5;
    return cudaFree(d) == cudaSuccess ? 0 : 6;
  });
  cudaIpcMemHandle_t h;
  ASSERT_TRUE(handles.receive(&h, sizeof h));
  void* theirs = nullptr;
  ASSERT_EQ(cudaIpcOpenMemHandle(&theirs, h, cudaIpcMemLazyEnablePeerAccess), cudaSuccess);
  EXPECT_EQ(firstNot(theirs, 0x33, kBytes), -1);
  fill(theirs, 0x44, kBytes);
  ASSERT_EQ(cudaIpcCloseMemHandle(theirs), cudaSuccess);
  done.send("x", 1);
  EXPECT_EQ(waitChild(child), 0);
}

TEST_F(EmulatorMemory, OpeningAHandleInItsOwnProcessIsRefused) {
  void* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 256), cudaSuccess);
  void* again = nullptr;
  const cudaError_t e = cudaIpcOpenMemHandle(&again, exportOf(d), cudaIpcMemLazyEnablePeerAccess);
  EXPECT_EQ(e, cudaErrorDeviceUninitialized);
  EXPECT_STREQ(cudaGetErrorString(e), "invalid device context");
  EXPECT_EQ(cudaGetLastError(), cudaErrorDeviceUninitialized);
  EXPECT_EQ(cudaFree(d), cudaSuccess);
}

TEST_F(EmulatorMemory, OpensAreCountedAndTheLastCloseUnmaps) {
  Pipe handles, done;
  const pid_t child = exporter(handles, 0x55, [&done](void*) {
    char byte;
    return done.receive(&byte, 1) ? 0 : 7;
  });
  cudaIpcMemHandle_t h;
  ASSERT_TRUE(handles.receive(&h, sizeof h));
  void* a = nullptr;
  void* b = nullptr;
  ASSERT_EQ(cudaIpcOpenMemHandle(&a, h, cudaIpcMemLazyEnablePeerAccess), cudaSuccess);
  ASSERT_EQ(cudaIpcOpenMemHandle(&b, h, cudaIpcMemLazyEnablePeerAccess), cudaSuccess);
  EXPECT_EQ(a, b);
  EXPECT_EQ(cudaemu::counters().liveIpcMappings, 1);
  ASSERT_EQ(cudaIpcCloseMemHandle(a), cudaSuccess);
  EXPECT_EQ(firstNot(b, 0x55, kBytes), -1);  // still mapped: one open left
  ASSERT_EQ(cudaIpcCloseMemHandle(b), cudaSuccess);
  EXPECT_EQ(cudaemu::counters().liveIpcMappings, 0);
  EXPECT_EQ(cudaIpcCloseMemHandle(b), cudaErrorInvalidValue);
  done.send("x", 1);
  EXPECT_EQ(waitChild(child), 0);
  (void)cudaGetLastError();
}

// Opens another process's handle, closes it, then touches it (the death test's statement).
void touchAfterClose() {
  Pipe handles, done;
  exporter(handles, 0x66, [&done](void*) {
    char byte;
    done.receive(&byte, 1);
    return 0;
  });
  cudaIpcMemHandle_t h;
  handles.receive(&h, sizeof h);
  void* p = nullptr;
  if (cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess) != cudaSuccess) _exit(1);
  if (*static_cast<volatile unsigned char*>(p) != 0x66) _exit(2);
  if (cudaIpcCloseMemHandle(p) != cudaSuccess) _exit(3);
  done.send("x", 1);
  (void)*static_cast<volatile unsigned char*>(p);  // faults: the mapping is gone
  _exit(0);
}

TEST_F(EmulatorMemory, AClosedHandleIsUnmapped) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(touchAfterClose(), ::testing::KilledBySignal(SIGSEGV), "");
}

// An opener that holds the handle open until its pipe closes (its parent ended).
pid_t holdingOpener(const cudaIpcMemHandle_t& h, const Pipe& opened, const Pipe& hold,
                    bool closeFirst) {
  return forkChild([&] {
    close(hold.writeEnd);  // so that the read below ends when the parent's end closes
    void* p = nullptr;
    if (cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess) != cudaSuccess) return 1;
    if (closeFirst && cudaIpcCloseMemHandle(p) != cudaSuccess) return 2;
    opened.send("o", 1);
    char byte;
    while (hold.receive(&byte, 1)) {
    }
    return 0;
  });
}

// Frees an allocation a child process holds open (the death test's statement).
void freeWhileOpenElsewhere() {
  void* d = nullptr;
  if (cudaMalloc(&d, kBytes) != cudaSuccess) _exit(1);
  Pipe opened, hold;
  holdingOpener(exportOf(d), opened, hold, /*closeFirst=*/false);
  char byte;
  opened.receive(&byte, 1);
  (void)cudaFree(d);
  _exit(0);
}

TEST_F(EmulatorMemory, FreeingWhileAnotherProcessHasItOpenIsFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(freeWhileOpenElsewhere(), "still has it open through cudaIpcOpenMemHandle");
}

TEST_F(EmulatorMemory, FreeingAfterTheOpenerClosedOrDiedIsFine) {
  for (bool killIt : {false, true}) {
    SCOPED_TRACE(killIt ? "opener killed" : "opener closed");
    void* d = nullptr;
    ASSERT_EQ(cudaMalloc(&d, kBytes), cudaSuccess);
    Pipe opened, hold;
    const pid_t child = holdingOpener(exportOf(d), opened, hold, /*closeFirst=*/!killIt);
    char byte;
    ASSERT_TRUE(opened.receive(&byte, 1));
    if (killIt) kill(child, SIGKILL);
    hold.closeWrite();
    const int code = waitChild(child);
    EXPECT_EQ(code, killIt ? 128 + SIGKILL : 0);
    EXPECT_EQ(cudaFree(d), cudaSuccess);
  }
}

TEST_F(EmulatorMemory, AHandleOfAFreedAllocationNoLongerOpens) {
  Pipe handles, freed, tried;
  const pid_t child = exporter(handles, 0x77, [&freed, &tried](void* d) {
    if (cudaFree(d) != cudaSuccess) return 8;
    freed.send("f", 1);
    char byte;
    tried.receive(&byte, 1);  // stays alive until the parent has tried
    return 0;
  });
  cudaIpcMemHandle_t h;
  ASSERT_TRUE(handles.receive(&h, sizeof h));
  char byte;
  ASSERT_TRUE(freed.receive(&byte, 1));
  void* p = nullptr;
  EXPECT_EQ(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess),
            cudaErrorMapBufferObjectFailed);
  tried.send("x", 1);
  EXPECT_EQ(waitChild(child), 0);
  // ... nor once the exporter has exited.
  EXPECT_EQ(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess),
            cudaErrorMapBufferObjectFailed);
  (void)cudaGetLastError();
}

TEST_F(EmulatorMemory, IpcMisuseReturnsTheDocumentedCodes) {
  void* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 512), cudaSuccess);
  void* p = nullptr;
  EXPECT_EQ(cudaIpcOpenMemHandle(&p, exportOf(d), 0), cudaErrorInvalidValue);  // flags
  cudaIpcMemHandle_t garbage;
  std::memset(&garbage, 0x3c, sizeof garbage);
  EXPECT_EQ(cudaIpcOpenMemHandle(&p, garbage, cudaIpcMemLazyEnablePeerAccess),
            cudaErrorInvalidValue);
  std::vector<char> host(64);
  cudaIpcMemHandle_t h;
  EXPECT_EQ(cudaIpcGetMemHandle(&h, host.data()), cudaErrorInvalidValue);
  EXPECT_EQ(cudaIpcCloseMemHandle(d), cudaErrorInvalidValue);  // not an opened handle
  EXPECT_EQ(cudaFree(d), cudaSuccess);
  EXPECT_EQ(cudaFree(d), cudaErrorInvalidValue);  // twice
  EXPECT_EQ(cudaFree(host.data()), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(nullptr), cudaSuccess);
  (void)cudaGetLastError();
}

TEST_F(EmulatorMemory, DeviceMemoryIsNotClearedAndCopiesNeedDeviceMemory) {
  void* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 4096), cudaSuccess);
  EXPECT_NE(firstNot(d, 0, 4096), -1) << "cudaMalloc memory is not cleared";
  ASSERT_EQ(cudaMemsetAsync(d, 0, 4096, nullptr), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
  EXPECT_EQ(firstNot(d, 0, 4096), -1);
  std::vector<char> a(64), b(64);
  EXPECT_EQ(cudaMemcpyAsync(a.data(), b.data(), 64, cudaMemcpyHostToDevice, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpyAsync(a.data(), d, 64, static_cast<cudaMemcpyKind>(9), nullptr),
            cudaErrorInvalidMemcpyDirection);
  EXPECT_EQ(cudaMemsetAsync(a.data(), 0, 64, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpyAsync(d, a.data(), 8192, cudaMemcpyHostToDevice, nullptr),
            cudaErrorInvalidValue);  // runs past the allocation
  EXPECT_EQ(cudaFree(d), cudaSuccess);
  (void)cudaGetLastError();
}

TEST_F(EmulatorMemory, OnlyMappedHostMemoryHasADevicePointer) {
  void* mapped = nullptr;
  void* plain = nullptr;
  ASSERT_EQ(cudaHostAlloc(&mapped, 4096, cudaHostAllocMapped | cudaHostAllocPortable),
            cudaSuccess);
  ASSERT_EQ(cudaHostAlloc(&plain, 4096, cudaHostAllocDefault), cudaSuccess);
  EXPECT_EQ(cudaemu::counters().liveHostAllocations, 2);
  void* dev = nullptr;
  ASSERT_EQ(cudaHostGetDevicePointer(&dev, mapped, 0), cudaSuccess);
  EXPECT_EQ(dev, mapped);
  EXPECT_EQ(cudaHostGetDevicePointer(&dev, static_cast<char*>(mapped) + 100, 0), cudaSuccess);
  EXPECT_EQ(dev, static_cast<char*>(mapped) + 100);
  EXPECT_EQ(cudaHostGetDevicePointer(&dev, mapped, 1), cudaErrorInvalidValue);
  EXPECT_EQ(cudaHostGetDevicePointer(&dev, plain, 0), cudaErrorInvalidValue);
  std::vector<char> heap(64);
  EXPECT_EQ(cudaHostGetDevicePointer(&dev, heap.data(), 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaHostAlloc(&dev, 64, 0x80), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFreeHost(heap.data()), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFreeHost(mapped), cudaSuccess);
  EXPECT_EQ(cudaFreeHost(plain), cudaSuccess);
  EXPECT_EQ(cudaemu::counters().liveHostAllocations, 0);
  (void)cudaGetLastError();
}

}  // namespace
}  // namespace emutest
