#include "transport/tcp/interface_filter.h"

#include "common/errors.h"

namespace ring {
namespace {

bool nameMatches(const std::string& pattern, bool exact, const std::string& name) {
  return exact ? name == pattern : name.compare(0, pattern.size(), pattern) == 0;
}

}  // namespace

InterfaceFilter InterfaceFilter::parse(const std::string& spec, const std::string& source) {
  InterfaceFilter f;
  size_t at = 0;
  if (at < spec.size() && spec[at] == '^') {
    f.exclude = true;
    ++at;
  }
  if (at < spec.size() && spec[at] == '=') {
    f.exact = true;
    ++at;
  }
  while (at <= spec.size()) {
    size_t comma = spec.find(',', at);
    if (comma == std::string::npos) comma = spec.size();
    if (comma > at) f.names.push_back(spec.substr(at, comma - at));
    at = comma + 1;
  }
  if (f.names.empty()) {
    throw UsageError(strCat(source,
                            " names no interface (expected e.g. eth0, eth0,eth1, =eth0 or "
                            "^docker,lo)"));
  }
  return f;
}

bool InterfaceFilter::matches(const std::string& interfaceName) const {
  bool listed = false;
  for (const std::string& n : names) listed = listed || nameMatches(n, exact, interfaceName);
  return listed != exclude;
}

size_t InterfaceFilter::preference(const std::string& interfaceName) const {
  if (exclude) return 0;
  for (size_t i = 0; i < names.size(); ++i) {
    if (nameMatches(names[i], exact, interfaceName)) return i;
  }
  return names.size();
}

}  // namespace ring
