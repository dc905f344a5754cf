#include "executor/flight_recorder.h"

#include "common/errors.h"

namespace ring {

FlightRecorder::FlightRecorder(size_t capacity)
    : capacity_(capacity), on_(capacity > 0), origin_(std::chrono::steady_clock::now()) {}

void FlightRecorder::setCapacity(size_t capacity) {
  std::lock_guard<std::mutex> lock(mutex_);
  // The newest `capacity` entries, oldest first, from index 0.
  std::vector<Kept> kept;
  const size_t n = entries_.size();
  for (size_t i = n > capacity ? n - capacity : 0; i < n; ++i) kept.push_back(std::move(at(i)));
  entries_ = std::move(kept);
  oldest_ = 0;
  capacity_ = capacity;
  on_.store(capacity > 0, std::memory_order_relaxed);
}

double FlightRecorder::msSinceOrigin(std::chrono::steady_clock::time_point t) const {
  return std::chrono::duration<double, std::milli>(t - origin_).count();
}

CallDetail CallDetail::counted(int64_t count, const char* dtype, const char* op, int64_t root) {
  CallDetail d;
  d.count = count;
  d.dtype = dtype;
  d.op = op;
  d.root = root;
  return d;
}

void CallDetail::appendTo(std::string& out) const {
  if (count >= 0) {
    detail::appendOne(out, count);
    out += " x ";
    detail::appendOne(out, dtype);
    if (op != nullptr) {
      out += ", op ";
      out += op;
    }
    if (root >= 0) {
      out += ", root ";
      detail::appendOne(out, root);
    }
  }
  out += text;
  if (note != nullptr) out += note;
}

std::string CallDetail::asText() const {
  std::string out;
  appendTo(out);
  return out;
}

uint64_t FlightRecorder::recordQueued(uint64_t seq, std::string_view collective,
                                      const std::string& detail) {
  return record(seq, collective, nullptr, &detail, {}, {}, 0);
}

uint64_t FlightRecorder::recordQueued(uint64_t seq, std::string_view collective,
                                      const CallDetail& detail, ShapeList inputs,
                                      ShapeList outputs, int64_t timeoutMs) {
  return record(seq, collective, &detail, nullptr, inputs, outputs, timeoutMs);
}

namespace {

// One side's shapes into the reused entry, element by element: the vectors keep their capacity
// (a steady stream of calls records without allocating; record() says why).
void copySide(ShapeList side, std::vector<std::vector<int64_t>>& sizes,
              std::vector<std::string_view>& dtypes) {
  sizes.resize(side.count);
  dtypes.resize(side.count);
  for (size_t i = 0; i < side.count; ++i) {
    const TensorShapeView& t = side.first[i];
    sizes[i].assign(t.sizes, t.sizes + t.dims);
    dtypes[i] = t.dtype;
  }
}

}  // namespace

uint64_t FlightRecorder::record(uint64_t seq, std::string_view collective,
                                const CallDetail* parts, const std::string* words,
                                ShapeList inputs, ShapeList outputs, int64_t timeoutMs) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (capacity_ == 0) return nextId_++;  // off: the updates below find nothing to change
  // Why the oldest entry is overwritten in place rather than a new one made: its strings and
  // vectors keep their capacity, so a steady stream of calls records without allocating (a
  // small collective costs a few us, and making and freeing an entry's dozen members per call
  // was a measurable part of it: issue 26, docs/notes/call_instructions.md).
  Kept* slot;
  if (entries_.size() < capacity_) {
    slot = &entries_.emplace_back();
  } else {
    slot = &entries_[oldest_];
    oldest_ = (oldest_ + 1) % entries_.size();
  }
  slot->id = nextId_;
  FlightEntry& e = slot->entry;
  e.seq = seq;
  // A program calls the same few collectives over and over: the name is usually the one there.
  if (e.collective != collective) e.collective.assign(collective);
  if (parts != nullptr) {
    slot->detail = *parts;
  } else {
    // Words as they are; the parts' fields reset in place (the text keeps its capacity).
    CallDetail& d = slot->detail;
    d.count = -1;
    d.dtype = d.op = d.note = nullptr;
    d.root = -1;
    d.text = *words;
  }
  e.state = "queued";
  e.thread = std::string_view();
  e.plan = std::string_view();
  e.startedAtMs = -1;
  e.endedAtMs = -1;
  e.error.clear();
  copySide(inputs, e.shapes.inputSizes, e.shapes.inputDtypes);
  copySide(outputs, e.shapes.outputSizes, e.shapes.outputDtypes);
  e.timeoutMs = timeoutMs;
  e.createdUnixNs = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
  e.queuedAtMs = msSinceOrigin(std::chrono::steady_clock::now());
  return nextId_++;
}

FlightEntry* FlightRecorder::find(uint64_t id) {
  for (size_t i = entries_.size(); i-- > 0;) {  // newest first: the one asked for is recent
    if (at(i).id == id) return &at(i).entry;
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
                               std::chrono::steady_clock::time_point at, const char* plan) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (FlightEntry* e = find(id)) {
    e->state = error.empty() ? "completed" : "failed";
    if (plan != nullptr) e->plan = plan;
    e->endedAtMs = msSinceOrigin(at);
    if (!error.empty() || !e->error.empty()) e->error = error;  // an empty copy is still a call
  }
}

std::vector<FlightEntry> FlightRecorder::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<FlightEntry> out;
  out.reserve(entries_.size());
  for (size_t i = 0; i < entries_.size(); ++i) {
    out.push_back(at(i).entry);
    at(i).detail.appendTo(out.back().detail);
  }
  return out;
}

std::string FlightRecorder::dump() const {
  std::string s;
  for (const FlightEntry& e : snapshot()) {
    s += strCat("  seq ", e.seq, " ", e.collective, " ", e.detail,
                e.plan.empty() ? std::string() : strCat(" (plan ", e.plan, ")"), " ", e.state,
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
