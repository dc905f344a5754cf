// The builds of the combine loops (reduce/reduce_table.h) that the tests run on this CPU.
#pragma once

#include <vector>

#include "reduce/reduce_table.h"

namespace ring {

// The baseline build always, the AVX2 one where combineFn serves it on this CPU.
inline std::vector<HostIsa> buildsHere() {
  std::vector<HostIsa> isas = {HostIsa::Baseline};
  if (hostIsa() != HostIsa::Baseline) isas.push_back(hostIsa());
  return isas;
}

// The build's name in a failure message.
inline const char* buildName(HostIsa isa) {
  return isa == HostIsa::Baseline ? "baseline" : "avx2";
}

}  // namespace ring
