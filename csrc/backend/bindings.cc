// Python bindings: the RingBackend class (so torch.distributed can hold it as a Backend) and
// its flight recorder. Registration of the "ring" name happens in torch_ring_backend/__init__.py.
#include <pybind11/chrono.h>
#include <pybind11/stl.h>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/csrc/utils/pybind.h>

#include <map>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "backend/fr_dump.h"
#include "backend/ring_backend.h"
#include "common/knob_table.h"

#ifdef RING_WITH_CUDA
#include "backend/cuda_collectives.h"
#include "backend/staging.h"
#endif

namespace py = pybind11;

#if RING_TORCH_AT_LEAST(2, 15)
namespace {

// What the tests' completion hooks heard, by hook id: (completion key, milliseconds or none).
// torch 2.15 gives the keyed hooks no Python call (their consumers are C++, as torch's flight
// recorder hook), so a test registers this one through the same virtual call they use.
struct HeardCompletions {
  std::mutex mutex;
  std::map<int64_t, std::vector<std::pair<uint64_t, std::optional<float>>>> byHook;
};

HeardCompletions& heardCompletions() {
  static HeardCompletions* heard = new HeardCompletions;  // never destroyed: hooks may run late
  return *heard;
}

}  // namespace
#endif

PYBIND11_MODULE(_C, m) {
  m.doc() = "torch_ring_backend native module";
  // Backend's Python type must be registered before we derive from it.
  py::module_::import("torch.distributed");

  // torch_ring_backend.RingOptions: per-group settings (pg_options of init_process_group,
  // new_group, split_group, shrink_group).
  py::class_<ring::RingOptions, c10d::Backend::Options, c10::intrusive_ptr<ring::RingOptions>>(
      m, "RingOptions",
      "Options of a 'ring' group: timeout, and the transport knobs that otherwise come from "
      "TORCH_RING_TRANSPORT / TORCH_RING_SLOT_BYTES / TORCH_RING_SLOTS.")
      .def(py::init([](std::chrono::milliseconds timeout, std::string transport, int64_t slotBytes,
                       int slots) {
             auto o = c10::make_intrusive<ring::RingOptions>(timeout);
             o->transport = std::move(transport);
             o->slotBytes = slotBytes;
             o->slots = slots;
             return o;
           }),
           py::arg("timeout") = ring::kRingDefaultTimeout, py::arg("transport") = "",
           py::arg("slot_bytes") = 0, py::arg("slots") = 0)
      .def_readwrite("transport", &ring::RingOptions::transport)
      .def_readwrite("slot_bytes", &ring::RingOptions::slotBytes)
      .def_readwrite("slots", &ring::RingOptions::slots)
#ifdef C10D_BACKEND_HAS_RECONFIGURE
      // torch 2.14's enable_reconfigure: no links until dist._reconfigure names the members.
      .def_readwrite("enable_reconfigure", &ring::RingOptions::enable_reconfigure)
#endif
      ;

  py::class_<ring::RingBackend, c10d::Backend, c10::intrusive_ptr<ring::RingBackend>>(
      m, "RingBackend")
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       std::chrono::milliseconds timeout, std::string groupName) {
             return c10::make_intrusive<ring::RingBackend>(store, rank, size, timeout,
                                                           std::move(groupName));
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
           py::arg("group_name") = "default",
           // Set-up waits on the store for every peer: never while holding the GIL.
           py::call_guard<py::gil_scoped_release>())
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       const c10::intrusive_ptr<ring::RingOptions>& options) {
             return c10::make_intrusive<ring::RingBackend>(store, rank, size, options);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("options"),
           py::call_guard<py::gil_scoped_release>())
      // new_group on a default group with a bound device asks the non-members of the new group
      // to take part in a "no color" split (NCCL's communicator split needs every rank); the
      // ring's split involves only the members, so there is nothing to do here.
      .def("perform_nocolor_split", [](ring::RingBackend&, const at::Device&) {},
           py::arg("device"))
      .def_property_readonly("group_name", &ring::RingBackend::groupName)
      // torch_ring_backend.inference_all_reduce. The GIL is released: the call may wait for
      // its peers.
      .def("_all_reduce_now", &ring::RingBackend::allReduceNow, py::arg("tensor"), py::arg("op"),
           py::call_guard<py::gil_scoped_release>())
      // What torch.distributed._time_estimator calls on a backend that supports it.
#if RING_TORCH_AT_LEAST(2, 15)
      // Tests: a keyed completion hook that records what it hears (heardCompletions), through
      // c10d::Backend's virtual calls.
      .def("_supports_completion_hooks",
           [](const ring::RingBackend& self) {
             return static_cast<const c10d::Backend&>(self).supportsCompletionHooks();
           })
      .def("_record_completions",
           [](ring::RingBackend& self, int64_t id) {
             static_cast<c10d::Backend&>(self).registerCompletionHook(
                 id, [id](const c10d::CompletionHookArgs& args) {
                   HeardCompletions& heard = heardCompletions();
                   std::lock_guard<std::mutex> lock(heard.mutex);
                   heard.byHook[id].emplace_back(args.completionKey, args.duration_ms);
                 });
           },
           py::arg("hook_id"))
      .def("_unregister_completion_hook",
           [](ring::RingBackend& self, int64_t id) {
             static_cast<c10d::Backend&>(self).unregisterCompletionHook(id);
           },
           py::arg("hook_id"))
