// Where one call's time goes, phase by phase: RING_PHASE(i, "name") marks the end of phase i on
// the calling thread, and the probe keeps the cycles since that thread's previous mark. At exit
// each phase's median and quartiles go to stderr (scripts/call_phases.py builds, runs and reads
// them). Only in a build configured with -DRING_PHASE_PROBE=ON; every other build compiles the
// marks to nothing.
//
// Why cycles between marks and not a profiler: a call of ring's is a few microseconds of some
// twenty steps of a few hundred cycles each, below what a sampling profiler resolves, and this
// project's VMs have no hardware counters (perf stat: <not supported>); callgrind counts
// instructions, not the time that cache misses, atomics and waits for the peer take. A mark (the
// time-stamp counter and an uncontended lock) costs some 60 cycles, which the phase it ends
// carries.
#pragma once

#ifdef RING_PHASE_PROBE

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <vector>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace ring::phase_probe {

inline uint64_t ticks() {
#if defined(__x86_64__)
  return __rdtsc();
#else
  return static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
#endif
}

// Phase 0 is the first mark of a call: what it closes is the time outside ring since the
// previous call's last mark (torch's dispatch and the Python loop), kept as its own phase.
constexpr int kPhases = 32;

struct Table {
  std::mutex mutex;  // marks come from the caller, the worker and waiters alike
  std::vector<uint32_t> cycles[kPhases];
  const char* names[kPhases] = {};
  std::atomic<uint64_t> firstTicks{0};  // the first mark's counter, for the rate
  std::chrono::steady_clock::time_point firstTime;

  void add(int phase, const char* name, uint64_t delta) {
    std::lock_guard<std::mutex> lock(mutex);
    if (cycles[phase].empty()) cycles[phase].reserve(1 << 16);
    cycles[phase].push_back(delta > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(delta));
    names[phase] = name;
  }
  // One line per phase: "ring-phase <i> <p25> <p50> <p75> <count> <name>", then the counter's
  // rate ("ring-phase-rate <ticks per us>") measured against steady_clock over the run.
  ~Table() {
    for (int i = 0; i < kPhases; ++i) {
      std::vector<uint32_t>& v = cycles[i];
      if (v.empty()) continue;
      std::sort(v.begin(), v.end());
      std::fprintf(stderr, "ring-phase %d %u %u %u %zu %s\n", i, v[v.size() / 4], v[v.size() / 2],
                   v[v.size() * 3 / 4], v.size(), names[i]);
    }
    const double us = std::chrono::duration<double, std::micro>(
                          std::chrono::steady_clock::now() - firstTime).count();
    const uint64_t first = firstTicks.load();
    if (first != 0 && us > 0) {
      std::fprintf(stderr, "ring-phase-rate %.3f\n", static_cast<double>(ticks() - first) / us);
    }
  }
};

inline Table table;
inline thread_local uint64_t previous = 0;

inline void mark(int phase, const char* name) {
  const uint64_t now = ticks();
  if (table.firstTicks.load(std::memory_order_relaxed) == 0) {
    std::lock_guard<std::mutex> lock(table.mutex);
    if (table.firstTicks.load(std::memory_order_relaxed) == 0) {
      table.firstTime = std::chrono::steady_clock::now();
      table.firstTicks.store(now);
    }
  }
  if (previous != 0) table.add(phase, name, now - previous);
  previous = now;
}

}  // namespace ring::phase_probe

#define RING_PHASE(i, name) ::ring::phase_probe::mark((i), (name))

#else

#define RING_PHASE(i, name) ((void)0)

#endif
