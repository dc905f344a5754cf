// The host build's launcher and block barrier (host_shim.h).
#include "kernels/host_shim.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace ring {
namespace hostshim {
namespace {

thread_local BlockBarrier* tlsBarrier = nullptr;

int threadsFromEnv() {
  const char* v = std::getenv("TORCH_RING_HOST_BLOCK_THREADS");
  if (v == nullptr || *v == '\0') return 8;
  const int n = std::atoi(v);
  return n >= 1 && n <= 512 ? n : 8;
}

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

void runGrid(dim3 grid, dim3 block, void (*body)(void* closure), void* closure) {
  const unsigned perBlock = std::min<unsigned>(block.x, static_cast<unsigned>(blockThreads()));
  const dim3 shape(perBlock);
  // One barrier per block; every block is co-resident (all its threads run at once), as a
  // ring kernel's blocks must be on a GPU.
  std::vector<std::unique_ptr<BlockBarrier>> barriers;
  for (unsigned b = 0; b < grid.x; ++b) {
    barriers.push_back(std::make_unique<BlockBarrier>(static_cast<int>(perBlock)));
  }
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(grid.x) * perBlock);
  for (unsigned b = 0; b < grid.x; ++b) {
    for (unsigned t = 0; t < perBlock; ++t) {
      BlockBarrier* barrier = barriers[b].get();
      threads.emplace_back([=] {
        threadIdx = uint3{t, 0, 0};
        blockIdx = uint3{b, 0, 0};
        blockDim = shape;
        gridDim = dim3(grid.x);
        tlsBarrier = barrier;
        body(closure);
        tlsBarrier = nullptr;
      });
    }
  }
  for (std::thread& t : threads) t.join();
}

}  // namespace hostshim
}  // namespace ring
