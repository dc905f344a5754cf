// A flight-recorder dump on a signal, for a job that hangs with no error to trigger one: with
// TORCH_RING_FR_DUMP_SIGNAL=SIGUSR1 (or any signal name or number), `kill -USR1 <pid>` makes
// the process write its dump at TORCH_FR_DUMP_TEMP_FILE (torch's default
// /tmp/nccl_trace_rank_) followed by its global rank, while its collectives stay stuck.
#pragma once

#include <string>

namespace ring {

// The signal TORCH_RING_FR_DUMP_SIGNAL names: 0 when unset or empty; throws RingError naming
// the value when it is not a signal this process may catch.
int dumpSignalFromEnv(const char* value);

// Called by every RingBackend at creation: the first call of the process with the variable set
// installs the handler and starts the thread that writes the dumps. Later calls do nothing.
void armFlightRecorderDumpOnSignal(int globalRank);

}  // namespace ring
