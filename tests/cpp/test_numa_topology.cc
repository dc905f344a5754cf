// NUMA nodes (common/numa_topology.h), the node each rank of a host takes, binding a thread to
// it (common/cpu_binding.h) and a shared-memory inbox allocated on it (ShmSegment::create),
// against made-up trees laid out as the Linux kernel documents them
// (Documentation/ABI/stable/sysfs-devices-node: nodeN/cpulist in the kernel's list syntax,
// Documentation/admin-guide/cputopology.rst): a two-socket server, a node without CPUs, a
// machine of one node, and no tree at all.
#include <gtest/gtest.h>
#include <linux/mempolicy.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/cpu_binding.h"
#include "common/numa_topology.h"
#include "transport/shm/shm_segment.h"

namespace ring {
namespace {

namespace fs = std::filesystem;

// A made-up /sys/devices/system/node: nodeN/cpulist for each (N, list).
class FakeNodeTree {
 public:
  explicit FakeNodeTree(const std::vector<std::pair<int, std::string>>& nodes) {
    root_ = fs::temp_directory_path() / ("ring_node_tree_" + std::to_string(::getpid()) + "_" +
                                         std::to_string(next_++));
    fs::remove_all(root_);
    fs::create_directories(root_);
    for (const auto& [id, list] : nodes) {
      fs::create_directories(root_ / ("node" + std::to_string(id)));
      std::ofstream(root_ / ("node" + std::to_string(id)) / "cpulist") << list << "\n";
    }
    // What else the kernel's folder holds, which is not a node.
    std::ofstream(root_ / "possible") << "0-1\n";
    fs::create_directories(root_ / "power");
  }
  ~FakeNodeTree() { fs::remove_all(root_); }
  std::string path() const { return root_.string(); }

