#include "transport/shm/heartbeat.h"

#include <pthread.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace ring {
namespace {

struct BeatState {
  std::mutex mutex;
  std::condition_variable wake;
  std::vector<std::atomic<uint64_t>*> words;
  // The running beat thread of this process, or null. It runs while `generation` keeps the
  // value it started with: the last detach moves it on and joins the thread, so that no
  // thread of ours outlives the process's last group (destroy_process_group leaves none).
  std::thread* thread = nullptr;
  uint64_t generation = 0;
};

BeatState& state();

// fork() copies the mutex as it is and none of the threads: the child takes it unlocked,
// forgets the parent's words (they are the parent's heartbeat, not the child's) and its thread
// (the object is left behind: it has no thread to join), and starts a beat thread of its own
// if it attaches a word.
void lockBeforeFork() { state().mutex.lock(); }
void unlockInParent() { state().mutex.unlock(); }
void resetInChild() {
  BeatState& s = state();
  s.words.clear();
  s.thread = nullptr;
  ++s.generation;
  s.mutex.unlock();
}

BeatState& state() {
  // Never destroyed: a forked child's copy of a thread object is abandoned, not destroyed.
  static BeatState* s = [] {
    auto* b = new BeatState;
    pthread_atfork(lockBeforeFork, unlockInParent, resetInChild);
    return b;
  }();
  return *s;
}

void beatWhileCurrent(BeatState* s, uint64_t generation) {
  pthread_setname_np(pthread_self(), "ring-heartbeat");
  std::unique_lock<std::mutex> lock(s->mutex);
  while (s->generation == generation) {
    // Relaxed: the word is only ever compared with itself by the peers; it guards no data.
    for (std::atomic<uint64_t>* w : s->words) w->fetch_add(1, std::memory_order_relaxed);
    s->wake.wait_for(lock, kBeatInterval);
  }
}

}  // namespace

void attachHeartbeat(std::atomic<uint64_t>* word) {
  BeatState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.words.push_back(word);
  if (s.thread == nullptr) s.thread = new std::thread(beatWhileCurrent, &s, s.generation);
}

void detachHeartbeat(std::atomic<uint64_t>* word) {
  BeatState& s = state();
  std::thread* last = nullptr;
  {
    // The thread writes the words only while holding the mutex: once it is ours, it is done.
    std::lock_guard<std::mutex> lock(s.mutex);
    s.words.erase(std::remove(s.words.begin(), s.words.end(), word), s.words.end());
    if (s.words.empty() && s.thread != nullptr) {
      ++s.generation;
      last = s.thread;
      s.thread = nullptr;
      s.wake.notify_all();
    }
  }
  if (last != nullptr) {
    last->join();
    delete last;
  }
}

}  // namespace ring
