// Which last-level cache a set of CPUs sits under, read from the kernel's sysfs tree
// (/sys/devices/system/cpu/cpuN/cache/indexK/{level,type,shared_cpu_list}).
//
// Why: whether a copy into shared memory should stream past the cache (transport/
// streaming_copy.h) depends on whether the reading core shares a last-level cache with the
// writer. Where it does, a line written into the cache is read from there; a streamed line goes
// to memory and is fetched back from it. Where it does not, a cached store first fetches each
// destination line back from the peer's cache. The group starts from what this tree says and its
// timed trials (executor/copy_choice.h) confirm or correct it.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace ring {

// The last-level caches the CPUs `cpus` use, each named by its shared_cpu_list as the kernel
// writes it ("0-1", "0-7,64-71"), sorted, without repeats. The last level of a CPU is its
// highest-level cache that holds data ("Unified" or "Data", never "Instruction"). nullopt when
// any CPU's tree cannot be read (a container without /sys, an unknown layout): nothing is known.
// `cpuDir` is the tree's root, /sys/devices/system/cpu on a real machine (TORCH_RING_CPU_SYSFS).
std::optional<std::vector<std::string>> lastLevelCachesOf(const std::string& cpuDir,
                                                          const std::vector<int>& cpus);

// One rank's line for the others at set-up: its caches joined by ' ' ("0-1"), or "?" when they
// could not be read.
std::string cacheLine(const std::optional<std::vector<std::string>>& caches);

// Whether the ranks whose lines are `lines` (one host's ranks of a group) all run under one and
// the same last-level cache: every line names exactly one cache, the same one. Unreadable ("?")
// or several caches in a line (a rank free to run on CPUs under different caches): no.
bool shareOneLastLevelCache(const std::vector<std::string>& lines);

}  // namespace ring
