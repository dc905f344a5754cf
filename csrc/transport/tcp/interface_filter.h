// Which network interfaces a rank may listen on, in NCCL_SOCKET_IFNAME's syntax, so that a
// setting that works for NCCL works here:
//   "eth"          interfaces whose name starts with eth (eth0, eth1, ...)
//   "eth0,ib"      any of the listed prefixes, preferred in that order
//   "=eth0"        exactly eth0 (no prefix matching), e.g. "=eth0,eth1"
//   "^docker,lo"   every interface except those starting with docker or lo
//   "^=docker0"    every interface except exactly docker0
// GLOO_SOCKET_IFNAME's comma list of exact names is the "=" form.
#pragma once

#include <string>
#include <vector>

namespace ring {

struct InterfaceFilter {
  bool exclude = false;  // "^": the names are the ones NOT to use
  bool exact = false;    // "=": whole names, not prefixes
  std::vector<std::string> names;  // in the order given; never empty

  // Parses `spec`; UsageError naming `source` (the variable and its value) if it names no
  // interface ("", "^", "=", ",").
  static InterfaceFilter parse(const std::string& spec, const std::string& source);
  bool matches(const std::string& interfaceName) const;
  // For an including filter: the position of the first listed name `interfaceName` matches
  // (lower is preferred), or names.size() if none; 0 for an excluding filter.
  size_t preference(const std::string& interfaceName) const;
};

}  // namespace ring
