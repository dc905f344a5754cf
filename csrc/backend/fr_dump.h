// ring's flight recorders in torch's dump format (what torch's fr_trace reads): one pickled
// dict per rank with "version", "pg_config" and "entries", holding every live ring group of the
// process. torch_ring_backend.dump_flight_recorder writes it on request; a failed collective
// writes it once per process when TORCH_FR_DUMP_TEMP_FILE is set, at that prefix followed by
// the global rank, as torch names its dumps (torch_ring_backend/fr_dump.py says more).
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <string>
#include <vector>

#include "executor/flight_recorder.h"

namespace ring {

// A group's entry in the dump's pg_config: torch's name for it, its description, the global
// ranks of its members. Read when a dump is written (torch sets a description after the group
// is made).
struct DumpedGroupConfig {
  std::string uid;
  std::string desc;  // "" is written "undefined", as torch writes a group without one
  std::vector<int64_t> globalRanks;
};

// Every group registers its flight recorder and how to read its config for its lifetime, so
// that one dump holds every group of the process; `owner` names the registration. Why a
// recorder and a function rather than the group: the dump needs nothing else of it, and so
// depends on nothing above the recorder.
void registerGroupForDumps(const void* owner, const FlightRecorder* recorder,
                           std::function<DumpedGroupConfig()> config);
void unregisterGroupForDumps(const void* owner);

// The dump, pickled as torch pickles its own.
std::vector<char> flightRecorderDumpBytes();
// Writes the dump to `path` (through a temporary file and a rename); throws on an I/O error.
void writeFlightRecorderDump(const std::string& path);
// After a failed collective of a group whose rank is `globalRank` in the job: the first call
// of the process writes <TORCH_FR_DUMP_TEMP_FILE><globalRank> if that variable is set; later
// calls do nothing (what fails after the first failure is its consequence).
void dumpAfterFailureOnce(int globalRank);

}  // namespace ring
