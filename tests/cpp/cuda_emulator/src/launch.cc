// Kernel launches: checked and enqueued by the caller, run later on the stream's own thread.
//
// Why a residency gate: on a GPU a block starts only when a multiprocessor has room for it,
// and blocks that do not fit wait until earlier blocks finish. Kernels whose blocks wait for
// one another (the ring kernels do) therefore hang when they do not all fit at once. The
// emulated device holds multiprocessors x blocks-per-multiprocessor blocks of any launch at a
// time, so a missing co-residency check hangs here exactly as it would there.
#include <cuda_runtime.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "cuda_emulator_launch.h"
#include "runtime.h"
#include "submit.h"

using cudaemu::detail::DeviceState;
using cudaemu::detail::enter;
using cudaemu::detail::fail;
using cudaemu::detail::Runtime;
using cudaemu::detail::runtime;

namespace {

constexpr unsigned kMaxThreadsPerBlock = 1024;
constexpr unsigned kMaxGridX = 0x7fffffffu;
constexpr unsigned kMaxGridYZ = 65535u;

void runOneThread(const void* launch) {
  static_cast<const cudaemu::KernelLaunch*>(launch)->runThread();
}

uint3 blockIndex(dim3 grid, uint64_t linear) {
  uint3 b;
  b.x = static_cast<unsigned>(linear % grid.x);
  b.y = static_cast<unsigned>((linear / grid.x) % grid.y);
  b.z = static_cast<unsigned>(linear / (static_cast<uint64_t>(grid.x) * grid.y));
  return b;
}

size_t localBytesOf(const void* kernel) {
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mutex);
  auto it = rt.kernelLocalBytes.find(kernel);
  return it != rt.kernelLocalBytes.end() ? it->second : rt.config.kernelLocalBytes;
}

// Runs a whole grid on the calling (stream) thread's behalf: each block on a host thread of
// its own, started only once the device has room; returns when every block has finished.
void runGrid(DeviceState* d, const void* kernel, dim3 grid, dim3 block,
             const std::shared_ptr<const cudaemu::KernelLaunch>& launch,
             void (*runBlock)(const cudaemu::BlockLaunch&)) {
  // A kernel that needs more stack than the device's limit makes the driver grow the limit,
  // which first waits for the device to finish all other work (the hazard that sizing the
  // stack at set-up, before any kernel spins, avoids).
  const size_t need = localBytesOf(kernel);
  std::chrono::milliseconds delay{0};
  {
    Runtime& rt = runtime();
    std::lock_guard<std::mutex> lock(rt.mutex);
    delay = rt.config.launchDelay;
  }
  // A slow kernel (a test control): everything ordered after it waits this much longer.
  if (delay.count() > 0) std::this_thread::sleep_for(delay);
  bool grow;
  {
    std::lock_guard<std::mutex> lock(d->mutex);
    grow = need > d->stackLimit;
  }
  if (grow) {
    {
      Runtime& rt = runtime();
      std::lock_guard<std::mutex> lock(rt.mutex);
      ++rt.counters.stackGrowthWaits;
    }
    cudaemu::detail::waitDeviceIdle(d->ordinal, nullptr);
    std::lock_guard<std::mutex> lock(d->mutex);
    d->stackLimit = std::max(d->stackLimit, need);
  }
  const uint64_t blocks = static_cast<uint64_t>(grid.x) * grid.y * grid.z;
  std::vector<std::thread> running;
  running.reserve(blocks);
  int peak = 0;
  for (uint64_t b = 0; b < blocks; ++b) {
    {
      std::unique_lock<std::mutex> lock(d->mutex);
      d->roomFreed.wait(lock, [&] { return d->resident < d->slots; });
      ++d->resident;
      peak = std::max(peak, d->resident);
    }
    const cudaemu::BlockLaunch one{grid, block, blockIndex(grid, b), &runOneThread, launch.get()};
    running.emplace_back([d, one, runBlock] {
      runBlock(one);
      std::lock_guard<std::mutex> lock(d->mutex);
      --d->resident;
      d->roomFreed.notify_all();
    });
  }
  for (std::thread& t : running) t.join();
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mutex);
  ++rt.counters.kernelsLaunched;
  rt.counters.blocksRun += blocks;
  rt.counters.maxResidentBlocks = std::max(rt.counters.maxResidentBlocks, peak);
}

}  // namespace

namespace cudaemu {

cudaError_t enqueueLaunch(const void* kernel, dim3 grid, dim3 block, size_t sharedMem,
                          cudaStream_t stream, std::shared_ptr<const KernelLaunch> launch,
                          void (*runBlock)(const BlockLaunch&)) {
  if (cudaError_t e = enter("cudaLaunchKernel")) return fail(e);
  if (kernel == nullptr) return fail(cudaErrorInvalidDeviceFunction);
  if (launch == nullptr) return fail(cudaErrorInvalidValue);  // arguments missing
  const uint64_t threads = static_cast<uint64_t>(block.x) * block.y * block.z;
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > kMaxGridX || grid.y > kMaxGridYZ ||
      grid.z > kMaxGridYZ || threads == 0 || threads > kMaxThreadsPerBlock) {
    return fail(cudaErrorInvalidConfiguration);
  }
  (void)sharedMem;
  // The device the stream belongs to (the legacy stream: the calling thread's device).
  DeviceState* d = nullptr;
  {
    Runtime& rt = runtime();
    std::lock_guard<std::mutex> lock(rt.mutex);
    std::shared_ptr<detail::StreamCore> core = detail::streamOf(rt, stream);
    if (core == nullptr) return fail(detail::unresolvedStreamError(stream));
    d = detail::deviceOf(rt, core->device);
    if (d == nullptr) return fail(cudaErrorInvalidDevice);
  }
  cudaError_t e = detail::submit(stream, [d, kernel, grid, block, launch, runBlock] {
    runGrid(d, kernel, grid, block, launch, runBlock);
  });
  return e == cudaSuccess ? e : fail(e);
}

}  // namespace cudaemu
