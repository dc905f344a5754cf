#include "executor/plan_choice.h"

#include "common/errors.h"

namespace ring {

void checkPlanSettings(const PlanSettings& s) {
  RING_USAGE_CHECK(s.algo == "auto" || s.algo == "ring" || s.algo == "hier_ring" ||
                       s.algo == "hier_rd" || s.algo == "hier_direct",
                   "ring: all_reduce plan '", s.algo,
                   "' must be auto, ring, hier_ring, hier_rd or hier_direct (TORCH_RING_ALGO)");
  RING_USAGE_CHECK(s.rdBytes >= 0, "ring: TORCH_RING_RD_BYTES must be >= 0, got ", s.rdBytes);
}

Algorithm chooseAllReduce(const PlanSettings& s, const HostLayout& layout, int64_t bytes) {
  if (s.algo == "ring") return Algorithm::Ring;
  if (s.algo == "hier_ring") return Algorithm::HierRing;
  if (s.algo == "hier_rd") return Algorithm::HierRd;
  if (s.algo == "hier_direct") return Algorithm::HierDirect;
  const int hosts = layout.hosts();
  if (hosts <= 1) return Algorithm::Ring;
  if (bytes <= s.directBytes / (hosts - 1)) return Algorithm::HierDirect;
  return bytes <= s.rdBytes ? Algorithm::HierRd : Algorithm::HierRing;
}

std::string settingsLine(const PlanSettings& s) {
  return strCat("algo=", s.algo, " rd_bytes=", s.rdBytes);
}

}  // namespace ring
