// A group's completion hook (torch's ProcessGroup._register_on_completion_hook), run on a thread
// of its own, once per finished call, in the order the calls finished: as ProcessGroupNCCL runs
// its hooks.
//
// Why a thread: the hook is user code (a Python function, under the GIL), and the threads that
// learn a call's outcome are the group's runners (the caller, the worker, a waiter) and the
// CUDA watchdog. A hook that takes its time on one of them would hold up the group's next
// collective, or the watchdog's timeouts and health checks, for as long as it runs.
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace ring {

class CompletionHooks {
 public:
  using Hook = std::function<void(std::shared_ptr<c10d::WorkInfo>)>;

  // Starts the thread. `rank` and `group` name the group in the warnings.
  CompletionHooks(Hook hook, int rank, std::string group);
  // Stops the thread. A hook that is running finishes on its own (the thread is detached then:
  // it may wait for the GIL that the thread destroying the group holds); hooks not yet started
  // are dropped, with a warning. destroy_process_group calls waitIdle first, so none are.
  ~CompletionHooks();
  CompletionHooks(const CompletionHooks&) = delete;
  CompletionHooks& operator=(const CompletionHooks&) = delete;

  // Queues the hook's call for one finished call. Never blocks on the hook.
  void post(std::shared_ptr<c10d::WorkInfo> info);
  // Blocks until every call posted so far has returned from the hook (torch's
  // _wait_for_pending_works, before the interpreter may go). As long as the user's hook takes.
  void waitIdle();

 private:
  // Shared with the thread, which may outlive this object (see the destructor). The hook lives
  // here, not in the thread's frame: a Python hook's last reference must be dropped with the
  // GIL, so it goes with this object on the thread that destroys the group (the thread only
  // drops it when detached).
  struct State {
    explicit State(Hook h) : hook(std::move(h)) {}
    const Hook hook;
    std::mutex mutex;
    std::condition_variable changed;
    std::deque<std::shared_ptr<c10d::WorkInfo>> pending;
    bool running = false;  // a hook call is under way
    bool stopping = false;
  };
  static void loop(std::shared_ptr<State> state, int rank, std::string group);

  std::shared_ptr<State> state_;
  std::thread thread_;
};

}  // namespace ring
