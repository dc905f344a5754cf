// The host build's launcher and block barrier (host_shim.h).
#include "kernels/host_shim.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "common/knob_table.h"

namespace ring {
namespace hostshim {
namespace {

thread_local BlockBarrier* tlsBarrier = nullptr;

// Through the knob table, as every integer knob: a value out of range is an error naming the
// variable, not a silent 8.
int threadsFromEnv() { return static_cast<int>(readKnob("TORCH_RING_HOST_BLOCK_THREADS")); }

std::atomic<int>& configuredThreads() {
  static std::atomic<int> threads{threadsFromEnv()};
  return threads;
}

}  // namespace

int BlockBarrier::arriveAndWait(int predicate) {
  std::unique_lock<std::mutex> lock(mutex_);
  pending_ |= predicate;
  if (++arrived_ == threads_) {
    // The last thread in ends this generation: every access made before any thread arrived is
    // ordered (through the mutex) before every access made after any thread leaves.
    result_ = pending_;
    pending_ = 0;
    arrived_ = 0;
    ++generation_;
    released_.notify_all();
    return result_;
  }
  const uint64_t mine = generation_;
  released_.wait(lock, [&] { return generation_ != mine; });
  // No later generation can end before this thread arrives again, so result_ is still ours.
  return result_;
}

BlockBarrier* currentBarrier() { return tlsBarrier; }

int blockThreads() { return configuredThreads().load(std::memory_order_relaxed); }

void setBlockThreads(int threads) {
  configuredThreads().store(threads >= 1 && threads <= 512 ? threads : 8,
                            std::memory_order_relaxed);
}

namespace {

// Starts one block's host threads on `barrier` (one per thread the block runs), each with its
// built-ins set, running `run()`; the caller joins them.
template <typename Run>
void startBlock(std::vector<std::thread>* threads, BlockBarrier* barrier, dim3 grid,
                unsigned perBlock, uint3 index, const Run& run) {
  const dim3 shape(perBlock);
  for (unsigned t = 0; t < perBlock; ++t) {
    threads->emplace_back([=] {
      threadIdx = uint3{t, 0, 0};
      blockIdx = index;
      blockDim = shape;
      gridDim = grid;
      tlsBarrier = barrier;
      run();
      tlsBarrier = nullptr;
    });
  }
}

unsigned threadsPerBlock(dim3 block) {
  return std::min<unsigned>(block.x, static_cast<unsigned>(blockThreads()));
}

}  // namespace

void runGrid(dim3 grid, dim3 block, void (*body)(void* closure), void* closure) {
  const unsigned perBlock = threadsPerBlock(block);
  // One barrier per block; every block is co-resident (all its threads run at once), as a
  // ring kernel's blocks must be on a GPU.
  std::vector<std::unique_ptr<BlockBarrier>> barriers;
  for (unsigned b = 0; b < grid.x; ++b) {
    barriers.push_back(std::make_unique<BlockBarrier>(static_cast<int>(perBlock)));
  }
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(grid.x) * perBlock);
  for (unsigned b = 0; b < grid.x; ++b) {
    startBlock(&threads, barriers[b].get(), dim3(grid.x), perBlock, uint3{b, 0, 0},
               [body, closure] { body(closure); });
  }
  for (std::thread& t : threads) t.join();
}

}  // namespace hostshim
}  // namespace ring

#if defined(RING_CUDA_EMULATOR)
// The device side of an emulated launch (cuda_emulator_launch.h declares it): one
// block's threads with their built-ins and barrier; the emulator starts each block once the
// emulated device has room for it, so blocks are co-resident only as far as the device allows.
void cudaemu::runBlockThreads(const BlockLaunch& launch) {
  const unsigned perBlock = ring::hostshim::threadsPerBlock(launch.block);
  ring::hostshim::BlockBarrier barrier(static_cast<int>(perBlock));
  std::vector<std::thread> threads;
  threads.reserve(perBlock);
  ring::hostshim::startBlock(&threads, &barrier, launch.grid, perBlock, launch.blockIdx,
                             [&launch] { launch.threadMain(launch.launch); });
  for (std::thread& t : threads) t.join();
}
#endif
