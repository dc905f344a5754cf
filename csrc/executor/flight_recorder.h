// The last N collectives of a group, kept in memory: what each rank was doing when something
// went wrong. Dumped to the log on a failure and readable from Python.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace ring {

// The tensors of a call as torch's flight recorder lists them (fr_trace compares them across
// ranks): one shape per tensor, and torch's dtype names ("Float": static text, c10::toString's).
struct FlightShapes {
  std::vector<std::vector<int64_t>> inputSizes, outputSizes;
  std::vector<std::string_view> inputDtypes, outputDtypes;
};

// One tensor of a call as the caller hands it to recordQueued: its sizes (the tensor's own,
// read before recordQueued returns) and torch's dtype name (static text). Views, not copies:
// the recorder copies them into an entry it reuses, whose vectors keep their capacity.
struct TensorShapeView {
  const int64_t* sizes = nullptr;
  size_t dims = 0;
  std::string_view dtype;
};
// A call's tensors on one side (inputs or outputs): `count` views from `first`.
struct ShapeList {
  const TensorShapeView* first = nullptr;
  size_t count = 0;
};

// What an entry says of its call ("1000 x float32, op SUM"), kept as parts and written out only
// when the recorder is read (snapshot, dump).
// Why parts and not the string: a small collective's detail is longer than a std::string holds
// inline, so building it at issue cost an allocation and a few hundred instructions per call
// (issue 26), and writing it into the reused entry still about 180 (issue 48), for a text that
// is read only when the recorder is dumped.
struct CallDetail {
  CallDetail() = default;
  // Any other words, as they are (not explicit: a call site may pass strCat(...) itself).
  CallDetail(std::string words) : text(std::move(words)) {}  // NOLINT(google-explicit-constructor)
  // "count x dtype", then ", op OP" where op is set, then ", root ROOT" where root >= 0.
  static CallDetail counted(int64_t count, const char* dtype, const char* op = nullptr,
                            int64_t root = -1);

  int64_t count = -1;           // >= 0: "count x dtype" comes first
  const char* dtype = nullptr;  // static text (dtypeName)
  const char* op = nullptr;     // static text (redOpName)
  int64_t root = -1;
  std::string text;             // after the parts above
  const char* note = nullptr;   // static text, last: " (CUDA, staged through host memory)"

  void appendTo(std::string& out) const;
  std::string asText() const;  // appendTo into a fresh string
};

struct FlightEntry {
  uint64_t seq = 0;
  std::string collective;  // "all_reduce"
  std::string detail;      // "1000 x float32, op SUM"
  // Both name static text (string literals), never a copy: a call sets them three times, and
  // assigning a std::string each time was a measurable part of a small call (issue 26).
  std::string_view state;   // queued | running | completed | failed
  std::string_view thread;  // where it ran: "worker" (the group's thread), "caller" or "waiter"
  std::string_view plan;    // the plan it took (plan_choice.h, callPlanName); empty: not known
  double queuedAtMs = 0;   // since the recorder was created
  double startedAtMs = -1;
  double endedAtMs = -1;
  std::string error;
  FlightShapes shapes;
  int64_t createdUnixNs = 0;  // when it was queued, on the system clock (as torch's entries)
  int64_t timeoutMs = 0;
};

class FlightRecorder {
 public:
  explicit FlightRecorder(size_t capacity = 64);
  // Keeps the last `capacity` entries from now on; 0 keeps none (the recorder is off).
  void setCapacity(size_t capacity);
  // Returns an id used by the updates below. `inputs` and `outputs`: the call's tensors' shapes
  // (none: an entry without shapes). `collective`: its name ("all_reduce"), copied only where
  // it differs from the name of the call whose entry is reused.
  uint64_t recordQueued(uint64_t seq, std::string_view collective, const CallDetail& detail,
                        ShapeList inputs = {}, ShapeList outputs = {}, int64_t timeoutMs = 0);
  uint64_t recordQueued(uint64_t seq, std::string_view collective, const std::string& detail);
  // Whether it keeps anything (TORCH_FR_BUFFER_SIZE=0 turns it off): callers skip gathering
  // what it would drop. Relaxed: a hint, asked on every call; recordQueued decides under the
  // lock.
  bool enabled() const { return on_.load(std::memory_order_relaxed); }
  // `thread`: "worker", "caller" or "waiter" (backend/work_queue.h), a string literal (kept as
  // it is, not copied). `at`: when it happened,
  // for a caller that has just read the clock itself (a read costs tens of ns here; a small
  // collective is a few us).
  void markStarted(uint64_t id, const char* thread = "worker",
                   std::chrono::steady_clock::time_point at = std::chrono::steady_clock::now());
  // `plan`: the plan the call took (callPlanName's static text), or null.
  void markEnded(uint64_t id, const std::string& error,
                 std::chrono::steady_clock::time_point at = std::chrono::steady_clock::now(),
                 const char* plan = nullptr);
  // The entries, oldest first, each with its detail written out.
  std::vector<FlightEntry> snapshot() const;
  // One line per entry, oldest first.
  std::string dump() const;

 private:
  // recordQueued's one body: the detail from its parts, or (parts null) the words as given.
  uint64_t record(uint64_t seq, std::string_view collective, const CallDetail* parts,
                  const std::string* words, ShapeList inputs, ShapeList outputs,
                  int64_t timeoutMs);
  // One kept call: its id, its entry (whose `detail` stays empty here) and the detail's parts,
  // written into a copy of the entry when the recorder is read.
  struct Kept {
    uint64_t id = 0;
    FlightEntry entry;
    CallDetail detail;
  };
  FlightEntry* find(uint64_t id);
  double msSinceOrigin(std::chrono::steady_clock::time_point t) const;
  // The i-th entry from the oldest (i < entries_.size()).
  Kept& at(size_t i) {
    return entries_[(oldest_ + i) % entries_.size()];
  }
  const Kept& at(size_t i) const {
    return entries_[(oldest_ + i) % entries_.size()];
  }
  size_t capacity_;
  // capacity_ > 0, readable without the mutex: enabled() is asked on every call.
  std::atomic<bool> on_{false};
  mutable std::mutex mutex_;
  // A ring of up to capacity_ kept calls; once full, the oldest (at oldest_) is the one the
  // next call overwrites.
  std::vector<Kept> entries_;
  size_t oldest_ = 0;
  uint64_t nextId_ = 0;
  std::chrono::steady_clock::time_point origin_;
};

}  // namespace ring
