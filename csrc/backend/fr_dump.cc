#include "backend/fr_dump.h"

#include <ATen/core/Dict.h>
#include <ATen/core/ivalue.h>
#include <torch/csrc/jit/serialization/pickler.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>

#include "common/errors.h"
#include "common/knob_table.h"
#include "common/logging.h"

namespace ring {
namespace {

// The format version whose fields are written here (torch 2.14 and 2.15 write "2.10").
constexpr const char* kFormatVersion = "2.10";

struct Registration {
  const FlightRecorder* recorder;
  std::function<DumpedGroupConfig()> config;
};
std::mutex gGroupsMutex;
std::map<const void*, Registration>& groups() {
  static std::map<const void*, Registration> g;
  return g;
}

using GenericDict = c10::Dict<c10::IValue, c10::IValue>;
GenericDict newDict() { return GenericDict(c10::AnyType::get(), c10::AnyType::get()); }

c10::IValue sizesOf(const std::vector<std::vector<int64_t>>& sizes) {
  c10::impl::GenericList out(c10::AnyType::get());
  for (const auto& s : sizes) out.push_back(c10::IValue(s));
  return out;
}

c10::IValue stringsOf(const std::vector<std::string_view>& v) {
  c10::impl::GenericList out(c10::AnyType::get());
  for (const auto& s : v) out.push_back(c10::IValue(std::string(s)));
  return out;
}

// torch's entry states: a failed collective stays "started", as torch leaves one that never
// completed.
const char* torchState(std::string_view state) {
  if (state == "completed") return "completed";
  if (state == "running" || state == "failed") return "started";
  return "scheduled";
}

std::string ranksText(const std::vector<int64_t>& ranks) {
  std::string s = "[";
  for (size_t i = 0; i < ranks.size(); ++i) s += strCat(i ? ", " : "", ranks[i]);
  return s + "]";
}

}  // namespace

void registerGroupForDumps(const void* owner, const FlightRecorder* recorder,
                           std::function<DumpedGroupConfig()> config) {
  std::lock_guard<std::mutex> lock(gGroupsMutex);
  groups()[owner] = Registration{recorder, std::move(config)};
}

void unregisterGroupForDumps(const void* owner) {
  std::lock_guard<std::mutex> lock(gGroupsMutex);
  groups().erase(owner);
}

std::vector<char> flightRecorderDumpBytes() {
  GenericDict pgConfig = newDict();
  c10::impl::GenericList entries(c10::AnyType::get());
  {
    // Held while reading: a group that goes waits in its destructor until the dump is done.
    std::lock_guard<std::mutex> lock(gGroupsMutex);
    int64_t pgId = 0;
    for (const auto& [owner, g] : groups()) {
      const DumpedGroupConfig config = g.config();
      const std::string& uid = config.uid;
      const std::string desc = config.desc.empty() ? "undefined" : config.desc;
      GenericDict cfg = newDict();
      cfg.insert("name", uid);
      cfg.insert("desc", desc);
      cfg.insert("ranks", ranksText(config.globalRanks));
      pgConfig.insert(uid, cfg);
      for (const FlightEntry& e : g.recorder->snapshot()) {
        const bool started = e.startedAtMs >= 0;
        const bool completed = e.state == "completed";
        auto atMs = [&](double ms) {
          return c10::IValue(e.createdUnixNs + static_cast<int64_t>((ms - e.queuedAtMs) * 1e6));
        };
        GenericDict d = newDict();
        d.insert("record_id", static_cast<int64_t>(entries.size()));
        d.insert("pg_id", pgId);
        d.insert("process_group", c10::ivalue::Tuple::create(uid, desc));
        // torch counts a group's collectives from 1; ring's sequence starts at 0.
        d.insert("collective_seq_id", static_cast<int64_t>(e.seq + 1));
        d.insert("p2p_seq_id", static_cast<int64_t>(0));
        d.insert("op_id", static_cast<int64_t>(e.seq + 1));
        d.insert("profiling_name", "ring:" + e.collective);
        d.insert("time_created_ns", e.createdUnixNs);
        d.insert("duration_ms", started && e.endedAtMs >= 0 ? c10::IValue(e.endedAtMs - e.startedAtMs)
                                                           : c10::IValue());
        d.insert("input_sizes", sizesOf(e.shapes.inputSizes));
        d.insert("input_dtypes", stringsOf(e.shapes.inputDtypes));
        d.insert("output_sizes", sizesOf(e.shapes.outputSizes));
        d.insert("output_dtypes", stringsOf(e.shapes.outputDtypes));
        d.insert("state", torchState(e.state));
        d.insert("time_discovered_started_ns", started ? atMs(e.startedAtMs) : c10::IValue());
        d.insert("time_discovered_completed_ns", completed ? atMs(e.endedAtMs) : c10::IValue());
        d.insert("retired", completed || e.state == "failed");
        d.insert("timeout_ms", e.timeoutMs);
        d.insert("is_p2p", false);
        d.insert("frames", c10::impl::GenericList(c10::AnyType::get()));
        d.insert("thread_name",
                 std::string(e.thread == "caller" || e.thread == "waiter" ? e.thread
                                                                          : "ring-worker"));
        d.insert("error", e.error);
        entries.push_back(d);
      }
      ++pgId;
    }
  }
  GenericDict dump = newDict();
  dump.insert("version", kFormatVersion);
  dump.insert("comm_lib_version", "ring");
  dump.insert("pg_config", pgConfig);
  dump.insert("pg_status", newDict());
  dump.insert("entries", entries);
  // A plain pickle, as torch writes its own dumps: no tensor table (so no persistent ids) and
  // untagged containers, so that Python's pickle.load reads it without torch's unpickler.
  std::vector<char> out;
  torch::jit::Pickler pickler([&](const char* data, size_t size) { out.insert(out.end(), data, data + size); },
                              nullptr, nullptr, nullptr, nullptr, /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(dump);
  pickler.stop();
  return out;
}

void writeFlightRecorderDump(const std::string& path) {
  const std::vector<char> bytes = flightRecorderDumpBytes();
  const std::string tmp = strCat(path, ".tmp", getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) throw RingError(strCat("ring: cannot write the flight recorder dump ", tmp));
  const size_t wrote = std::fwrite(bytes.data(), 1, bytes.size(), f);
  const bool closed = std::fclose(f) == 0;
  if (wrote != bytes.size() || !closed || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw RingError(strCat("ring: writing the flight recorder dump ", path, " failed"));
  }
}

void dumpAfterFailureOnce(int globalRank) {
  // Off unless the user names where dumps go: a failure must not litter /tmp by default.
  const char* prefix = knobText("TORCH_FR_DUMP_TEMP_FILE");
  if (prefix == nullptr || *prefix == '\0') return;
  static std::atomic<bool> dumped{false};
  if (dumped.exchange(true)) return;
  const std::string path = strCat(prefix, globalRank);
  try {
    writeFlightRecorderDump(path);
    RING_LOG(kLogWarn, "flight recorder dump written to ", path,
             " (python -m torch_ring_backend.trace on the folder of every rank's dump)");
  } catch (const std::exception& e) {
    RING_LOG(kLogWarn, e.what());
  }
}

}  // namespace ring
