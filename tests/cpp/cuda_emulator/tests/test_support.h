// What the emulator's own tests share: a block runner (each block's threads run the kernel
// with the test's own index variables), gates that hold a kernel until the test opens them,
// a fixture that starts every test from the default configuration, and a few small kernels.
#pragma once

#include <cuda_emulator.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

namespace emutest {

// The CUDA indices of the calling host thread while it runs a kernel (set by the runner).
extern thread_local uint3 blockIdx;
extern thread_local unsigned threadIdx;

// Host threads per block the runner starts (a kernel asks for up to 1024).
constexpr unsigned kThreadsPerBlock = 2;

// A gate a kernel waits at until the test opens it.
struct Gate {
  std::atomic<int> open{0};
  void release() { open.store(1); }
};
void waitAt(Gate* gate);  // a kernel: thread 0 of each block waits at the gate

// Kernels.
void appendValue(int* log, std::atomic<int>* count, int value);  // one thread appends
void setFlag(std::atomic<int>* flag, int value);

// Polls `done` for up to `limit`; true once it holds.
template <typename F>
bool eventually(F done, std::chrono::milliseconds limit = std::chrono::milliseconds(5000)) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// Launches `kernel` as one block of one thread on `stream`, its arguments as given.
template <typename... P, typename... A>
cudaError_t launchOne(void (*kernel)(P...), cudaStream_t stream, A... args) {
  void* argv[] = {static_cast<void*>(&args)..., nullptr};
  return cudaLaunchKernel(kernel, dim3(1), dim3(1), argv, 0, stream);
}

// A child process running `body` (its exit code). The child gets a fresh emulated runtime.
pid_t forkChild(const std::function<int()>& body);
// Waits for the child: its exit code, or 128 + the signal that ended it.
int waitChild(pid_t pid);

// One pipe; the owner's ends close with it (a forked child leaves by _exit, closing none).
struct Pipe {
  Pipe();
  ~Pipe();
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  void closeWrite();
  int readEnd = -1, writeEnd = -1;
  void send(const void* data, size_t bytes) const;
  // False at end of file (the writer is gone).
  bool receive(void* data, size_t bytes) const;
};

class Emulator : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;
};

}  // namespace emutest
