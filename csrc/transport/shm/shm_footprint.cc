#include "transport/shm/shm_footprint.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "common/errors.h"

namespace ring {
namespace {

constexpr int64_t kMiB = 1024 * 1024;

std::string mib(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / kMiB);
  return text;
}

std::string kib(int64_t bytes) { return strCat(bytes / 1024, " KiB"); }

// The geometries tried, best first: the wanted one; its slots halved down to
// kShmDeepSlotBytes; two slots of that size; then two slots halved down to the floor.
std::vector<ShmGeometry> shrinkingSteps(const ShmGeometry& wanted) {
  std::vector<ShmGeometry> steps{wanted};
  ShmGeometry g = wanted;
  auto halve = [](int64_t bytes) {
    return std::max(kShmFloorSlotBytes, bytes / 2 / 64 * 64);  // payloads stay 64-byte aligned
  };
  while (g.slotBytes > kShmDeepSlotBytes) {
    g.slotBytes = std::max(kShmDeepSlotBytes, halve(g.slotBytes));
    steps.push_back(g);
  }
  if (g.slots > kShmFloorSlots) {
    g.slots = kShmFloorSlots;
    steps.push_back(g);
  }
  while (g.slotBytes > kShmFloorSlotBytes) {
    g.slotBytes = halve(g.slotBytes);
    steps.push_back(g);
  }
  return steps;
}

}  // namespace

int64_t shmBudget(int nlocal, const ShmRoom& room) {
  if (room.budget > 0) return std::min(room.budget, room.freeBytes);
  return std::min(static_cast<int64_t>(nlocal) * kShmBytesPerRank, room.freeBytes / 2);
}

ShmFit fitShmGeometry(const ShmGeometry& wanted, const ShmRoom& room, bool chosen) {
  ShmFit fit;
  fit.geometry = wanted;
  fit.budget = shmBudget(wanted.nranks, room);
  // One rank has no FIFO to fit; explicit slot settings are the user's to size.
  if (wanted.nranks < 2 || chosen) return fit;
  for (const ShmGeometry& g : shrinkingSteps(wanted)) {
    if (static_cast<int64_t>(g.hostBytes()) <= fit.budget) {
      fit.geometry = g;
      fit.shrunk = g.slots != wanted.slots || g.slotBytes != wanted.slotBytes;
      return fit;
    }
  }
  ShmGeometry floor = wanted;
  floor.slots = kShmFloorSlots;
  floor.slotBytes = kShmFloorSlotBytes;
  throw CommError(strCat(
      "the shared-memory inboxes of ", wanted.nranks, " ranks on this host need at least ",
      floor.hostBytes(), " bytes (", kShmFloorSlots, " slots of ", kib(kShmFloorSlotBytes),
      " per FIFO, the floor), but the budget is ", fit.budget, " bytes (",
      room.budget > 0 ? "TORCH_RING_SHM_BUDGET" : "auto: half of /dev/shm's free space",
      "; /dev/shm has ", room.freeBytes, " bytes free): enlarge /dev/shm (docker: --shm-size)",
      room.budget > 0 ? " or raise TORCH_RING_SHM_BUDGET" : " or set TORCH_RING_SHM_BUDGET",
      " (or TORCH_RING_LL_BYTES=0 to drop the mailboxes)"));
}

std::string describeShmFit(const ShmGeometry& wanted, const ShmFit& fit, const ShmRoom& room) {
  const ShmGeometry& g = fit.geometry;
  return strCat(
      "shared memory: ", g.nranks, " local ranks take ", mib(g.hostBytes()), " of /dev/shm (",
      mib(g.segmentBytes()), " each) with ", g.slots, " slots of ", kib(g.slotBytes),
      " per FIFO instead of ", wanted.slots, " of ", kib(wanted.slotBytes), " (",
      mib(wanted.hostBytes()), "), to fit a budget of ", mib(fit.budget),
      room.budget > 0 ? " (TORCH_RING_SHM_BUDGET)" : " (auto)", " with ",
      mib(room.freeBytes), " free; smaller slots cost bandwidth on calls of more than a few ",
      "slots (docs/shm_footprint.md measures it); more /dev/shm (docker: --shm-size) or "
      "TORCH_RING_SHM_BUDGET gives it back");
}

}  // namespace ring
