#include "runtime.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace cudaemu {
namespace detail {
namespace {

std::atomic<Runtime*> gRuntime{nullptr};
// Bumped in a forked child: thread states of an older generation start afresh.
std::atomic<uint64_t> gGeneration{1};
// What a forked child inherits from its parent's runtime.
Config* gInheritedConfig = nullptr;
std::map<std::string, cudaError_t>* gInheritedFailures = nullptr;
std::map<std::string, std::chrono::milliseconds>* gInheritedDelays = nullptr;

// Why a fresh runtime in a forked child: the parent's stream threads do not exist there, and
// any of the parent's mutexes may have been held by one of them at the fork. The old state is
// left untouched (leaked). Real CUDA refuses every call in such a child; the emulator lets
// tests fork rank processes cheaply instead, each starting as a new process would.
void afterForkInChild() {
  Runtime* old = gRuntime.exchange(nullptr);
  if (old != nullptr) {
    gInheritedConfig = new Config(old->config);
    gInheritedFailures = new std::map<std::string, cudaError_t>(old->failures);
    gInheritedDelays = new std::map<std::string, std::chrono::milliseconds>(old->delays);
  }
  gGeneration.fetch_add(1);
}

struct ThreadState {
  uint64_t generation = 0;
  int device = 0;
  cudaError_t lastError = cudaSuccess;
  int captureMode = cudaStreamCaptureModeGlobal;
  // The per-thread default stream of each device, made on first use.
  std::map<int, std::shared_ptr<StreamCore>> perThread;
  ~ThreadState() {
    // The thread is gone: its per-thread streams finish their work, then their threads exit.
    for (auto& entry : perThread) entry.second->retire();
  }
};

ThreadState& threadState() {
  thread_local ThreadState state;
  const uint64_t now = gGeneration.load();
  if (state.generation != now) {
    // A forked child: the parent's streams have no threads here; forget them.
    state.perThread.clear();
    state.generation = now;
    state.device = 0;
    state.lastError = cudaSuccess;
    state.captureMode = cudaStreamCaptureModeGlobal;
  }
  return state;
}

int64_t envInt(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long long n = std::strtoll(v, &end, 10);
  if (end == v || *end != '\0' || n < 0) {
    fatal(std::string(name) + "='" + v + "' is not a non-negative integer");
  }
  return n;
}

}  // namespace

DeviceState::DeviceState(int o, int p, size_t stackBytes, int slotCount)
    : ordinal(o), physical(p), slots(slotCount), stackLimit(stackBytes) {}

std::vector<int> visiblePhysicalDevices(const Config& c) {
  std::vector<int> out;
  if (c.visibleDevices.empty()) {
    for (int d = 0; d < c.devices; ++d) out.push_back(d);
    return out;
  }
  // CUDA's rule: indices in the list's order; the first invalid one ends the list.
  size_t at = 0;
  while (at <= c.visibleDevices.size()) {
    size_t comma = c.visibleDevices.find(',', at);
    if (comma == std::string::npos) comma = c.visibleDevices.size();
    const std::string item = c.visibleDevices.substr(at, comma - at);
    char* end = nullptr;
    const long d = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || d < 0 || d >= c.devices ||
        std::find(out.begin(), out.end(), static_cast<int>(d)) != out.end()) {
      break;
    }
    out.push_back(static_cast<int>(d));
    at = comma + 1;
  }
  return out;
}

Runtime::Runtime(const Config& c, std::map<std::string, cudaError_t> f,
                 std::map<std::string, std::chrono::milliseconds> d)
    : config(c), failures(std::move(f)), delays(std::move(d)) {
  const std::vector<int> visible = visiblePhysicalDevices(config);
  for (size_t d = 0; d < visible.size(); ++d) {
    devices.push_back(std::make_unique<DeviceState>(static_cast<int>(d), visible[d],
                                                    config.initialStackBytes,
                                                    config.smsPerDevice * config.blocksPerSm));
  }
}

// "api:number,api:number" (CUDA_EMULATOR_FAIL, CUDA_EMULATOR_DELAY_MS): each api with its number.
std::map<std::string, long> apiNumbers(const char* variable) {
  std::map<std::string, long> out;
  const char* v = std::getenv(variable);
  if (v == nullptr) return out;
  const std::string list(v);
  size_t at = 0;
  while (at < list.size()) {
    size_t comma = list.find(',', at);
    if (comma == std::string::npos) comma = list.size();
    const std::string item = list.substr(at, comma - at);
    const size_t colon = item.find(':');
    char* end = nullptr;
    const long n = colon == std::string::npos ? 0 : std::strtol(item.c_str() + colon + 1, &end, 10);
    if (colon == std::string::npos || colon == 0 || colon + 1 == item.size() || *end != '\0' ||
        n < 0) {
      fatal(std::string(variable) + " item '" + item + "' is not <api>:<non-negative number>");
    }
    out[item.substr(0, colon)] = n;
    at = comma + 1;
  }
  return out;
}

