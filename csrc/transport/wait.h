// Bounded waiting: every blocking wait in the project goes through waitUntil, which spins
// briefly, then sleeps on a futex, and between sleeps checks the deadline, the abort flags and
// whether the peer it waits on is still alive. A wait never outlives the group timeout.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace ring {

using Clock = std::chrono::steady_clock;

// What a wait is for, so that a timeout or failure can say so.
struct WaitContext {
  Clock::time_point start;
  Clock::time_point deadline;
  std::chrono::milliseconds timeout{0};
  // Microseconds of busy-polling before sleeping (see chooseSpin in executor/group_setup.cc:
  // some when every rank of the host has a core of its own, none when ranks outnumber cores).
  int spinMicros = 0;
  // Whether the spin yields the core every 64 pauses (chooseSpin again: only where this host's
  // ranks outnumber its cores). There the rank waited on may be queued behind this thread on
  // this very core, and a yield lets it run. Where every rank has a core, a yield can only hand
  // the core to some other runnable thread, and when other processes compete for the cores
  // that is one of theirs, which then keeps the core for a whole scheduler slice (milliseconds)
  // after the data has arrived: beside one busy process per core, calls took several times
  // longer with the yields than without, and yielding only once a wait had lasted a while did
  // not help (docs/notes/code_comment_figures.md, "Yields while spinning").
  bool yieldWhileSpinning = true;
  // "all_reduce of 1000 float32 (op SUM), sequence 17 on rank 1 of group 'default'"
  std::function<std::string()> describe;
  // Throws CommError if the group was aborted or broken, or a peer died. Called between sleeps.
  std::function<void(int peer)> checkHealth;
};

// A check of the link itself that a wait runs after ctx.checkHealth (between sleeps): throws to
// end a wait that can never be satisfied (a TCP link whose connection ended short of the
// target). A plain function and its object: nothing allocated per wait.
struct LinkCheck {
  void (*check)(const void* self, int peer) = nullptr;
  const void* self = nullptr;
};

// One pause of a busy-wait loop: tells the core (and a hypervisor) that this is a spin.
inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// waitUntil's wait, once a first look found word < target (wait.cc: spin, sleep, health).
void waitUntilNotYet(const std::atomic<uint64_t>& word, uint64_t target,
                     std::atomic<uint32_t>& sleepers, int peer, const char* what,
                     int64_t detail, const WaitContext& ctx, const char* causes, LinkCheck link);

// Blocks until word >= target (64-bit monotonic counter). `sleepers` counts waiters that may be
// asleep on the counter's low 32 bits; the publisher wakes them only when it is non-zero.
// `what` describes the event ("rank 0 to send message 3"); `causes` lists what a timeout may
// mean beyond the peer itself (the TCP links add the network). Throws TimeoutError or CommError.
// The first look is inline: a small call's caller has usually seen the peers' messages arrive
// already (the runner's question, allIssued), and a call costs more than the look.
inline void waitUntil(const std::atomic<uint64_t>& word, uint64_t target,
                      std::atomic<uint32_t>& sleepers, int peer, const char* what, int64_t detail,
                      const WaitContext& ctx, const char* causes = nullptr, LinkCheck link = {}) {
  // acquire: payload written before the counter was published is visible after this load.
  if (word.load(std::memory_order_acquire) >= target) return;
  waitUntilNotYet(word, target, sleepers, peer, what, detail, ctx, causes, link);
}

// Wakes every thread asleep on `word` (a futex on its low 32 bits).
void wakeSleepers(const std::atomic<uint64_t>& word);

// Publishes a new counter value and wakes sleepers (if any). Inline: every message publishes,
// and without a sleeper that is a store and a load.
inline void publishCounter(std::atomic<uint64_t>& word, uint64_t value,
                           const std::atomic<uint32_t>& sleepers) {
  // seq_cst store (release included): the payload written before this store is visible to a
  // waiter that observes `value`; seq_cst also orders it before the sleepers load below (a
  // waiter registers as a sleeper, then looks at the word again: one of the two sees the other).
  word.store(value, std::memory_order_seq_cst);
  if (sleepers.load(std::memory_order_seq_cst) != 0) wakeSleepers(word);
}

}  // namespace ring