#endif
      .def("_start_time_estimate", &ring::RingBackend::startTimeEstimate)
      .def("_end_time_estimate", &ring::RingBackend::endTimeEstimate)
      .def(
          "flight_recorder",
          [](const ring::RingBackend& self) {
            py::list out;
            for (const auto& e : self.flightRecorder().snapshot()) {
              py::dict d;
              d["seq"] = e.seq;
              d["collective"] = e.collective;
              d["detail"] = e.detail;
              d["state"] = std::string(e.state);
              d["thread"] = std::string(e.thread);
              d["plan"] = std::string(e.plan);
              d["queued_ms"] = e.queuedAtMs;
              d["started_ms"] = e.startedAtMs;
              d["ended_ms"] = e.endedAtMs;
              d["error"] = e.error;
              d["input_sizes"] = e.shapes.inputSizes;
              d["output_sizes"] = e.shapes.outputSizes;
              d["input_dtypes"] = e.shapes.inputDtypes;
              d["output_dtypes"] = e.shapes.outputDtypes;
              d["created_ns"] = e.createdUnixNs;
              d["timeout_ms"] = e.timeoutMs;
              out.append(d);
            }
            return out;
          },
          "The last collectives of this group on this rank, oldest first.")
      .def(
          "straggler_report",
          [](const ring::RingBackend& self, double thresholdMs) {
            const ring::StragglerReport r = self.stragglerReport(thresholdMs);
            py::list ranks;
            for (const auto& s : r.ranks) {
              py::dict d;
              d["rank"] = s.rank;
              d["last_in"] = s.lastIn;
              d["median_ms"] = s.medianMs;
              d["p90_ms"] = s.p90Ms;
              d["max_ms"] = s.maxMs;
              ranks.append(d);
            }
            py::dict out;
            out["collectives"] = r.collectives;
            out["threshold_ms"] = r.thresholdMs;
            out["ranks"] = ranks;
            out["stragglers"] = r.stragglers;
            out["failure"] = r.failure;
            out["text"] = r.describe();
            return out;
          },
          py::arg("threshold_ms"),
          "Which ranks the others waited for over this group's last collectives.");

  m.def("flight_recorder_dump_bytes", [] {
    const std::vector<char> b = ring::flightRecorderDumpBytes();
    return py::bytes(b.data(), b.size());
  }, "Every ring group's flight recorder of this process, in torch's pickled dump format.");
  m.def("write_flight_recorder_dump", &ring::writeFlightRecorderDump, py::arg("path"),
        py::call_guard<py::gil_scoped_release>(),
        "Writes flight_recorder_dump_bytes() to `path`.");

  m.def("knob_table", [] {
    py::list out;
    for (const ring::KnobInfo& k : ring::knobTable()) {
      py::dict d;
      d["name"] = k.name;
      d["default"] = k.defaultText;
      d["scope"] = k.scope == ring::KnobScope::PerRank          ? "per_rank"
                   : k.scope == ring::KnobScope::EveryRankAlike ? "every_rank_alike"
                                                                : "build";
      if (k.isInteger()) {
        d["int_default"] = k.intDefault;
        d["range"] = py::make_tuple(k.lo, k.hi);
      }
      out.append(d);
    }
    return out;
  }, "Every environment knob: name, default, scope (whether ranks must agree), integer range.");
  m.def("knob_text_or_default", [](const std::string& name) {
    return ring::knobTextOrDefault(name.c_str());
  }, "A knob's text, or the knob table's default where it is unset or empty.");

#if RING_TORCH_AT_LEAST(2, 15)
  m.def("_heard_completions", [](int64_t id) {
    HeardCompletions& heard = heardCompletions();
    std::lock_guard<std::mutex> lock(heard.mutex);
    return heard.byHook[id];
  }, "Tests: (completion key, milliseconds or None) that RingBackend._record_completions(id)'s "
     "hook heard, in order.");
  m.def("_completion_key", [](const c10::intrusive_ptr<c10d::Work>& work) {
    return work->getCompletionKey();
  }, "Tests: a Work's getCompletionKey (torch 2.15 binds none).");
#endif
  // Counters for tests: which path CUDA calls of this process took.
  m.def("kernel_call_count", [] {
#ifdef RING_WITH_CUDA
    return ring::CudaCollectives::kernelCallCount();
#else
    return uint64_t{0};
#endif
  }, "Collectives of this process that ran as CUDA ring kernels.");
  m.def("staged_calls", [] {
#ifdef RING_WITH_CUDA
    return ring::stagedCalls();
#else
    return std::map<std::string, uint64_t>{};
#endif
  }, "CUDA calls of this process staged through pinned host memory, by collective.");
  m.attr("built_with_cuda") =
#ifdef RING_WITH_CUDA
      true;
#else
      false;
#endif
}
