// Prints the /dev/shm footprint of a group's inboxes for 2 to 64 local ranks (docs/
// shm_footprint.md): layout 6 (a FIFO set per rank and channel, the owner's own included, never
// fitted), and today's fit with /dev/shm to spare and in Docker's default 64 MiB.
//   ring_shm_footprint_table
#include <cstdio>
#include <limits>

#include "common/errors.h"
#include "transport/shm/shm_footprint.h"

namespace {

using ring::ShmGeometry;

constexpr double kMiB = 1024.0 * 1024.0;

// Layout 6's inbox: n FIFOs per channel.
double layoutSixBytes(const ShmGeometry& g) {
  return static_cast<double>(ShmGeometry::kHeaderBytes + 2 * g.nranks * g.fifoBytes() +
                             g.mailboxRegionBytes());
}

void fitted(const ShmGeometry& wanted, int64_t freeBytes) {
  try {
    const ring::ShmFit fit = ring::fitShmGeometry(wanted, ring::ShmRoom{freeBytes, 0}, false);
    std::printf(" | %.2f | %.1f | %d x %lld KiB", fit.geometry.segmentBytes() / kMiB,
                fit.geometry.hostBytes() / kMiB, fit.geometry.slots,
                static_cast<long long>(fit.geometry.slotBytes / 1024));
  } catch (const ring::CommError&) {
    std::printf(" | - | - | below the floor");
  }
}

}  // namespace

int main() {
  std::printf("| local ranks | layout 6: MiB per rank | layout 6: MiB per host | now, /dev/shm to "
              "spare: MiB per rank | per host | slots | now, 64 MiB /dev/shm: MiB per rank | "
              "per host | slots |\n|---|---|---|---|---|---|---|---|---|\n");
  for (int n : {2, 4, 8, 16, 32, 64}) {
    const ShmGeometry wanted{n, 256 * 1024, 4, 64 * 1024};
    std::printf("| %d | %.2f | %.1f", n, layoutSixBytes(wanted) / kMiB,
                n * layoutSixBytes(wanted) / kMiB);
    fitted(wanted, std::numeric_limits<int64_t>::max() / 4);
    fitted(wanted, 64 * 1024 * 1024);
    std::printf(" |\n");
  }
  return 0;
}
