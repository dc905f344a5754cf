#include "common/cache_topology.h"

#include <algorithm>
#include <fstream>

namespace ring {
namespace {

// A sysfs attribute's first line, without its newline; nullopt when it cannot be read.
std::optional<std::string> readLine(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  while (!line.empty() && (line.back() == '\n' || line.back() == ' ')) line.pop_back();
  return line;
}

// The shared_cpu_list of `cpu`'s last-level data cache. The indices are numbered densely from
// 0 by the kernel (index0, index1, ...): read until the first one missing.
std::optional<std::string> lastLevelCacheOf(const std::string& cpuDir, int cpu) {
  const std::string base = cpuDir + "/cpu" + std::to_string(cpu) + "/cache/index";
  int bestLevel = 0;
  std::optional<std::string> best;
  for (int index = 0; index < 64; ++index) {
    const std::string dir = base + std::to_string(index) + "/";
    const std::optional<std::string> level = readLine(dir + "level");
    if (!level) break;
    const std::optional<std::string> type = readLine(dir + "type");
    if (!type || *type == "Instruction") continue;
    int l = 0;
    try {
      l = std::stoi(*level);
    } catch (...) {
      return std::nullopt;
    }
    if (l <= bestLevel) continue;
    const std::optional<std::string> shared = readLine(dir + "shared_cpu_list");
    if (!shared || shared->empty()) return std::nullopt;
    bestLevel = l;
    best = shared;
  }
  return best;
}

}  // namespace

std::optional<std::vector<std::string>> lastLevelCachesOf(const std::string& cpuDir,
                                                          const std::vector<int>& cpus) {
  if (cpus.empty()) return std::nullopt;
  std::vector<std::string> caches;
  for (int cpu : cpus) {
    std::optional<std::string> cache = lastLevelCacheOf(cpuDir, cpu);
    if (!cache) return std::nullopt;
    caches.push_back(*cache);
  }
  std::sort(caches.begin(), caches.end());
  caches.erase(std::unique(caches.begin(), caches.end()), caches.end());
  return caches;
}

std::string cacheLine(const std::optional<std::vector<std::string>>& caches) {
  if (!caches || caches->empty()) return "?";
  std::string out;
  for (const std::string& c : *caches) {
    if (!out.empty()) out += ' ';
    out += c;
  }
  return out;
}

bool shareOneLastLevelCache(const std::vector<std::string>& lines) {
  if (lines.empty()) return false;
  for (const std::string& line : lines) {
    // "?" is unknown; a space separates two caches of one rank.
    if (line == "?" || line.empty() || line.find(' ') != std::string::npos) return false;
    if (line != lines.front()) return false;
  }
  return true;
}

}  // namespace ring
