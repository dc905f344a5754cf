// A process's heartbeat for the other ranks of its host. Why: a peer that exits is seen at
// once (its pid is gone), but one that is stopped (SIGSTOP, a paused container, a debugger) or
// starved keeps its pid, and a wait for it would last the group's whole timeout. One thread
// per process, which sleeps between beats and needs neither the GIL nor the caller's thread,
// adds one to every attached word each kBeatInterval; a peer that sees a word unchanged for
// TORCH_RING_LINK_SILENCE_MS knows the process is not running (shm_transport.cc). A process
// that is merely busy or asleep in Python keeps beating.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace ring {

constexpr std::chrono::milliseconds kBeatInterval{250};

// Starts beating `word` (in this process's own shared segment) within one interval; the beat
// thread ("ring-heartbeat") starts with the process's first word and ends with its last.
// Thread-safe; a forked child keeps none of its parent's words and beats only those it
// attaches itself.
void attachHeartbeat(std::atomic<uint64_t>* word);
// Stops beating `word`: when this returns the thread no longer touches it (its memory may go);
// the last word's detach also joins the thread. A word never attached is no error.
void detachHeartbeat(std::atomic<uint64_t>* word);

}  // namespace ring
