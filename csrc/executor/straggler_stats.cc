#include "executor/straggler_stats.h"

#include <algorithm>
#include <sstream>

#include "common/env.h"
#include "common/errors.h"
#include "common/logging.h"
#include "transport/link.h"

namespace ring {
namespace {

// The q-quantile of `v` (nearest rank); 0 for none.
double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  return v[i];
}

std::string ms(double x) {
  std::ostringstream o;
  o.precision(x < 10 ? 2 : 3);
  o << x << " ms";
  return o.str();
}

}  // namespace

StragglerStats::StragglerStats(int size, size_t window)
    : size_(size), window_(std::max<size_t>(window, 1)) {}

void StragglerStats::add(const std::vector<int64_t>& issuedNs) {
  RING_ASSERT(static_cast<int>(issuedNs.size()) == size_, "issue times of ", issuedNs.size(),
              " ranks for a group of ", size_);
  const int64_t first = *std::min_element(issuedNs.begin(), issuedNs.end());
  const auto lastIt = std::max_element(issuedNs.begin(), issuedNs.end());
  const bool tie = std::count(issuedNs.begin(), issuedNs.end(), *lastIt) > 1;
  std::lock_guard<std::mutex> lock(mutex_);
  if (lateMs_.empty()) {
    lateMs_.resize(window_ * static_cast<size_t>(size_));
    last_.resize(window_);
  }
  const size_t row = static_cast<size_t>(added_ % window_);
  double* late = &lateMs_[row * static_cast<size_t>(size_)];
  for (size_t r = 0; r < issuedNs.size(); ++r) late[r] = static_cast<double>(issuedNs[r] - first) / 1e6;
  last_[row] = tie ? -1 : static_cast<int>(lastIt - issuedNs.begin());
  kept_ = std::min(kept_ + 1, window_);
  ++added_;
}

uint64_t StragglerStats::added() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return added_;
}

StragglerReport StragglerStats::report(double thresholdMs) const {
  std::lock_guard<std::mutex> lock(mutex_);
  StragglerReport rep;
  rep.collectives = kept_;
  rep.thresholdMs = thresholdMs;
  for (int r = 0; r < size_; ++r) {
    // The kept rows are 0..kept_-1 in any order: a quantile and a count do not depend on it.
    std::vector<double> mine;
    mine.reserve(kept_);
    for (size_t c = 0; c < kept_; ++c) mine.push_back(lateMs_[c * static_cast<size_t>(size_) + r]);
    StragglerRank s;
    s.rank = r;
    s.lastIn = static_cast<uint64_t>(std::count(last_.begin(), last_.begin() + kept_, r));
    s.medianMs = quantile(mine, 0.5);
    s.p90Ms = quantile(mine, 0.9);
    s.maxMs = mine.empty() ? 0 : *std::max_element(mine.begin(), mine.end());
    if (!mine.empty() && s.medianMs >= thresholdMs) rep.stragglers.push_back(r);
    rep.ranks.push_back(s);
  }
  return rep;
}

std::string StragglerReport::describe() const {
  std::string out = lateness();
  if (!failure.empty()) out += strCat("; the group failed at ", failure);
  return out;
}

std::string StragglerReport::lateness() const {
  if (collectives == 0) return "no collective of this group has been seen by every rank yet";
  if (stragglers.empty()) {
    return strCat("no rank was late by ", ms(thresholdMs), " or more (median) in the last ",
                  collectives, " collectives");
  }
  std::string out;
  for (int r : stragglers) {
    const StragglerRank& s = ranks[static_cast<size_t>(r)];
    if (!out.empty()) out += "; ";
    out += strCat("rank ", r, " was the last to issue in ", s.lastIn, " of ", collectives,
                  " collectives, late by ", ms(s.medianMs), " (median), ", ms(s.p90Ms), " (p90)");
  }
  return out;
}

void IssueTimes::read(Transport& t, uint64_t count) {
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t next = next_.load(std::memory_order_relaxed);
  // The transport keeps 64 issue times per rank: stay well inside them (a collective whose
  // entry was overwritten would never be read), skipping what fell behind.
  constexpr uint64_t kBehind = 32;
  if (count > kBehind && next + kBehind < count) next = count - kBehind;
  // In order, as far as every rank has issued (usually all but the last few of the batch).
  while (next < count && t.issueTimes(next, &scratch_)) {
    stats_.add(scratch_);
    ++next;
  }
  next_.store(next, std::memory_order_relaxed);
  const int every = env().stragglerLogSeconds;
  if (every > 0 && rank_ == 0 &&
      std::chrono::steady_clock::now() - lastLog_ >= std::chrono::seconds(every)) {
    lastLog_ = std::chrono::steady_clock::now();
    RING_LOG(kLogInfo, "stragglers: ", stats_.report(1.0).describe());
  }
}

StragglerReport IssueTimes::report(Transport& t, double thresholdMs) {
  uint64_t issued = 0;
  if (t.issuedBy(rank_, &issued)) read(t, issued);
  return stats_.report(thresholdMs);
}

}  // namespace ring