Config configFromEnvironment(std::map<std::string, cudaError_t>* failures,
                             std::map<std::string, std::chrono::milliseconds>* delays) {
  Config c;
  c.devices = static_cast<int>(envInt("CUDA_EMULATOR_DEVICES", c.devices));
  c.smsPerDevice = static_cast<int>(envInt("CUDA_EMULATOR_SMS", c.smsPerDevice));
  c.blocksPerSm = static_cast<int>(envInt("CUDA_EMULATOR_BLOCKS_PER_SM", c.blocksPerSm));
  c.kernelLocalBytes = static_cast<size_t>(envInt("CUDA_EMULATOR_LOCAL_BYTES", 0));
  c.initialStackBytes = static_cast<size_t>(envInt("CUDA_EMULATOR_STACK_BYTES", 1024));
  c.peerAccess = envInt("CUDA_EMULATOR_PEER_ACCESS", 1) != 0;
  c.launchDelay = std::chrono::milliseconds(envInt("CUDA_EMULATOR_LAUNCH_DELAY_MS", 0));
  c.hostToDeviceCopyDelay =
      std::chrono::milliseconds(envInt("CUDA_EMULATOR_H2D_COPY_DELAY_MS", 0));
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) c.visibleDevices = v;
  for (const auto& [api, code] : apiNumbers("CUDA_EMULATOR_FAIL")) {
    (*failures)[api] = static_cast<cudaError_t>(code);
  }
  for (const auto& [api, ms] : apiNumbers("CUDA_EMULATOR_DELAY_MS")) {
    (*delays)[api] = std::chrono::milliseconds(ms);
  }
  return c;
}

Runtime& runtime() {
  Runtime* rt = gRuntime.load(std::memory_order_acquire);
  if (rt != nullptr) return *rt;
  static std::once_flag registered;
  std::call_once(registered, [] { pthread_atfork(nullptr, nullptr, &afterForkInChild); });
  Runtime* fresh;
  if (gInheritedConfig != nullptr) {
    fresh = new Runtime(*gInheritedConfig, *gInheritedFailures, *gInheritedDelays);
  } else {
    std::map<std::string, cudaError_t> failures;
    std::map<std::string, std::chrono::milliseconds> delays;
    Config c = configFromEnvironment(&failures, &delays);
    fresh = new Runtime(c, std::move(failures), std::move(delays));
  }
  Runtime* expected = nullptr;
  if (!gRuntime.compare_exchange_strong(expected, fresh, std::memory_order_acq_rel)) {
    delete fresh;  // another thread made it first
    return *expected;
  }
  return *fresh;
}

DeviceState* deviceOf(Runtime& rt, int ordinal) {
  if (ordinal < 0 || ordinal >= static_cast<int>(rt.devices.size())) return nullptr;
  return rt.devices[static_cast<size_t>(ordinal)].get();
}

int& currentDevice() { return threadState().device; }

int& captureInteractionMode() { return threadState().captureMode; }

std::shared_ptr<StreamCore> perThreadStream(DeviceState& device) {
  std::shared_ptr<StreamCore>& s = threadState().perThread[device.ordinal];
  if (s == nullptr) {
    s = std::make_shared<StreamCore>(device.ordinal, /*blocking=*/true, /*legacy=*/false);
    s->start();
    device.streams.push_back(s);
  }
  return s;
}

cudaError_t fail(cudaError_t error) {
  // cudaErrorNotReady is a status, not an error: it is never kept as the last error.
  if (error != cudaSuccess && error != cudaErrorNotReady) threadState().lastError = error;
  return error;
}

cudaError_t lastError(bool clear) {
  ThreadState& t = threadState();
  const cudaError_t e = t.lastError;
  if (clear) t.lastError = cudaSuccess;
  return e;
}

// The calls that work without a context: they ask about devices, errors, versions or the
// driver's entry points (cudaDriverGetVersion answers even with no driver). Every other call
// (streams, events, memory, launches, limits, IPC) makes the thread's current device's primary
// context first, if it has none: so a thread that never set its device creates one on device
// 0 (the CUDA Runtime API, "Initialization": the primary context is created on first use;
// cudaSetDevice creates it on its device since CUDA 12.0, see there).
bool needsContext(const char* api) {
  static const std::set<std::string> contextFree = {
      "cudaGetDevice", "cudaGetDeviceCount", "cudaSetDevice", "cudaGetDeviceProperties",
      "cudaDeviceGetAttribute", "cudaDeviceCanAccessPeer", "cudaGetLastError",
      "cudaPeekAtLastError", "cudaGetErrorString", "cudaGetErrorName", "cudaDriverGetVersion",
      "cudaRuntimeGetVersion", "cudaDeviceGetPCIBusId", "cudaGetDriverEntryPointByVersion"};
  return contextFree.count(api) == 0;
}

