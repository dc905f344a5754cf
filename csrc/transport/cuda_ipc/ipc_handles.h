// Opening other processes' exported device allocations (CUDA IPC), once per process.
//
// Why a process-wide cache: a handle can be opened only once per process (a second
// cudaIpcOpenMemHandle of the same allocation fails), yet two links of one rank (next and prev
// are the same rank when there are two ranks) or two groups may need the same peer memory.
// Opens are reference-counted; the mapping goes away when the last user closes it.
#pragma once

#include <cstdint>
#include <string>

namespace ring {

// Maps the allocation behind `handle` (64 bytes, a cudaIpcMemHandle_t) into this process on
// the CURRENT device. Returns the device pointer, or null with *error set.
void* openIpcHandle(const uint8_t* handle, std::string* error);

// Drops one reference taken by openIpcHandle; unmaps at the last one. Errors are ignored (this
// runs at teardown, possibly after the driver has begun shutting down).
void closeIpcHandle(void* ptr);

}  // namespace ring
