// How much of /dev/shm a group's inboxes take on one host, and the geometry that fits there.
//
// Every local rank's inbox holds one FIFO per channel for each other local rank, so a rank's
// inbox grows with the host's ranks and the host's total with their square. Set-up caps the
// total instead: by default a share per rank (so the host's total grows linearly) and half of
// the free space of /dev/shm (the rest stays for the data loader's workers and torch's own
// shared tensors, which live there too), or the budget the job asks for
// (TORCH_RING_SHM_BUDGET). When the wanted geometry does not fit, the FIFOs shrink, down to a
// floor that still runs every collective; below the floor set-up fails, saying what it needs.
#pragma once

#include <cstdint>
#include <string>

#include "transport/shm/shm_layout.h"

namespace ring {

// The auto budget's share per local rank: the default geometry (4 slots of 256 KiB, both
// channels) for up to 8 local ranks, one per GPU of an 8-GPU node.
constexpr int64_t kShmBytesPerRank = 16 * 1024 * 1024;
// The smallest FIFO: two slots (one slot deadlocks a ring step that holds its received slot
// while it sends: communicator.cc) of one page.
constexpr int kShmFloorSlots = 2;
constexpr int64_t kShmFloorSlotBytes = 4096;
// Slots are halved down to this size before the depth goes from its default to two: below it
// the per-message handshake, not the copy, sets the pace, so fewer but larger slots lose less.
constexpr int64_t kShmDeepSlotBytes = 64 * 1024;

// What the host's ranks found at set-up.
struct ShmRoom {
  int64_t freeBytes = 0;  // /dev/shm's free space: the least any local rank read
  int64_t budget = 0;     // TORCH_RING_SHM_BUDGET in bytes (the least asked); 0: auto
};

struct ShmFit {
  ShmGeometry geometry;  // what the inboxes are made with
  int64_t budget = 0;    // what all of the host's inboxes may take together
  bool shrunk = false;   // smaller than wanted
};

// The budget for `nlocal` ranks: the one asked for (at most the free space), else the smaller
// of nlocal x kShmBytesPerRank and half the free space.
int64_t shmBudget(int nlocal, const ShmRoom& room);

// The geometry for wanted.nranks local ranks: `wanted` if it fits the budget or was set
// explicitly (`chosen`: TORCH_RING_SLOT_BYTES / _SLOTS or the options; then /dev/shm alone
// decides, when the segment is made); otherwise the largest of the shrinking steps that fits.
// Throws CommError naming the sizes when not even the floor fits.
ShmFit fitShmGeometry(const ShmGeometry& wanted, const ShmRoom& room, bool chosen);

// The set-up log line of a shrunk fit: what was chosen, against what, and what it costs.
std::string describeShmFit(const ShmGeometry& wanted, const ShmFit& fit, const ShmRoom& room);

}  // namespace ring
