#include "executor/flight_recorder.h"

#include "common/errors.h"

namespace ring {

FlightRecorder::FlightRecorder(size_t capacity)
    : capacity_(capacity), on_(capacity > 0), origin_(std::chrono::steady_clock::now()) {}

void FlightRecorder::setCapacity(size_t capacity) {
  std::lock_guard<std::mutex> lock(mutex_);
  capacity_ = capacity;
  on_.store(capacity > 0, std::memory_order_relaxed);
  while (entries_.size() > capacity_) entries_.pop_front();
}

double FlightRecorder::msSinceOrigin(std::chrono::steady_clock::time_point t) const {
  return std::chrono::duration<double, std::milli>(t - origin_).count();
}

bool FlightRecorder::enabled() const {
  // Relaxed: a hint for whether to gather a call's shapes; recordQueued decides under the lock.
  return on_.load(std::memory_order_relaxed);
}

uint64_t FlightRecorder::recordQueued(uint64_t seq, std::string collective, std::string detail,
                                      FlightShapes shapes, int64_t timeoutMs) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (capacity_ == 0) return nextId_++;  // off: the updates below find nothing to change
  FlightEntry e;
  e.seq = seq;
  e.collective = std::move(collective);
  e.detail = std::move(detail);
  e.shapes = std::move(shapes);
  e.timeoutMs = timeoutMs;
  e.createdUnixNs = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
  e.state = "queued";
  e.queuedAtMs = msSinceOrigin(std::chrono::steady_clock::now());
  entries_.emplace_back(nextId_, std::move(e));
  while (entries_.size() > capacity_) entries_.pop_front();
  return nextId_++;
}

FlightEntry* FlightRecorder::find(uint64_t id) {
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
    if (it->first == id) return &it->second;
  }
  return nullptr;  // already evicted: nothing to update
}

void FlightRecorder::markStarted(uint64_t id, const char* thread,
                                 std::chrono::steady_clock::time_point at) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (FlightEntry* e = find(id)) {
    e->state = "running";
    e->thread = thread;
    e->startedAtMs = msSinceOrigin(at);
  }
}

void FlightRecorder::markEnded(uint64_t id, const std::string& error,
                               std::chrono::steady_clock::time_point at) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (FlightEntry* e = find(id)) {
    e->state = error.empty() ? "completed" : "failed";
    e->endedAtMs = msSinceOrigin(at);
    e->error = error;
  }
}

std::vector<FlightEntry> FlightRecorder::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<FlightEntry> out;
  out.reserve(entries_.size());
  for (const auto& p : entries_) out.push_back(p.second);
  return out;
}

std::string FlightRecorder::dump() const {
  std::string s;
  for (const FlightEntry& e : snapshot()) {
    s += strCat("  seq ", e.seq, " ", e.collective, " ", e.detail, " ", e.state,
                e.thread == "caller" ? " (on the caller's thread)" : "",
                e.startedAtMs >= 0 && e.endedAtMs >= 0
                    ? strCat(" in ", e.endedAtMs - e.startedAtMs, " ms")
                    : std::string(),
                e.error.empty() ? std::string() : strCat(" error: ", e.error.substr(0, 200)),
                "\n");
  }
  return s;
}

}  // namespace ring
