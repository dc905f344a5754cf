#include "executor/copy_choice.h"

#include <algorithm>

#include "transport/streaming_copy.h"

namespace ring {

int CopyChoice::sizeClassOf(int64_t bytes) {
  if (bytes < static_cast<int64_t>(kStreamingCopyBytes)) return -1;
  int c = 0;
  for (int64_t b = bytes / static_cast<int64_t>(kStreamingCopyBytes); b > 1 && c < kClasses - 1;
       b /= 2) {
    ++c;
  }
  return c;
}

void CopyChoice::startWith(bool streams) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (SizeClass& c : classes_) c.streams = streams;
  start_ = streams;
}

bool CopyChoice::startsStreamed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return start_;
}

CopyChoice::Call CopyChoice::next(int64_t bytes) {
  Call call;
  call.sizeClass = sizeClassOf(bytes);
  if (call.sizeClass < 0) return call;
  std::lock_guard<std::mutex> lock(mutex_);
  SizeClass& c = classes_[static_cast<size_t>(call.sizeClass)];
  const uint64_t phase = c.calls++ % kPeriod;
  if (phase >= kFirstTrial && phase < kFirstTrial + 2 * kTrials) {
    call.trial = true;
    call.streams = phase < kFirstTrial + kTrials;  // the streamed trials first, then the cached
  } else {
    call.streams = c.streams;
  }
  return call;
}

void CopyChoice::record(const Call& call, int64_t bytes, double micros) {
  if (!call.trial || call.sizeClass < 0 || bytes <= 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  SizeClass& c = classes_[static_cast<size_t>(call.sizeClass)];
  const size_t m = call.streams ? 1 : 0;
  const double perByte = micros / static_cast<double>(bytes);
  c.best[m] = c.timed[m] == 0 ? perByte : std::min(c.best[m], perByte);
  ++c.timed[m];
  ++c.timedInAll;
  // Both methods timed kTrials times (a failed call records nothing: the next period's trials
  // make up for it): the faster one's fastest trial decides; a tie keeps streaming.
  if (c.timed[0] >= kTrials && c.timed[1] >= kTrials) {
    c.streams = c.best[1] <= c.best[0];
    c.timed = {0, 0};
  }
}

bool CopyChoice::streamsNow(int64_t bytes) const {
  const int sc = sizeClassOf(bytes);
  if (sc < 0) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  return classes_[static_cast<size_t>(sc)].streams;
}

uint64_t CopyChoice::trialsTimed(int64_t bytes) const {
  const int sc = sizeClassOf(bytes);
  if (sc < 0) return 0;
  std::lock_guard<std::mutex> lock(mutex_);
  return classes_[static_cast<size_t>(sc)].timedInAll;
}

}  // namespace ring