void noteContext(int device) {
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mutex);
  rt.contexts.insert(device);
}

cudaError_t enter(const char* api) {
  Runtime& rt = runtime();
  std::chrono::milliseconds delay{0};
  cudaError_t injected = cudaSuccess;
  const int device = threadState().device;
  {
    std::lock_guard<std::mutex> lock(rt.mutex);
    ++rt.calls[api];
    if (needsContext(api)) rt.contexts.insert(device);
    auto f = rt.failures.find(api);
    if (f != rt.failures.end()) injected = f->second;
    auto d = rt.delays.find(api);
    if (d != rt.delays.end()) delay = d->second;
  }
  if (delay.count() > 0) std::this_thread::sleep_for(delay);
  if (injected != cudaSuccess) return injected;
  return captureRulesAllow(api);
}

void fatal(const std::string& what) {
  std::fprintf(stderr, "cuda emulator: FATAL (pid %d): %s\n", static_cast<int>(getpid()),
               what.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace detail

// ---- test controls (cuda_emulator.h) -----------------------------------------------------------

Config config() {
  detail::Runtime& rt = detail::runtime();
  std::lock_guard<std::mutex> lock(rt.mutex);
  return rt.config;
}

void setConfig(const Config& c) {
  detail::Runtime& rt = detail::runtime();
  std::lock_guard<std::mutex> lock(rt.mutex);
  const std::vector<int> visible = detail::visiblePhysicalDevices(c);
  if (visible != detail::visiblePhysicalDevices(rt.config)) {
    if (!rt.streams.empty() || !rt.events.empty() || rt.counters.liveDeviceAllocations != 0 ||
        rt.counters.liveHostAllocations != 0 || rt.counters.liveIpcMappings != 0) {
      throw std::logic_error("cudaemu::setConfig: the devices change only while no stream, "
                             "event or allocation exists");
    }
    // The old devices are kept alive (their legacy streams may hold threads); they are no
    // longer reachable by ordinal.
    static std::vector<std::unique_ptr<detail::DeviceState>> retired;
    for (auto& d : rt.devices) retired.push_back(std::move(d));
    rt.devices.clear();
    for (size_t d = 0; d < visible.size(); ++d) {
      rt.devices.push_back(std::make_unique<detail::DeviceState>(
          static_cast<int>(d), visible[d], c.initialStackBytes, 0));
    }
  }
  rt.config = c;
  for (auto& d : rt.devices) {
    std::lock_guard<std::mutex> deviceLock(d->mutex);
    d->slots = c.smsPerDevice * c.blocksPerSm;
    d->roomFreed.notify_all();
  }
}

void setKernelLocalBytes(const void* kernel, size_t bytes) {
  detail::Runtime& rt = detail::runtime();
  std::lock_guard<std::mutex> lock(rt.mutex);
  rt.kernelLocalBytes[kernel] = bytes;
}

void failCall(const std::string& api, cudaError_t error) {
  detail::Runtime& rt = detail::runtime();
  std::lock_guard<std::mutex> lock(rt.mutex);
  rt.failures[api] = error;
}

void delayCall(const std::string& api, std::chrono::milliseconds delay) {
  detail::Runtime& rt = detail::runtime();
  std::lock_guard<std::mutex> lock(rt.mutex);
  rt.delays[api] = delay;
}

void clearFailures() {
  detail::Runtime& rt = detail::runtime();
  std::lock_guard<std::mutex> lock(rt.mutex);
  rt.failures.clear();
  rt.delays.clear();
}

Counters counters() {
  detail::Runtime& rt = detail::runtime();
  std::lock_guard<std::mutex> lock(rt.mutex);
  return rt.counters;
}

bool hasContext(int device) {
  detail::Runtime& rt = detail::runtime();
  std::lock_guard<std::mutex> lock(rt.mutex);
  return rt.contexts.count(device) != 0;
}

uint64_t calls(const std::string& api) {
  detail::Runtime& rt = detail::runtime();
  std::lock_guard<std::mutex> lock(rt.mutex);
  auto it = rt.calls.find(api);
  return it == rt.calls.end() ? 0 : it->second;
}

int residentBlocks(int device) {
  detail::Runtime& rt = detail::runtime();
  detail::DeviceState* d = nullptr;
  {
    std::lock_guard<std::mutex> lock(rt.mutex);
    d = detail::deviceOf(rt, device);
  }
  if (d == nullptr) return 0;
  std::lock_guard<std::mutex> lock(d->mutex);
  return d->resident;
}

}  // namespace cudaemu
