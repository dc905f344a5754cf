#include "executor/plan_choice.h"

#include <algorithm>

#include "common/errors.h"

namespace ring {

AlgoKnob parseAlgoKnob(const std::string& word) {
  if (word == "auto") return AlgoKnob::Auto;
  if (word == "ring") return AlgoKnob::Ring;
  if (word == "hier_ring") return AlgoKnob::HierRing;
  if (word == "hier_rd") return AlgoKnob::HierRd;
  if (word == "hier_radix") return AlgoKnob::HierRadix;
  if (word == "hier_direct") return AlgoKnob::HierDirect;
  throw UsageError(strCat("ring: collective plan '", word,
                          "' must be auto, ring, hier_ring, hier_rd, hier_radix or hier_direct "
                          "(TORCH_RING_ALGO)"));
}

const char* algoKnobName(AlgoKnob k) {
  switch (k) {
    case AlgoKnob::Auto: return "auto";
    case AlgoKnob::Ring: return "ring";
    case AlgoKnob::HierRing: return "hier_ring";
    case AlgoKnob::HierRd: return "hier_rd";
    case AlgoKnob::HierRadix: return "hier_radix";
    case AlgoKnob::HierDirect: return "hier_direct";
  }
  return "?";
}

void checkPlanSettings(const PlanSettings& s) {
  RING_USAGE_CHECK(s.rdBytes >= 0, "ring: TORCH_RING_RD_BYTES must be >= 0, got ", s.rdBytes);
}

namespace {

// The most hosts one round may join: what a round sends, bytes * (k - 1), within directBytes.
int maxRadix(const PlanSettings& s, int hosts, int64_t bytes) {
  if (hosts <= 2) return 2;
  if (bytes <= 0 || s.directBytes / bytes >= hosts - 1) return hosts;
  return static_cast<int>(std::max<int64_t>(2, 1 + s.directBytes / bytes));
}

bool allRoundsOfTwo(const RadixSchedule& r) {
  for (int radix : r.radices) {
    if (radix != 2) return false;
  }
  return true;
}

}  // namespace

Algorithm chooseAllReduce(const PlanSettings& s, const HostLayout& layout, int64_t bytes) {
  switch (s.algo) {
    case AlgoKnob::Ring: return Algorithm::Ring;
    case AlgoKnob::HierRing: return Algorithm::HierRing;
    case AlgoKnob::HierRd: return Algorithm::HierRd;
    case AlgoKnob::HierRadix: return Algorithm::HierRadix;
    case AlgoKnob::HierDirect: return Algorithm::HierDirect;
    case AlgoKnob::Auto: break;
  }
  const int hosts = layout.hosts();
  if (hosts <= 1) return Algorithm::Ring;
  if (bytes <= s.directBytes / (hosts - 1)) return Algorithm::HierDirect;
  if (bytes > s.rdBytes) return Algorithm::HierRing;
  // Rounds of two are recursive doubling, and say so in the fingerprint.
  return allRoundsOfTwo(radixSchedule(hosts, maxRadix(s, hosts, bytes))) ? Algorithm::HierRd
                                                                        : Algorithm::HierRadix;
}

RadixSchedule interHostSchedule(const PlanSettings& s, const HostLayout& layout, int64_t bytes,
                                Algorithm plan) {
  const int hosts = std::max(1, layout.hosts());
  if (plan != Algorithm::HierRadix) return doublingSchedule(hosts);
  return radixSchedule(hosts, maxRadix(s, hosts, bytes));
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

std::string settingsLine(const PlanSettings& s, const HostLayout& layout) {
  std::string line = strCat("algo=", algoKnobName(s.algo), " rd_bytes=", s.rdBytes);
  if (layout.hosts() > 1) line += strCat(" direct_bytes=", s.directBytes);
  return line;
}

}  // namespace ring
