// Which last-level cache a rank's CPUs use (common/cache_topology.h) and the copy start a group
// takes from it (executor/group_setup.h, chooseCopyStart), against made-up sysfs trees laid out
// as the Linux kernel documents them (Documentation/ABI/testing/sysfs-devices-system-cpu:
// cpuN/cache/indexK/{level,type,shared_cpu_list}) for the machines this project runs on: an
// Intel Xeon whose cores share one L3, an AMD EPYC VM whose cores each have an L3 of their own,
// a two-socket host, a machine without L3, and a container without the tree.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/cache_topology.h"
#include "executor/group_setup.h"
#include "memory_store.h"
#include "rank_threads.h"

namespace ring {
namespace {

namespace fs = std::filesystem;

struct CacheEntry {
  int level;
  const char* type;
  std::string shared;
};

// A made-up /sys/devices/system/cpu: `caches[cpu]` lists that CPU's index0, index1, ...
class FakeCpuTree {
 public:
  explicit FakeCpuTree(const std::vector<std::vector<CacheEntry>>& caches) {
    root_ = fs::temp_directory_path() /
            ("ring_cpu_tree_" + std::to_string(::getpid()) + "_" + std::to_string(next_++));
    fs::remove_all(root_);
    for (size_t cpu = 0; cpu < caches.size(); ++cpu) {
      for (size_t k = 0; k < caches[cpu].size(); ++k) {
        const fs::path dir =
            root_ / ("cpu" + std::to_string(cpu)) / "cache" / ("index" + std::to_string(k));
        fs::create_directories(dir);
        const CacheEntry& e = caches[cpu][k];
        std::ofstream(dir / "level") << e.level << "\n";
        std::ofstream(dir / "type") << e.type << "\n";
        std::ofstream(dir / "shared_cpu_list") << e.shared << "\n";
      }
    }
  }
  ~FakeCpuTree() { fs::remove_all(root_); }
  std::string dir() const { return root_.string(); }

