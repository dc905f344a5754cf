#include "test_support.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

namespace emutest {

thread_local uint3 blockIdx;
thread_local unsigned threadIdx;

void waitAt(Gate* gate) {
  if (threadIdx != 0) return;
  while (gate->open.load() == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
}

void appendValue(int* log, std::atomic<int>* count, int value) {
  if (threadIdx == 0) log[count->fetch_add(1)] = value;
}

void setFlag(std::atomic<int>* flag, int value) {
  if (threadIdx == 0) flag->store(value);
}

pid_t forkChild(const std::function<int()>& body) {
  const pid_t pid = fork();
  if (pid == 0) _exit(body());  // never back into the test framework
  return pid;
}

int waitChild(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
}

Pipe::Pipe() {
  int fds[2];
  if (pipe(fds) != 0) std::abort();
  readEnd = fds[0];
  writeEnd = fds[1];
}

Pipe::~Pipe() {
  if (readEnd >= 0) close(readEnd);
  closeWrite();
}

void Pipe::closeWrite() {
  if (writeEnd >= 0) close(writeEnd);
  writeEnd = -1;
}

void Pipe::send(const void* data, size_t bytes) const {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = write(writeEnd, p, bytes);
    if (n <= 0) std::abort();
    p += n;
    bytes -= static_cast<size_t>(n);
  }
}

bool Pipe::receive(void* data, size_t bytes) const {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t n = read(readEnd, p, bytes);
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

void Emulator::SetUp() {
  cudaemu::clearFailures();
  // Every test starts in CUDA's default capture interaction mode.
  cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
  (void)cudaThreadExchangeStreamCaptureMode(&mode);
  cudaemu::setConfig(cudaemu::Config{});
  (void)cudaSetDevice(0);
  (void)cudaDeviceSetLimit(cudaLimitStackSize, cudaemu::Config{}.initialStackBytes);
  (void)cudaGetLastError();
}

void Emulator::TearDown() {
  cudaemu::clearFailures();
  (void)cudaGetLastError();
}

}  // namespace emutest

// The device side of every launch in these tests: the block's threads, each with its indices.
void cudaemu::runBlockThreads(const BlockLaunch& b) {
  const unsigned n = std::min(b.block.x * b.block.y * b.block.z, emutest::kThreadsPerBlock);
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < n; ++t) {
    threads.emplace_back([&b, t] {
      emutest::blockIdx = b.blockIdx;
      emutest::threadIdx = t;
      b.threadMain(b.launch);
    });
  }
  for (std::thread& t : threads) t.join();
}