 private:
  fs::path root_;
  static inline int next_ = 0;
};

std::vector<int> range(int lo, int hi) {
  std::vector<int> v;
  for (int c = lo; c <= hi; ++c) v.push_back(c);
  return v;
}

TEST(NumaTopology, CpuListsReadAsTheKernelWritesThem) {
  EXPECT_EQ(parseCpuList("0-3,8-11"), std::vector<int>({0, 1, 2, 3, 8, 9, 10, 11}));
  EXPECT_EQ(parseCpuList("5\n"), std::vector<int>({5}));
  EXPECT_EQ(parseCpuList(""), std::vector<int>());
  EXPECT_EQ(parseCpuList("0,2,4-5"), std::vector<int>({0, 2, 4, 5}));
  EXPECT_FALSE(parseCpuList("3-1"));
  EXPECT_FALSE(parseCpuList("0-"));
  EXPECT_FALSE(parseCpuList("a"));
  EXPECT_FALSE(parseCpuList("0,,1"));
  EXPECT_EQ(cpuListText({0, 1, 2, 3, 8, 9, 10, 11}), "0-3,8-11");
  EXPECT_EQ(cpuListText({5}), "5");
}

TEST(NumaTopology, ATwoSocketServerHasTwoNodesAndAMemoryOnlyNodeIsLeftOut) {
  // Two sockets of 16 cores with SMT siblings numbered after all cores, as x86 servers do,
  // and a third node of memory alone (CXL or HBM).
  FakeNodeTree tree({{0, "0-15,32-47"}, {1, "16-31,48-63"}, {2, ""}});
  const auto nodes = numaNodes(tree.path());
  ASSERT_TRUE(nodes);
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[0].id, 0);
  EXPECT_EQ((*nodes)[1].id, 1);
  EXPECT_EQ(cpuListText((*nodes)[1].cpus), "16-31,48-63");
}

TEST(NumaTopology, NoTreeOrAnUnreadableOneIsUnknown) {
  EXPECT_FALSE(numaNodes("/nonexistent/ring/node"));
  FakeNodeTree garbage({{0, "0-3"}, {1, "zero"}});
  EXPECT_FALSE(numaNodes(garbage.path()));
}

TEST(NumaTopology, RanksTakeNodesInBlocksSoTheRingCrossesLeast) {
  FakeNodeTree tree({{0, "0-15,32-47"}, {1, "16-31,48-63"}});
  const auto nodes = *numaNodes(tree.path());
  const std::vector<int> all = range(0, 63);
  auto nodeOf = [&](int i, int n) { return nodeForLocalRank(nodes, all, i, n).node; };
  // Two ranks: one a socket (tensor parallelism over two sockets).
  EXPECT_EQ(nodeOf(0, 2), 0);
  EXPECT_EQ(nodeOf(1, 2), 1);
  // Four: 0 0 1 1 (the ring 0-1-2-3-0 crosses twice; round robin would cross four times).
  EXPECT_EQ(nodeOf(0, 4), 0);
  EXPECT_EQ(nodeOf(1, 4), 0);
  EXPECT_EQ(nodeOf(2, 4), 1);
  EXPECT_EQ(nodeOf(3, 4), 1);
  // Three: 0 0 1.
  EXPECT_EQ(nodeOf(2, 3), 1);
  EXPECT_EQ(nodeOf(1, 3), 0);
  // A rank's CPUs are its node's among those the process may use.
  const NodePlace p = nodeForLocalRank(nodes, all, 1, 2);
  EXPECT_EQ(p.nodesReached, 2);
  EXPECT_EQ(cpuListText(p.cpus), "16-31,48-63");
  // A process confined to one socket (taskset, a cgroup) reaches one node: all its ranks there.
  const NodePlace one = nodeForLocalRank(nodes, range(16, 31), 0, 2);
  EXPECT_EQ(one.nodesReached, 1);
  EXPECT_EQ(one.node, 1);
  // Out of range: nothing chosen.
  EXPECT_EQ(nodeForLocalRank(nodes, all, 2, 2).node, -1);
}

std::vector<int> affinityOfThisThread() { return threadCpus(); }

TEST(NumaBinding, ARankIsBoundToItsNodesCpus) {
  const std::vector<int> mine = threadCpus();
  if (mine.size() < 2) GTEST_SKIP() << "one CPU: no two nodes to make up";
  // This machine's first two usable CPUs made into two nodes of one CPU each.
  FakeNodeTree tree({{0, std::to_string(mine[0])}, {1, std::to_string(mine[1])}});
  const auto nodes = *numaNodes(tree.path());
  // On a thread of its own, so that the test process's main thread stays as it is.
  std::string what;
  std::vector<int> after;
  int node = -2;
  bool bound = false;
  std::thread([&] {
    CpuBinder binder;
    what = binder.bindToNodeOnce(nodes, 1, 2, &bound);
    after = affinityOfThisThread();
    node = binder.boundNode();
  }).join();
  EXPECT_TRUE(bound) << what;
  EXPECT_EQ(after, std::vector<int>({mine[1]})) << what;
  EXPECT_EQ(node, 1);
  EXPECT_NE(what.find("NUMA node 1"), std::string::npos) << what;
}

TEST(NumaBinding, OneNodeBindsNothing) {
  FakeNodeTree tree({{0, cpuListText(threadCpus())}});
  const auto nodes = *numaNodes(tree.path());
  std::string what;
  bool bound = true;
  std::vector<int> after;
  std::thread([&] {
    CpuBinder binder;
    what = binder.bindToNodeOnce(nodes, 0, 2, &bound);
    after = affinityOfThisThread();
  }).join();
  EXPECT_FALSE(bound);
  EXPECT_EQ(after, threadCpus());
  EXPECT_NE(what.find("nothing to bind"), std::string::npos) << what;
}

// The node of the page at `p`, as the kernel reports it (get_mempolicy with MPOL_F_NODE |
// MPOL_F_ADDR); -1 where it will not say.
int nodeOfPage(const void* p) {
  int node = -1;
  if (syscall(SYS_get_mempolicy, &node, nullptr, 0, const_cast<void*>(p),
              MPOL_F_NODE | MPOL_F_ADDR) != 0) {
    return -1;
  }
  return node;
}

// Whether this system implements the memory-policy calls: qemu-user does not (ENOSYS), and the
// placement then leaves the pages to the kernel, saying so.
bool memoryPoliciesHere() {
  int mode = -1;
  return syscall(SYS_get_mempolicy, &mode, nullptr, 0, nullptr, 0) == 0 || errno != ENOSYS;
}

TEST(NumaPlacement, AnInboxAllocatedOnANodeHasItsPagesThere) {
  if (!memoryPoliciesHere()) {
    std::string placement;
    ShmSegment seg = ShmSegment::create(1 << 16, 0, &placement);
    seg.unlink();
    EXPECT_NE(placement.find("was refused (Function not implemented)"), std::string::npos)
        << placement;
    GTEST_SKIP() << "this system does not implement get_mempolicy/set_mempolicy (ENOSYS)";
  }
  // Node 0 exists on every Linux machine; its pages must be there whatever node the test runs
  // on. (A second node cannot be made up for the kernel: on a machine of one node, asking for
  // node 1 is refused, which the next test checks.)
  std::string placement;
  ShmSegment seg = ShmSegment::create(1 << 20, 0, &placement);
  seg.unlink();
  EXPECT_EQ(placement, "on NUMA node 0");
  const int first = nodeOfPage(seg.data());
  const int last = nodeOfPage(static_cast<const char*>(seg.data()) + (1 << 20) - 1);
  if (first < 0) GTEST_SKIP() << "the kernel does not report a page's node here";
  EXPECT_EQ(first, 0);
  EXPECT_EQ(last, 0);
}

TEST(NumaPlacement, ANodeTheKernelRefusesLeavesTheInboxWhereTheKernelPutsIt) {
  std::string placement;
  ShmSegment seg = ShmSegment::create(1 << 16, 1000, &placement);
  seg.unlink();
  ASSERT_NE(seg.data(), nullptr);
  EXPECT_NE(placement.find("preferring NUMA node 1000 was refused"), std::string::npos)
      << placement;
  if (!memoryPoliciesHere()) GTEST_SKIP() << "no get_mempolicy here (ENOSYS) to read the policy";
  // The thread's policy is as before: a segment created after it has no node asked.
  int mode = -1;
  ASSERT_EQ(syscall(SYS_get_mempolicy, &mode, nullptr, 0, nullptr, 0), 0);
  EXPECT_EQ(mode, MPOL_DEFAULT);
}

TEST(NumaPlacement, TheThreadsPolicyIsPutBackAfterThePlacement) {
  if (!memoryPoliciesHere()) GTEST_SKIP() << "no get_mempolicy here (ENOSYS)";
  std::string placement;
  ShmSegment seg = ShmSegment::create(1 << 16, 0, &placement);
  seg.unlink();
  int mode = -1;
  ASSERT_EQ(syscall(SYS_get_mempolicy, &mode, nullptr, 0, nullptr, 0), 0);
  EXPECT_EQ(mode, MPOL_DEFAULT) << "the creating thread still prefers node 0";
}

}  // namespace
}  // namespace ring