 private:
  static inline int next_ = 0;
  fs::path root_;
};

// One CPU as Intel and AMD lay it out: L1 data, L1 instruction, L2, then the L3 shared by `l3`.
std::vector<CacheEntry> cpuWithL3(int cpu, const std::string& l3) {
  const std::string self = std::to_string(cpu);
  return {{1, "Data", self}, {1, "Instruction", self}, {2, "Unified", self}, {3, "Unified", l3}};
}

// The Intel Xeon kind: both cores under one L3 ("L3 cache: 480 MiB (1 instance)").
FakeCpuTree xeonTwoCores() { return FakeCpuTree({cpuWithL3(0, "0-1"), cpuWithL3(1, "0-1")}); }
// The AMD EPYC VM kind: each core its own L3 (two CCXs).
FakeCpuTree epycTwoCcx() { return FakeCpuTree({cpuWithL3(0, "0"), cpuWithL3(1, "1")}); }

TEST(CacheTopology, TheLastLevelIsTheHighestDataCache) {
  const FakeCpuTree xeon = xeonTwoCores();
  auto caches = lastLevelCachesOf(xeon.dir(), {0, 1});
  ASSERT_TRUE(caches.has_value());
  EXPECT_EQ(*caches, std::vector<std::string>{"0-1"});
  EXPECT_EQ(cacheLine(caches), "0-1");
  // No L3: the L2 is the last level; an instruction cache above it never counts.
  const FakeCpuTree noL3({{{1, "Data", "0"}, {2, "Unified", "0-1"}, {3, "Instruction", "0"}},
                          {{1, "Data", "1"}, {2, "Unified", "0-1"}, {3, "Instruction", "1"}}});
  caches = lastLevelCachesOf(noL3.dir(), {0, 1});
  ASSERT_TRUE(caches.has_value());
  EXPECT_EQ(*caches, std::vector<std::string>{"0-1"});
}

TEST(CacheTopology, CoresWithAnL3EachAreTwoCaches) {
  const FakeCpuTree epyc = epycTwoCcx();
  auto caches = lastLevelCachesOf(epyc.dir(), {0, 1});
  ASSERT_TRUE(caches.has_value());
  EXPECT_EQ(*caches, (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(cacheLine(caches), "0 1");
  EXPECT_EQ(cacheLine(lastLevelCachesOf(epyc.dir(), {1})), "1");
}

TEST(CacheTopology, AnUnreadableTreeIsUnknown) {
  EXPECT_FALSE(lastLevelCachesOf("/nonexistent/ring/cpu", {0}).has_value());
  EXPECT_EQ(cacheLine(std::nullopt), "?");
  // One CPU of the set missing from the tree: unknown, not a guess from the others.
  const FakeCpuTree oneCpu({cpuWithL3(0, "0-1")});
  EXPECT_FALSE(lastLevelCachesOf(oneCpu.dir(), {0, 1}).has_value());
  EXPECT_FALSE(lastLevelCachesOf(oneCpu.dir(), {}).has_value());
}

TEST(CacheTopology, RanksShareOnlyWhenEachNamesTheSameOneCache) {
  EXPECT_TRUE(shareOneLastLevelCache({"0-1", "0-1"}));
  EXPECT_TRUE(shareOneLastLevelCache({"0-7,64-71", "0-7,64-71", "0-7,64-71"}));
  EXPECT_FALSE(shareOneLastLevelCache({"0", "1"}));
  EXPECT_FALSE(shareOneLastLevelCache({"0 1", "0 1"}));  // each free to run under either
  EXPECT_FALSE(shareOneLastLevelCache({"0-1", "?"}));
  EXPECT_FALSE(shareOneLastLevelCache({}));
}

// Through the set-up exchange: ranks as threads over one store, each with the CPUs it may use.
std::vector<bool> startsOf(const FakeCpuTree& tree, const std::vector<std::vector<int>>& cpus,
                           const std::vector<int>& shmDomainOf) {
  using namespace testing_support;
  const int n = static_cast<int>(cpus.size());
  MemoryStore store;
  std::vector<char> streams(static_cast<size_t>(n), 0);
  auto outcomes = runRanks(n, [&](int r) {
    streams[static_cast<size_t>(r)] =
        chooseCopyStart(store, r, n, shmDomainOf, tree.dir(), cpus[static_cast<size_t>(r)],
                        std::chrono::seconds(10));
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(outcomes[static_cast<size_t>(r)].ok()) << outcomes[static_cast<size_t>(r)].message();
  }
  return std::vector<bool>(streams.begin(), streams.end());
}

TEST(CopyStart, CachedWhereTheHostsRanksShareAnL3StreamedWhereNot) {
  const FakeCpuTree xeon = xeonTwoCores();
  const FakeCpuTree epyc = epycTwoCcx();
  // Unbound ranks (each may run on both CPUs) and ranks bound to a core each.
  EXPECT_EQ(startsOf(xeon, {{0, 1}, {0, 1}}, {0, 0}), (std::vector<bool>{false, false}));
  EXPECT_EQ(startsOf(xeon, {{0}, {1}}, {0, 0}), (std::vector<bool>{false, false}));
  EXPECT_EQ(startsOf(epyc, {{0, 1}, {0, 1}}, {0, 0}), (std::vector<bool>{true, true}));
  EXPECT_EQ(startsOf(epyc, {{0}, {1}}, {0, 0}), (std::vector<bool>{true, true}));
  // Both ranks bound to one core of the EPYC: one cache.
  EXPECT_EQ(startsOf(epyc, {{1}, {1}}, {0, 0}), (std::vector<bool>{false, false}));
}

TEST(CopyStart, TwoSocketsDecidePerHostAndAnUnknownTreeStreams) {
  // Two sockets of two cores: L3 "0-1" and "2-3".
  const FakeCpuTree twoSockets({cpuWithL3(0, "0-1"), cpuWithL3(1, "0-1"), cpuWithL3(2, "2-3"),
                                cpuWithL3(3, "2-3")});
  EXPECT_EQ(startsOf(twoSockets, {{0}, {1}}, {0, 0}), (std::vector<bool>{false, false}));
  EXPECT_EQ(startsOf(twoSockets, {{0}, {2}}, {0, 0}), (std::vector<bool>{true, true}));
  EXPECT_EQ(startsOf(twoSockets, {{0, 1, 2, 3}, {0, 1, 2, 3}}, {0, 0}),
            (std::vector<bool>{true, true}));
  // Four ranks on two hosts (shared-memory domains 0 and 1), the made-up tree standing for both
  // machines: host 0's ranks on one socket, host 1's on two. Each host decides for itself.
  EXPECT_EQ(startsOf(twoSockets, {{0}, {1}, {0}, {3}}, {0, 0, 1, 1}),
            (std::vector<bool>{false, false, true, true}));
  // A rank alone on its host shares memory with no peer: the default, streamed.
  EXPECT_EQ(startsOf(twoSockets, {{0}, {1}}, {0, 1}), (std::vector<bool>{true, true}));
  // No tree: nothing known, streamed (as before the tree was read).
  const FakeCpuTree empty({});
  EXPECT_EQ(startsOf(empty, {{0}, {1}}, {0, 0}), (std::vector<bool>{true, true}));
}

}  // namespace
}  // namespace ring
