#include "common/numa_topology.h"

#include <dirent.h>

#include <algorithm>
#include <cctype>
#include <fstream>

namespace ring {

std::optional<std::vector<int>> parseCpuList(const std::string& text) {
  std::vector<int> cpus;
  std::string s = text;
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  if (s.empty()) return cpus;
  size_t i = 0;
  auto number = [&](int* out) {
    if (i >= s.size() || !std::isdigit(static_cast<unsigned char>(s[i]))) return false;
    long v = 0;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
      v = v * 10 + (s[i++] - '0');
      if (v > 1 << 20) return false;  // beyond any CPU number the kernel gives
    }
    *out = static_cast<int>(v);
    return true;
  };
  for (;;) {
    int lo = 0, hi = 0;
    if (!number(&lo)) return std::nullopt;
    hi = lo;
    if (i < s.size() && s[i] == '-') {
      ++i;
      if (!number(&hi) || hi < lo) return std::nullopt;
    }
    for (int c = lo; c <= hi; ++c) cpus.push_back(c);
    if (i == s.size()) break;
    if (s[i] != ',') return std::nullopt;
    ++i;
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::optional<std::vector<NumaNode>> numaNodes(const std::string& nodeDir) {
  DIR* dir = opendir(nodeDir.c_str());
  if (dir == nullptr) return std::nullopt;
  std::vector<NumaNode> nodes;
  bool unreadable = false;
  while (dirent* e = readdir(dir)) {
    const std::string name = e->d_name;
    if (name.size() <= 4 || name.compare(0, 4, "node") != 0 ||
        !std::all_of(name.begin() + 4, name.end(),
                     [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
      continue;
    }
    std::ifstream in(nodeDir + "/" + name + "/cpulist");
    std::string line;
    if (!in || !std::getline(in, line)) {
      unreadable = true;
      continue;
    }
    std::optional<std::vector<int>> cpus = parseCpuList(line);
    if (!cpus) {
      unreadable = true;
      continue;
    }
    if (cpus->empty()) continue;  // memory without CPUs (CXL, HBM as a node of its own)
    nodes.push_back(NumaNode{std::stoi(name.substr(4)), std::move(*cpus)});
  }
  closedir(dir);
  if (unreadable || nodes.empty()) return std::nullopt;
  std::sort(nodes.begin(), nodes.end(),
            [](const NumaNode& a, const NumaNode& b) { return a.id < b.id; });
  return nodes;
}

NodePlace nodeForLocalRank(const std::vector<NumaNode>& nodes, const std::vector<int>& usable,
                           int localIndex, int localRanks) {
  NodePlace place;
  std::vector<const NumaNode*> reached;
  for (const NumaNode& n : nodes) {
    for (int c : n.cpus) {
      if (std::binary_search(usable.begin(), usable.end(), c)) {
        reached.push_back(&n);
        break;
      }
    }
  }
  place.nodesReached = static_cast<int>(reached.size());
  if (reached.empty() || localRanks <= 0 || localIndex < 0 || localIndex >= localRanks) {
    return place;
  }
  // Blocks: rank i of L on node floor(i * N / L), so each node takes L/N neighbours.
  const size_t k = static_cast<size_t>(static_cast<int64_t>(localIndex) *
                                       static_cast<int64_t>(reached.size()) / localRanks);
  const NumaNode& n = *reached[k];
  place.node = n.id;
  for (int c : n.cpus) {
    if (std::binary_search(usable.begin(), usable.end(), c)) place.cpus.push_back(c);
  }
  return place;
}

std::string cpuListText(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(cpus[i]);
    if (j > i) out += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace ring
