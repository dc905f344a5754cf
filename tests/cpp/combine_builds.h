// The builds of the combine loops (reduce/reduce_table.h) that the tests run on this CPU.
#pragma once

#include <vector>

#include "reduce/reduce_table.h"

namespace ring {

// The baseline build first, then every vector build this CPU runs (served or not).
inline std::vector<HostIsa> buildsHere() {
  std::vector<HostIsa> isas;
  for (int i = 0; i < kHostIsas; ++i) {
    if (hostSupports(static_cast<HostIsa>(i))) isas.push_back(static_cast<HostIsa>(i));
  }
  return isas;
}

// The vector builds this CPU runs, each to be compared with the baseline.
inline std::vector<HostIsa> vectorBuildsHere() {
  std::vector<HostIsa> isas = buildsHere();
  isas.erase(isas.begin());
  return isas;
}

// The build's name in a failure message.
inline const char* buildName(HostIsa isa) { return hostIsaName(isa); }

}  // namespace ring
