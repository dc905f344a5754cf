// The process-wide cache of opened CUDA IPC handles (transport/cuda_ipc/ipc_handles.h), over the
// emulated runtime: two users of one peer allocation (the next and previous links of a 2-rank
// ring, or two groups) share one mapping, and it stays mapped until the last of them closes it.
// The CUDA Runtime API documents cudaIpcCloseMemHandle as unmapping the memory: a first user's
// close that reached the driver would pull the mapping from under the second user, which then
// reads unmapped memory (a fault on a GPU at some later call). "Processes" in the suite's name:
// scripts/tsan.sh leaves out the tests that fork (TSan does not follow a forked child).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "cuda_emulator.h"
#include "transport/cuda_ipc/ipc_handles.h"

namespace ring {
namespace {

constexpr size_t kBytes = 8192 + 64;

// The first byte of `bytes` at device pointer `d` that is not `byte`; -2 if the copy failed.
long firstNot(const void* d, unsigned char byte) {
  std::vector<unsigned char> v(kBytes);
  if (cudaMemcpy(v.data(), d, kBytes, cudaMemcpyDeviceToHost) != cudaSuccess) {
    (void)cudaGetLastError();
    return -2;
  }
  for (size_t i = 0; i < kBytes; ++i) {
    if (v[i] != byte) return static_cast<long>(i);
  }
  return -1;
}

TEST(IpcHandlesAcrossProcesses, TwoUsersShareOneMappingUntilTheLastCloses) {
  int handles[2], done[2];
  ASSERT_EQ(pipe(handles), 0);
  ASSERT_EQ(pipe(done), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The peer process: exports a filled allocation, keeps it until told, then frees it.
    void* d = nullptr;
    if (cudaMalloc(&d, kBytes) != cudaSuccess) _exit(10);
    std::vector<unsigned char> v(kBytes, 0x5a);
    if (cudaMemcpy(d, v.data(), kBytes, cudaMemcpyHostToDevice) != cudaSuccess) _exit(11);
    cudaIpcMemHandle_t h;
    if (cudaIpcGetMemHandle(&h, d) != cudaSuccess) _exit(12);
    if (write(handles[1], &h, sizeof h) != static_cast<ssize_t>(sizeof h)) _exit(13);
    char byte;
    if (read(done[0], &byte, 1) != 1) _exit(14);
    _exit(cudaFree(d) == cudaSuccess ? 0 : 15);
  }
  cudaIpcMemHandle_t h;
  ASSERT_EQ(read(handles[0], &h, sizeof h), static_cast<ssize_t>(sizeof h));
  const auto* raw = reinterpret_cast<const uint8_t*>(&h);
  std::string error;
  void* first = openIpcHandle(raw, &error);
  ASSERT_NE(first, nullptr) << error;
  void* second = openIpcHandle(raw, &error);
  ASSERT_NE(second, nullptr) << error;
  EXPECT_EQ(first, second);
  EXPECT_EQ(cudaemu::counters().liveIpcMappings, 1);
  closeIpcHandle(first);
  // The second user still reads the peer's bytes.
  EXPECT_EQ(cudaemu::counters().liveIpcMappings, 1);
  EXPECT_EQ(firstNot(second, 0x5a), -1);
  closeIpcHandle(second);
  EXPECT_EQ(cudaemu::counters().liveIpcMappings, 0);
  // Opened anew after the last close: a fresh mapping of the same bytes.
  void* again = openIpcHandle(raw, &error);
  ASSERT_NE(again, nullptr) << error;
  EXPECT_EQ(firstNot(again, 0x5a), -1);
  closeIpcHandle(again);
  EXPECT_EQ(cudaemu::counters().liveIpcMappings, 0);
  ASSERT_EQ(write(done[1], "x", 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

}  // namespace
}  // namespace ring
