// ring's flight recorders in torch's dump format (what torch's fr_trace reads): one pickled
// dict per rank with "version", "pg_config" and "entries", holding every live ring group of the
// process. torch_ring_backend.dump_flight_recorder writes it on request; a failed collective
// writes it once per process when TORCH_FR_DUMP_TEMP_FILE is set, at that prefix followed by
// the global rank, as torch names its dumps (torch_ring_backend/fr_dump.py says more).
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "executor/flight_recorder.h"

namespace ring {

class RingBackend;

// Every RingBackend registers itself for its lifetime, so that one dump holds every group.
void registerGroupForDumps(const RingBackend* group);
void unregisterGroupForDumps(const RingBackend* group);

// The dump, pickled as torch pickles its own.
std::vector<char> flightRecorderDumpBytes();
// Writes the dump to `path` (through a temporary file and a rename); throws on an I/O error.
void writeFlightRecorderDump(const std::string& path);
// After a failed collective of a group whose rank is `globalRank` in the job: the first call
// of the process writes <TORCH_FR_DUMP_TEMP_FILE><globalRank> if that variable is set; later
// calls do nothing (what fails after the first failure is its consequence).
void dumpAfterFailureOnce(int globalRank);

}  // namespace ring
