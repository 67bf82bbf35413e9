// Memory statistics and limits, and Loom's peak_memory() region meter.
#include <algorithm>
#include <memory>
#include <mutex>

#include "utils.h"

namespace loom::bindings {

namespace {

// A region measured by peak_memory(). Entering a region resets the
// allocator's peak; what the reset would have lost is kept in `running` (for
// enclosing regions) and in g_peak_floor (for get_peak_memory).
struct RegionState {
  size_t start = 0;   // active bytes when entered
  size_t running = 0; // peak seen before the allocator's peak was last reset
  size_t peak = 0;    // the result, set on exit
  bool open = false;
};

std::mutex g_mutex;
size_t g_peak_floor = 0;
std::vector<std::shared_ptr<RegionState>> g_open_regions;

// Folds the allocator's current peak into everything that must remember it
// before the peak is reset.
void fold_peak_locked() {
  size_t core = loom::get_peak_memory();
  g_peak_floor = std::max(g_peak_floor, core);
  for (auto& r : g_open_regions) r->running = std::max(r->running, core);
}

struct PeakMemory {
  std::shared_ptr<RegionState> state = std::make_shared<RegionState>();
};

} // namespace

void init_memory(nb::module_& m) {
  m.def("get_active_memory", &loom::get_active_memory, nb::sig("def get_active_memory() -> int"),
        "Bytes held by live arrays (buffers in the cache are not counted).");

  m.def(
      "get_peak_memory",
      [] {
        std::lock_guard<std::mutex> lock(g_mutex);
        return std::max(loom::get_peak_memory(), g_peak_floor);
      },
      nb::sig("def get_peak_memory() -> int"),
      "The highest value get_active_memory() has reached since the program\n"
      "started or since the last reset_peak_memory().\n\n"
      "It counts the bytes of live arrays only: buffers kept in the cache\n"
      "(get_cache_memory()) are not included, so the memory the process holds\n"
      "can be as large as get_active_memory() + get_cache_memory(). Regions\n"
      "measured with peak_memory() do not disturb this value.");

  m.def(
      "reset_peak_memory",
      [] {
        std::lock_guard<std::mutex> lock(g_mutex);
        // Open peak_memory() regions keep what they have seen so far.
        for (auto& r : g_open_regions) {
          r->running = std::max(r->running, loom::get_peak_memory());
        }
        g_peak_floor = 0;
        loom::reset_peak_memory();
      },
      nb::sig("def reset_peak_memory() -> None"),
      "Reset the peak memory to the memory in use now.");

  m.def("get_cache_memory", &loom::get_cache_memory, nb::sig("def get_cache_memory() -> int"),
        "Bytes of freed buffers kept for reuse rather than returned to the system.");

  m.def("get_memory_limit", &loom::get_memory_limit, nb::sig("def get_memory_limit() -> int"),
        "The memory limit in bytes.");

  m.def("set_memory_limit", &loom::set_memory_limit, nb::arg("limit"),
        nb::sig("def set_memory_limit(limit: int) -> int"),
        "Set the memory limit in bytes and return the previous one.\n\n"
        "When live arrays exceed the limit, evaluation first waits for\n"
        "in-flight work to release buffers; an allocation that still does not\n"
        "fit raises an out-of-memory error. Defaults to the system's memory.\n\n"
        "Args:\n    limit (int): The limit in bytes.\n\n"
        "Returns:\n    int: The previous limit in bytes.");

  m.def("set_cache_limit", &loom::set_cache_limit, nb::arg("limit"),
        nb::sig("def set_cache_limit(limit: int) -> int"),
        "Set the most bytes the buffer cache may keep and return the previous\n"
        "limit. ``0`` disables the cache.\n\n"
        "Args:\n    limit (int): The limit in bytes.\n\n"
        "Returns:\n    int: The previous limit in bytes.");

  m.def("set_wired_limit", &loom::set_wired_limit, nb::arg("limit"),
        nb::sig("def set_wired_limit(limit: int) -> int"),
        "Set the wired (resident) memory limit and return the previous one.\n"
        "Only meaningful on systems with wired GPU memory; the default is ``0``.\n\n"
        "Args:\n    limit (int): The limit in bytes.\n\n"
        "Returns:\n    int: The previous limit in bytes.");

  m.def("clear_cache", &loom::clear_cache, nb::sig("def clear_cache() -> None"),
        "Return the cached buffers to the system; get_cache_memory() is 0 after.");

  nb::class_<PeakMemory>(m, "PeakMemory",
                         "Measures the peak memory of a region; made by peak_memory().\n\n"
                         "Attributes:\n"
                         "    peak (int): The highest active memory in bytes while the region ran\n"
                         "      (including what was already in use when it started).\n"
                         "    start (int): The active memory in bytes when the region started.")
      .def_prop_ro("peak", [](const PeakMemory& p) { return p.state->peak; })
      .def_prop_ro("start", [](const PeakMemory& p) { return p.state->start; })
      .def("__enter__",
           [](nb::handle self) {
             auto& p = nb::cast<PeakMemory&>(self);
             std::lock_guard<std::mutex> lock(g_mutex);
             fold_peak_locked();
             auto& s = *p.state;
             s.start = loom::get_active_memory();
             s.running = s.start;
             s.peak = s.start;
             s.open = true;
             g_open_regions.push_back(p.state);
             loom::reset_peak_memory();
             return nb::borrow(self);
           })
      .def("__exit__",
           [](PeakMemory& p, nb::args) {
             std::lock_guard<std::mutex> lock(g_mutex);
             auto& s = *p.state;
             if (!s.open) return;
             s.peak = std::max(s.running, loom::get_peak_memory());
             s.open = false;
             auto it = std::find(g_open_regions.begin(), g_open_regions.end(), p.state);
             if (it != g_open_regions.end()) g_open_regions.erase(it);
           })
      .def("__repr__", [](const PeakMemory& p) {
        return "PeakMemory(peak=" + std::to_string(p.state->peak) +
               ", start=" + std::to_string(p.state->start) + ")";
      });

  m.def(
      "peak_memory", [] { return PeakMemory{}; }, nb::sig("def peak_memory() -> PeakMemory"),
      "A context manager that measures the peak memory of a region (a Loom\n"
      "extension; MLX has none).\n\n"
      "Example:\n"
      "    >>> with mx.peak_memory() as pm:\n"
      "    ...     y = mx.eval(mx.ones((1024, 1024)) * 2)\n"
      "    >>> pm.peak - pm.start  # bytes the region added at its highest\n\n"
      "``peak`` is the highest get_active_memory() reached inside the block.\n"
      "Regions may nest, and get_peak_memory() still reports the peak of the\n"
      "whole program afterwards.");
}

} // namespace loom::bindings
