#include "executor/plan_choice.h"

#include "common/errors.h"

namespace ring {

AlgoKnob parseAlgoKnob(const std::string& word) {
  if (word == "auto") return AlgoKnob::Auto;
  if (word == "ring") return AlgoKnob::Ring;
  if (word == "hier_ring") return AlgoKnob::HierRing;
  if (word == "hier_rd") return AlgoKnob::HierRd;
  if (word == "hier_direct") return AlgoKnob::HierDirect;
  throw UsageError(strCat("ring: collective plan '", word,
                          "' must be auto, ring, hier_ring, hier_rd or hier_direct "
                          "(TORCH_RING_ALGO)"));
}

const char* algoKnobName(AlgoKnob k) {
  switch (k) {
    case AlgoKnob::Auto: return "auto";
    case AlgoKnob::Ring: return "ring";
    case AlgoKnob::HierRing: return "hier_ring";
    case AlgoKnob::HierRd: return "hier_rd";
    case AlgoKnob::HierDirect: return "hier_direct";
  }
  return "?";
}

void checkPlanSettings(const PlanSettings& s) {
  RING_USAGE_CHECK(s.rdBytes >= 0, "ring: TORCH_RING_RD_BYTES must be >= 0, got ", s.rdBytes);
}

Algorithm chooseAllReduce(const PlanSettings& s, const HostLayout& layout, int64_t bytes) {
  switch (s.algo) {
    case AlgoKnob::Ring: return Algorithm::Ring;
    case AlgoKnob::HierRing: return Algorithm::HierRing;
    case AlgoKnob::HierRd: return Algorithm::HierRd;
    case AlgoKnob::HierDirect: return Algorithm::HierDirect;
    case AlgoKnob::Auto: break;
  }
  const int hosts = layout.hosts();
  if (hosts <= 1) return Algorithm::Ring;
  if (bytes <= s.directBytes / (hosts - 1)) return Algorithm::HierDirect;
  return bytes <= s.rdBytes ? Algorithm::HierRd : Algorithm::HierRing;
}

Algorithm chooseAllGather(const PlanSettings& s, const HostLayout& layout, int64_t partBytes) {
  const int hosts = layout.hosts();
  if (s.algo == AlgoKnob::Ring || hosts <= 1 || layout.ranksPerHost() == 0) {
    return Algorithm::Ring;
  }
  if (s.algo == AlgoKnob::HierDirect) return Algorithm::HierDirect;
  if (s.algo != AlgoKnob::Auto) return Algorithm::HierRing;
  if (partBytes <= s.directBytes / (hosts - 1)) return Algorithm::HierDirect;
  return layout.ranksPerHost() >= 2 ? Algorithm::HierRing : Algorithm::Ring;
}

Algorithm chooseReduceScatter(const PlanSettings& s, const HostLayout& layout) {
  if (s.algo == AlgoKnob::Ring || layout.hosts() <= 1 || layout.ranksPerHost() == 0) {
    return Algorithm::Ring;
  }
  if (s.algo != AlgoKnob::Auto) return Algorithm::HierRing;
  return layout.ranksPerHost() >= 2 ? Algorithm::HierRing : Algorithm::Ring;
}

Algorithm chooseBroadcast(const PlanSettings& s, const HostLayout& layout) {
  if (s.algo == AlgoKnob::Ring || layout.hosts() <= 1) return Algorithm::Ring;
  return Algorithm::HierRing;
}

std::string settingsLine(const PlanSettings& s) {
  return strCat("algo=", algoKnobName(s.algo), " rd_bytes=", s.rdBytes);
}

}  // namespace ring
