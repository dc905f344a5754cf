// What a group's inboxes take of /dev/shm: the fit of the slots to the free space and to
// TORCH_RING_SHM_BUDGET (transport/shm/shm_footprint.h), and the footprint the layout claims
// against what the kernel's tmpfs actually charges for a live group.
#include <gtest/gtest.h>
#include <sys/statvfs.h>

#include <limits>
#include <memory>
#include <vector>

#include "common/errors.h"
#include "memory_store.h"
#include "rank_threads.h"
#include "transport/shm/shm_footprint.h"
#include "transport/shm/shm_transport.h"

namespace ring {
namespace {

using namespace std::chrono_literals;
using testing_support::MemoryStore;
using testing_support::runRanks;

constexpr int64_t kMiB = 1024 * 1024;
constexpr int64_t kPlenty = std::numeric_limits<int64_t>::max() / 4;

// The defaults of the knob table: 4 slots of 256 KiB, 64 KiB mailboxes.
ShmGeometry defaults(int nranks) { return ShmGeometry{nranks, 256 * 1024, 4, 64 * 1024}; }

int64_t freeBytes() {
  struct statvfs vfs;
  if (statvfs("/dev/shm", &vfs) != 0) return -1;
  return static_cast<int64_t>(vfs.f_bavail) * static_cast<int64_t>(vfs.f_frsize);
}

// A segment of `bytes` as tmpfs charges it: whole pages.
int64_t pages(size_t bytes) { return (static_cast<int64_t>(bytes) + 4095) / 4096 * 4096; }

// The layout's size against tmpfs's own accounting: while a group of n threads-as-ranks holds
// its inboxes (unlinked, still mapped), /dev/shm has exactly n inboxes' pages less free.
TEST(ShmFootprint, TheLayoutsSizeIsWhatTmpfsCharges) {
  for (int n : {2, 3, 5}) {
    ShmGeometry g{n, 16 * 1024, 3, 4096};
    MemoryStore store;
    const int64_t before = freeBytes();
    ASSERT_GT(before, 0);
    std::vector<int64_t> during(static_cast<size_t>(n));
    std::atomic<int> made{0};
    auto outcomes = runRanks(n, [&](int rank) {
      ShmTransport t(store, rank, n, g, 5s);
      made.fetch_add(1);
      while (made.load() < n) std::this_thread::yield();
      during[static_cast<size_t>(rank)] = freeBytes();
      // Nobody drops its mapping before every rank has read the free space.
      store.set(strCat("read/", rank), "1");
      for (int r = 0; r < n; ++r) store.get(strCat("read/", r), 5s);
    });
    for (const auto& o : outcomes) ASSERT_FALSE(o.error) << o.message();
    for (int64_t d : during) {
      EXPECT_EQ(before - d, n * pages(g.segmentBytes())) << "n=" << n;
    }
    EXPECT_EQ(freeBytes(), before) << "every inbox is gone with its group";
  }
}

// One inbox holds a FIFO per channel for every other rank and none for its owner: the
// closed form of the layout (a header page, 2 x (n - 1) FIFOs of whole pages, the mailbox).
TEST(ShmFootprint, AnInboxHoldsTwoFifosPerPeerAndNoneForItsOwner) {
  for (int n : {2, 4, 8, 64}) {
    const ShmGeometry g = defaults(n);
    const size_t fifo = (192 + 4 * (sizeof(MessageHeader) + 256 * 1024) + 4095) / 4096 * 4096;
    const size_t mailbox = 64 + 2 * (64 + 64 * 1024);
    EXPECT_EQ(g.segmentBytes(), 4096 + 2 * (n - 1) * fifo + mailbox) << "n=" << n;
    EXPECT_EQ(g.hostBytes(), n * g.segmentBytes());
  }
}

// With /dev/shm to spare the defaults stay up to 8 local ranks; past that the auto budget
// (16 MiB per rank) keeps what a rank maps constant, so the host's total grows linearly.
TEST(ShmFootprint, TheAutoBudgetGrowsLinearlyAndKeepsTheDefaultsUpToEightRanks) {
  for (int n = 2; n <= 64; ++n) {
    const ShmFit fit = fitShmGeometry(defaults(n), ShmRoom{kPlenty, 0}, false);
    EXPECT_LE(static_cast<int64_t>(fit.geometry.segmentBytes()), 16 * kMiB) << "n=" << n;
    EXPECT_EQ(fit.shrunk, n > 8) << "n=" << n;
    EXPECT_EQ(fit.geometry.nranks, n);
    EXPECT_EQ(fit.geometry.mailboxBytes, 64 * 1024);
  }
}

// Docker's default /dev/shm (64 MiB): 8 ranks fit in half of it, with the largest slots that
// do: the step before the chosen one (twice the slot, or twice the depth) would not fit.
TEST(ShmFootprint, EightRanksFitHalfOfDockersDefault) {
  const ShmRoom room{64 * kMiB, 0};
  const ShmFit fit = fitShmGeometry(defaults(8), room, false);
  EXPECT_TRUE(fit.shrunk);
  EXPECT_EQ(fit.budget, 32 * kMiB);
  EXPECT_LE(static_cast<int64_t>(fit.geometry.hostBytes()), 32 * kMiB);
  ShmGeometry larger = fit.geometry;
  if (larger.slots == 4) {
    larger.slotBytes *= 2;
  } else {
    larger.slotBytes < kShmDeepSlotBytes ? larger.slotBytes *= 2 : larger.slots = 4;
  }
  EXPECT_GT(static_cast<int64_t>(larger.hostBytes()), 32 * kMiB);
  EXPECT_GE(fit.geometry.slots, kShmFloorSlots);
  EXPECT_GE(fit.geometry.slotBytes, kShmFloorSlotBytes);
}

// The budget asked for is kept under, and never past the free space.
TEST(ShmFootprint, AnAskedBudgetIsKeptAndBoundedByTheFreeSpace) {
  for (int64_t budget : {int64_t{3} * kMiB, 12 * kMiB, 100 * kMiB}) {
    const ShmFit fit = fitShmGeometry(defaults(4), ShmRoom{kPlenty, budget}, false);
    EXPECT_EQ(fit.budget, budget);
    EXPECT_LE(static_cast<int64_t>(fit.geometry.hostBytes()), budget);
  }
  const ShmFit capped = fitShmGeometry(defaults(4), ShmRoom{10 * kMiB, 100 * kMiB}, false);
  EXPECT_EQ(capped.budget, 10 * kMiB);
  EXPECT_LE(static_cast<int64_t>(capped.geometry.hostBytes()), 10 * kMiB);
}

// Below the floor (2 slots of 4 KiB) set-up fails, saying what it needs and what it had.
TEST(ShmFootprint, BelowTheFloorTheErrorNamesTheSizes) {
  ShmGeometry floor = defaults(8);
  floor.slots = kShmFloorSlots;
  floor.slotBytes = kShmFloorSlotBytes;
  const int64_t need = static_cast<int64_t>(floor.hostBytes());
  EXPECT_LE(fitShmGeometry(defaults(8), ShmRoom{kPlenty, need}, false).geometry.hostBytes(),
            static_cast<size_t>(need));
  try {
    fitShmGeometry(defaults(8), ShmRoom{kPlenty, need - 1}, false);
    FAIL() << "a budget under the floor was accepted";
  } catch (const CommError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(strCat("need at least ", need, " bytes")), std::string::npos) << what;
    EXPECT_NE(what.find("TORCH_RING_SHM_BUDGET"), std::string::npos) << what;
    EXPECT_NE(what.find(strCat(need - 1)), std::string::npos) << what;
  }
}

// Slots the user sized stay as they are (the segment's allocation then says if they fit).
TEST(ShmFootprint, ExplicitSlotsAreNotShrunk) {
  const ShmFit fit = fitShmGeometry(defaults(8), ShmRoom{64 * kMiB, 0}, true);
  EXPECT_FALSE(fit.shrunk);
  EXPECT_EQ(fit.geometry.slotBytes, 256 * 1024);
  EXPECT_EQ(fit.geometry.slots, 4);
}

}  // namespace
}  // namespace ring
