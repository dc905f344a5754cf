// Python bindings: the RingBackend class (so torch.distributed can hold it as a Backend) and
// its flight recorder. Registration of the "ring" name happens in torch_ring_backend/__init__.py.
#include <pybind11/chrono.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include "backend/ring_backend.h"
#ifdef RING_WITH_CUDA
#include "backend/cuda_collectives.h"
#include "backend/staging.h"
#endif

namespace py = pybind11;

PYBIND11_MODULE(_C, m) {
  m.doc() = "torch_ring_backend native module";
  // Backend's Python type must be registered before we derive from it.
  py::module_::import("torch.distributed");

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
      .def_property_readonly("group_name", &ring::RingBackend::groupName)
      .def(
          "flight_recorder",
          [](const ring::RingBackend& self) {
            py::list out;
            for (const auto& e : self.flightRecorder().snapshot()) {
              py::dict d;
              d["seq"] = e.seq;
              d["collective"] = e.collective;
              d["detail"] = e.detail;
              d["state"] = e.state;
              d["queued_ms"] = e.queuedAtMs;
              d["started_ms"] = e.startedAtMs;
              d["ended_ms"] = e.endedAtMs;
              d["error"] = e.error;
              out.append(d);
            }
            return out;
          },
          "The last collectives of this group on this rank, oldest first.");

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
