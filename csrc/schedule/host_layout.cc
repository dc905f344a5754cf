#include "schedule/host_layout.h"

#include <algorithm>
#include <map>


namespace ring {

namespace {

// The chunk (of chunkRange(count, parts, .)) that holds element `at` (0 <= at < count): the
// first count % parts chunks are one element longer than the rest.
int chunkHolding(int64_t count, int parts, int64_t at) {
  const int64_t base = count / parts;
  const int64_t extra = count % parts;
  const int64_t longPart = extra * (base + 1);
  if (at < longPart) return static_cast<int>(at / (base + 1));
  return static_cast<int>(extra + (at - longPart) / base);
}

}  // namespace

int HostLayout::localIndex(int rank) const {
  const std::vector<int>& m = members[static_cast<size_t>(hostOf[static_cast<size_t>(rank)])];
  return static_cast<int>(std::lower_bound(m.begin(), m.end(), rank) - m.begin());
}

int HostLayout::ranksPerHost() const {
  if (members.empty()) return 0;
  const size_t each = members[0].size();
  for (const auto& m : members) {
    if (m.size() != each) return 0;
  }
  return static_cast<int>(each);
}

HostLayout layoutFromGroups(const std::vector<int>& groupOf) {
  HostLayout layout;
  layout.hostOf.resize(groupOf.size());
  std::map<int, int> hostOfGroup;  // label -> host index, in order of each host's lowest rank
  for (size_t r = 0; r < groupOf.size(); ++r) {
    auto it = hostOfGroup.find(groupOf[r]);
    if (it == hostOfGroup.end()) {
      it = hostOfGroup.emplace(groupOf[r], layout.hosts()).first;
      layout.members.emplace_back();
    }
    layout.hostOf[r] = it->second;
    layout.members[static_cast<size_t>(it->second)].push_back(static_cast<int>(r));
  }
  return layout;
}

Range ownedChunk(const HostLayout& layout, int host, int local, int64_t count) {
  const int parts = static_cast<int>(layout.members[static_cast<size_t>(host)].size());
  return chunkRange(count, parts, modRank(local + 1, parts));
}

std::vector<HostSegment> hostSegments(const HostLayout& layout, int64_t count) {
  std::vector<HostSegment> segments;
  if (count <= 0) return segments;
  std::vector<int64_t> edges{0, count};
  for (const auto& host : layout.members) {
    const int parts = static_cast<int>(host.size());
    for (int k = 1; k < parts; ++k) edges.push_back(chunkRange(count, parts, k).offset);
  }
  std::sort(edges.begin(), edges.end());
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
  for (size_t i = 0; i + 1 < edges.size(); ++i) {
    HostSegment s;
    s.range = Range{edges[i], edges[i + 1] - edges[i]};
    for (const auto& host : layout.members) {
      const int parts = static_cast<int>(host.size());
      // Chunk k is reduced at local rank k-1 (ownedChunk's inverse).
      const int k = chunkHolding(count, parts, s.range.offset);
      s.owners.push_back(host[static_cast<size_t>(modRank(k - 1, parts))]);
    }
    segments.push_back(std::move(s));
  }
  return segments;
}

std::vector<int> ranksOfLocalIndex(const HostLayout& layout, int local) {
  std::vector<int> ranks;
  ranks.reserve(layout.members.size());
  for (const auto& host : layout.members) ranks.push_back(host[static_cast<size_t>(local)]);
  return ranks;
}

int localMajorPosition(const HostLayout& layout, int rank) {
  return layout.localIndex(rank) * layout.hosts() + layout.hostOf[static_cast<size_t>(rank)];
}

std::vector<int> hostMajorRing(const HostLayout& layout) {
  std::vector<int> ring;
  ring.reserve(layout.hostOf.size());
  for (const auto& host : layout.members) ring.insert(ring.end(), host.begin(), host.end());
  return ring;
}

}  // namespace ring
