// The process heartbeat of transport/shm/heartbeat.h: an attached word advances about every
// kBeatInterval without any call from its owner, a detached one is left alone from the moment
// detach returns, and a forked child beats only the words it attaches itself (it inherited its
// parent's mappings, not its thread, and must never stand in for the parent).
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "transport/shm/heartbeat.h"

namespace ring {
namespace {

using std::chrono::milliseconds;

TEST(Heartbeat, AnAttachedWordAdvancesOnItsOwnAndADetachedOneStops) {
  std::atomic<uint64_t> word{0};
  attachHeartbeat(&word);
  std::this_thread::sleep_for(kBeatInterval * 4);
  const uint64_t beats = word.load();
  // Four intervals: at least two beats even on a loaded machine, never more than five.
  EXPECT_GE(beats, 2u);
  EXPECT_LE(beats, 5u);
  detachHeartbeat(&word);
  const uint64_t after = word.load();
  std::this_thread::sleep_for(kBeatInterval * 3);
  EXPECT_EQ(word.load(), after);
}

// A word in memory shared with a forked child: the parent stops beating it, the child (which
// inherited the registration's memory but not the thread) must not beat it either, and a word
// the child attaches itself does advance.
TEST(HeartbeatProcesses, AForkedChildBeatsOnlyWhatItAttaches) {
  void* mem = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  auto* parentWord = new (mem) std::atomic<uint64_t>(0);
  auto* childWord = new (static_cast<char*>(mem) + 64) std::atomic<uint64_t>(0);
  attachHeartbeat(parentWord);
  std::this_thread::sleep_for(kBeatInterval * 2);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    attachHeartbeat(childWord);
    std::this_thread::sleep_for(kBeatInterval * 8);
    _exit(0);
  }
  detachHeartbeat(parentWord);
  const uint64_t parentAfter = parentWord->load();
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(parentWord->load(), parentAfter) << "the child beat its parent's word";
  EXPECT_GE(childWord->load(), 3u) << "the child's own word did not advance";
  munmap(mem, 4096);
}

}  // namespace
}  // namespace ring
