#include "transport/wait.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>
#include <thread>

#include "common/env.h"
#include "common/errors.h"

namespace ring {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "futex waits use the low 32 bits of a 64-bit counter at its own address");

// Shared (not PRIVATE) futex ops: the counters live in memory mapped by several processes.
uint32_t* lowWord(const std::atomic<uint64_t>& word) {
  return reinterpret_cast<uint32_t*>(const_cast<std::atomic<uint64_t>*>(&word));
}

void futexWait(const std::atomic<uint64_t>& word, uint32_t expected, std::chrono::nanoseconds d) {
  timespec ts;
  ts.tv_sec = static_cast<time_t>(d.count() / 1000000000);
  ts.tv_nsec = static_cast<long>(d.count() % 1000000000);
  // EAGAIN (value already changed), EINTR and ETIMEDOUT all just mean: look again.
  syscall(SYS_futex, lowWord(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

// Between sleeps the waiter re-checks health; this bounds how late a dead peer or an abort is
// noticed, while costing nothing when the data arrives (the publisher wakes us at once).
constexpr std::chrono::milliseconds kSleepSlice{20};

}  // namespace

void waitUntilNotYet(const std::atomic<uint64_t>& word, uint64_t target,
                     std::atomic<uint32_t>& sleepers, int peer, const char* what,
                     int64_t detail, const WaitContext& ctx, const char* causes,
                     LinkCheck link) {
  if (ctx.spinMicros > 0) {
    // Bounded by time, not iterations: the cost of a pause instruction varies 10x between CPUs.
    const auto spinUntil = Clock::now() + std::chrono::microseconds(ctx.spinMicros);
    for (int i = 1;; ++i) {
      cpuRelax();
      if (word.load(std::memory_order_acquire) >= target) return;
      if (i % 64 == 0) {
        if (Clock::now() >= spinUntil) break;
        // Where ranks share cores, yield now and then: if the thread we wait for shares this
        // core, it runs at once instead of after our whole spin budget; with nothing else
        // runnable, sched_yield returns immediately and we keep polling. Where each rank has
        // a core, never (WaitContext::yieldWhileSpinning says why).
        if (ctx.yieldWhileSpinning) std::this_thread::yield();
      }
    }
  }
  for (int i = 0; i < 4; ++i) {
    std::this_thread::yield();
    if (word.load(std::memory_order_acquire) >= target) return;
  }
  while (true) {
    // Data that has arrived is consumed even if the group broke meanwhile: its header check
    // gives a more precise error (or the collective completes) than the broken flag would.
    if (word.load(std::memory_order_acquire) >= target) return;
    auto now = Clock::now();
    if (ctx.checkHealth) ctx.checkHealth(peer);
    if (link.check != nullptr) link.check(link.self, peer);
    if (now >= ctx.deadline) {
      auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(now - ctx.start);
      throw TimeoutError(strCat(
          "ring: ", ctx.describe ? ctx.describe() : std::string("collective"),
          " timed out after ", waited.count(), " ms (the timeout is ", ctx.timeout.count(),
          " ms) waiting for rank ", peer, " ", what, " ", detail,
          ". Rank ", peer, " may be stuck, slower, or running a different collective",
          causes != nullptr ? causes : "",
          "; TORCH_RING_DEBUG=INFO and the flight recorder show each rank's last collectives."));
    }
    // seq_cst pairs with the publisher's seq_cst store + sleepers load (Dekker): either the
    // publisher sees us counted and wakes us, or we see its new value before sleeping.
    sleepers.fetch_add(1, std::memory_order_seq_cst);
    uint64_t seen = word.load(std::memory_order_seq_cst);
    if (seen < target) {
      auto left = ctx.deadline - now;
      auto slice = left < kSleepSlice ? left : std::chrono::duration_cast<Clock::duration>(kSleepSlice);
      futexWait(word, static_cast<uint32_t>(seen),
                std::chrono::duration_cast<std::chrono::nanoseconds>(slice));
    }
    sleepers.fetch_sub(1, std::memory_order_seq_cst);
    if (word.load(std::memory_order_acquire) >= target) return;
  }
}

void wakeSleepers(const std::atomic<uint64_t>& word) {
  syscall(SYS_futex, lowWord(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace ring
