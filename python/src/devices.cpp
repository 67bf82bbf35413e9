// Devices, streams, thread-local streams and the stream context manager.
#include <sys/utsname.h>

#include <atomic>
#include <fstream>
#include <iostream>
#include <unordered_map>

#include "loom/allocator/memory.h"
#include "loom/scheduler/backend.h"
#include "loom/scheduler/scheduler.h"
#include "utils.h"

namespace loom::bindings {

namespace {

std::atomic<int> g_next_thread_local_index{0};

// The stream each ThreadLocalStream resolved to on this thread.
thread_local std::unordered_map<int, Stream> t_thread_local_streams;

struct StreamContext {
  std::variant<std::monostate, Stream, Device, ThreadLocalStream> target;
  std::optional<Device> saved_device;
  std::optional<Stream> saved_stream;        // default stream of the saved device
  std::optional<Stream> saved_target_stream; // default stream of the target's device
};

std::string device_repr(const Device& d) {
  return "Device(" + to_string(d.type) + ", " + std::to_string(d.index) + ")";
}

std::string cpu_model_name() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) {
        auto start = line.find_first_not_of(' ', colon + 1);
        return start == std::string::npos ? "" : line.substr(start);
      }
    }
  }
  return "cpu";
}

Device as_device(nb::handle h) {
  if (nb::isinstance<Device>(h)) return nb::cast<Device>(h);
  return Device(nb::cast<Device::DeviceType>(h));
}

void enter(StreamContext& c) {
  Device old_device = default_device();
  c.saved_device = old_device;
  c.saved_stream = default_stream(old_device);
  if (auto* d = std::get_if<Device>(&c.target)) {
    check_gpu_available(*d, "set_default_device", "set gpu device");
    set_default_device(*d);
    return;
  }
  Stream s = std::holds_alternative<Stream>(c.target)
                 ? std::get<Stream>(c.target)
                 : resolve_thread_local(std::get<ThreadLocalStream>(c.target));
  c.saved_target_stream = default_stream(s.device);
  // The stream first: it raises for another thread's stream, and then the
  // process-wide default device must still be the one it was (no __exit__
  // runs to restore it).
  set_default_stream(s);
  set_default_device(s.device);
}

void exit(StreamContext& c) {
  if (c.saved_target_stream) set_default_stream(*c.saved_target_stream);
  if (c.saved_stream) set_default_stream(*c.saved_stream);
  if (c.saved_device) set_default_device(*c.saved_device);
}

} // namespace

void check_gpu_available(const Device& d, const char* op, const char* what) {
  if (d.type == Device::gpu && !is_available(d)) {
    throw std::invalid_argument(std::string("[") + op + "] Cannot " + what +
                                " without gpu backend.");
  }
}

Stream resolve_thread_local(const ThreadLocalStream& s) {
  auto it = t_thread_local_streams.find(s.index);
  if (it != t_thread_local_streams.end()) return it->second;
  check_gpu_available(s.device, "new_thread_local_stream", "make gpu stream");
  Stream made = new_stream(s.device);
  t_thread_local_streams.emplace(s.index, made);
  return made;
}

StreamArg::operator StreamOrDevice() const {
  if (thread_local_stream) return resolve_thread_local(*thread_local_stream);
  if (auto* d = std::get_if<Device>(&value)) {
    check_gpu_available(*d, "default_stream", "get gpu stream");
  }
  return value;
}

// mx.cuda and mx.metal, as in MLX's Linux CUDA wheel: metal is never
// available, and its memory functions forward to the top-level ones with a
// deprecation notice on stderr.
void init_backend_modules(nb::module_& m) {
  auto cuda = m.def_submodule("cuda", "CUDA back-end.");
  cuda.def(
      "is_available", [] { return is_available(Device(Device::gpu, 0)); },
      nb::sig("def is_available() -> bool"),
      "Check if the CUDA back-end is available (a GPU was found at run time).");

  auto metal = m.def_submodule("metal", "Metal back-end (never available on Linux).");
  metal.def(
      "is_available", [] { return false; }, nb::sig("def is_available() -> bool"),
      "Check if the Metal back-end is available.");
  auto deprecated = [](const char* name) {
    std::cerr << "mx.metal." << name
              << " is deprecated and will be removed in a future version. Use mx." << name
              << " instead.\n";
  };
  metal.def(
      "device_info",
      [deprecated] {
        deprecated("device_info");
        return nb::dict();
      },
      nb::sig("def device_info() -> dict[str, str | int]"));
  metal.def(
      "clear_cache",
      [deprecated] {
        deprecated("clear_cache");
        clear_cache();
      },
      nb::sig("def clear_cache() -> None"));
  metal.def(
      "get_active_memory",
      [deprecated] {
        deprecated("get_active_memory");
        return get_active_memory();
      },
      nb::sig("def get_active_memory() -> int"));
  metal.def(
      "get_peak_memory",
      [deprecated] {
        deprecated("get_peak_memory");
        return get_peak_memory();
      },
      nb::sig("def get_peak_memory() -> int"));
  metal.def(
      "get_cache_memory",
      [deprecated] {
        deprecated("get_cache_memory");
        return get_cache_memory();
      },
      nb::sig("def get_cache_memory() -> int"));
  metal.def(
      "reset_peak_memory",
      [deprecated] {
        deprecated("reset_peak_memory");
        reset_peak_memory();
      },
      nb::sig("def reset_peak_memory() -> None"));
  metal.def(
      "set_memory_limit",
      [deprecated](size_t limit) {
        deprecated("set_memory_limit");
        return set_memory_limit(limit);
      },
      nb::arg("limit"), nb::sig("def set_memory_limit(limit: int) -> int"));
  metal.def(
      "set_cache_limit",
      [deprecated](size_t limit) {
        deprecated("set_cache_limit");
        return set_cache_limit(limit);
      },
      nb::arg("limit"), nb::sig("def set_cache_limit(limit: int) -> int"));
  metal.def(
      "set_wired_limit",
      [deprecated](size_t limit) {
        deprecated("set_wired_limit");
        return set_wired_limit(limit);
      },
      nb::arg("limit"), nb::sig("def set_wired_limit(limit: int) -> int"));
  // Capture is a Metal tool; without Metal there is nothing to record.
  metal.def(
      "start_capture", [](const std::string&) {}, nb::arg("path"),
      nb::sig("def start_capture(path: str) -> None"), "Start a Metal capture (no-op on Linux).");
  metal.def(
      "stop_capture", [] {}, nb::sig("def stop_capture() -> None"),
      "Stop a Metal capture (no-op on Linux).");
}

void init_devices(nb::module_& m) {
  nb::enum_<Device::DeviceType>(m, "DeviceType")
      .value("cpu", Device::cpu)
      .value("gpu", Device::gpu);

  nb::class_<Device>(m, "Device", "A device to run operations on.")
      .def(nb::init<Device::DeviceType, int>(), nb::arg("type"), nb::arg("index") = 0)
      .def_ro("type", &Device::type)
      .def("__repr__", &device_repr)
      .def("__eq__", [](const Device& d, nb::handle other) {
        if (nb::isinstance<Device>(other)) return nb::cast<Device>(other) == d;
        if (nb::isinstance<Device::DeviceType>(other)) {
          return Device(nb::cast<Device::DeviceType>(other)) == d;
        }
        return false;
      });
  nb::implicitly_convertible<Device::DeviceType, Device>();

  m.attr("cpu") = nb::cast(Device::cpu);
  m.attr("gpu") = nb::cast(Device::gpu);

  nb::class_<Stream>(m, "Stream", "A queue of operations on one device.")
      .def_ro("device", &Stream::device)
      .def("__repr__",
           [](const Stream& s) {
             return "Stream(" + device_repr(s.device) + ", " + std::to_string(s.index) + ")";
           })
      .def("__eq__", [](const Stream& s, nb::handle other) {
        return nb::isinstance<Stream>(other) && nb::cast<Stream>(other) == s;
      });

  nb::class_<ThreadLocalStream>(
      m, "ThreadLocalStream",
      "A stream that stands for a different stream on every thread that uses it, "
      "so one object can be shared by worker threads.")
      .def_ro("device", &ThreadLocalStream::device)
      .def("__repr__",
           [](const ThreadLocalStream& s) {
             return "ThreadLocalStream(" + device_repr(s.device) + ", " + std::to_string(s.index) +
                    ")";
           })
      .def("__eq__", [](const ThreadLocalStream& s, nb::handle other) {
        return nb::isinstance<ThreadLocalStream>(other) &&
               nb::cast<ThreadLocalStream>(other).index == s.index;
      });

  nb::class_<StreamContext>(m, "StreamContext",
                            "Sets the default device and stream inside a with block.")
      .def("__enter__", [](StreamContext& c) { enter(c); })
      .def("__exit__", [](StreamContext& c, nb::args) { exit(c); });

  m.def("default_device", &default_device, nb::sig("def default_device() -> loom.core.Device"),
        "The device operations run on when they are given no stream.");

  m.def(
      "set_default_device",
      [](const Device& d) {
        check_gpu_available(d, "set_default_device", "set gpu device");
        set_default_device(d);
      },
      nb::arg("device"), nb::sig("def set_default_device(device: Device | DeviceType) -> None"),
      "Set the default device.");

  m.def(
      "default_stream",
      [](const Device& d) {
        check_gpu_available(d, "default_stream", "get gpu stream");
        return default_stream(d);
      },
      nb::arg("device"), nb::sig("def default_stream(device: Device | DeviceType) -> Stream"),
      "The default stream of a device on the calling thread.");

  m.def(
      "new_stream",
      [](const Device& d) {
        check_gpu_available(d, "new_stream", "make gpu stream");
        return new_stream(d);
      },
      nb::arg("device"), nb::sig("def new_stream(device: Device | DeviceType) -> Stream"),
      "Make a new stream on a device.\n\n"
      "The stream belongs to the thread that made it: using it from another\n"
      "thread raises an error. Use new_thread_local_stream for a stream that\n"
      "worker threads can share.");

  m.def(
      "new_thread_local_stream",
      [](const Device& d) {
        // Like MLX, a GPU one can be made; using it raises.
        return ThreadLocalStream{d, g_next_thread_local_index++};
      },
      nb::arg("device"),
      nb::sig("def new_thread_local_stream(device: Device | DeviceType) -> ThreadLocalStream"),
      "Make a stream that is a distinct stream on every thread that uses it.");

  m.def(
      "new_thread_unsafe_stream",
      [](const Device& d) {
        check_gpu_available(d, "new_thread_unsafe_stream", "make gpu stream");
        return new_stream(d);
      },
      nb::arg("device"),
      nb::sig("def new_thread_unsafe_stream(device: Device | DeviceType) -> Stream"),
      "Make a new stream on a device.\n\n"
      "In MLX such a stream may be used from any thread. Loom's scheduler\n"
      "currently ties every stream to the thread that made it, so this stream\n"
      "behaves like one from new_stream.");

  m.def(
      "set_default_stream",
      [](const Stream& s) {
        // The default device stays as it is (MLX's behaviour).
        Device d = default_device();
        set_default_stream(s);
        set_default_device(d);
      },
      nb::arg("stream"), nb::sig("def set_default_stream(stream: loom.core.Stream) -> None"),
      "Make a stream the default stream of its device. The default device does\n"
      "not change.\n\n"
      "Args:\n    stream (Stream): The new default stream.");

  m.def(
      "stream",
      [](nb::handle s) {
        StreamContext c;
        if (nb::isinstance<Stream>(s)) {
          c.target = nb::cast<Stream>(s);
        } else if (nb::isinstance<ThreadLocalStream>(s)) {
          c.target = nb::cast<ThreadLocalStream>(s);
        } else if (nb::isinstance<Device>(s) || nb::isinstance<Device::DeviceType>(s)) {
          c.target = as_device(s);
        } else {
          throw nb::type_error(
              "[StreamContext] Invalid argument, please specify a stream or device.");
        }
        return c;
      },
      nb::arg("s"),
      nb::sig("def stream(s: loom.core.Stream | loom.core.ThreadLocalStream | loom.core.Device | "
              "loom.core.DeviceType) -> loom.core.StreamContext"),
      "A context manager that sets the default device and stream.\n\n"
      "Example:\n"
      "    >>> with mx.stream(mx.cpu):\n"
      "    ...     y = mx.exp(x)  # runs on the CPU\n\n"
      "Args:\n"
      "    s (Stream or Device): The stream or device to make the default.\n\n"
      "Returns:\n    StreamContext");

  m.def(
      "synchronize",
      [](const StreamArg& s) {
        if (!s.thread_local_stream && std::holds_alternative<std::monostate>(s.value)) {
          synchronize();
        } else {
          synchronize(to_stream(s));
        }
      },
      nb::arg("stream") = nb::none(),
      nb::sig("def synchronize(stream: loom.core.Stream | loom.core.ThreadLocalStream | "
              "loom.core.Device | loom.core.DeviceType | None = None) -> None"),
      "Wait until the work already queued on a stream has run.\n\n"
      "Args:\n"
      "    stream (Stream, optional): The stream; a device means its default\n"
      "      stream, ``None`` the default stream of the default device.");

  // Called by os.fork() before it forks (loom/__init__.py registers it); the
  // GIL is let go so that a queued task that calls into Python can finish.
  m.def(
      "_drain_streams_for_fork",
      [] {
        nb::gil_scoped_release released;
        scheduler::drain_all_streams();
      },
      "Wait for the work queued on every stream (os.fork calls it first).");

  m.def(
      "clear_streams",
      [] {
        t_thread_local_streams.clear();
        clear_streams();
      },
      nb::sig("def clear_streams() -> None"), "Destroy the streams made on the calling thread.");

  m.def("device_count", &device_count, nb::arg("device_type"),
        nb::sig("def device_count(device_type: loom.core.DeviceType) -> int"),
        "The number of available devices of a type.");

  m.def(
      "device_info",
      [](std::optional<Device> d) {
        Device dev = d.value_or(default_device());
        nb::dict info;
        if (!is_available(dev)) return info;
        if (dev.type == Device::gpu) {
          for (auto& [k, v] : scheduler::backend(Device::gpu)->device_info(dev.index)) {
            if (std::holds_alternative<std::string>(v)) {
              info[k.c_str()] = std::get<std::string>(v);
            } else {
              info[k.c_str()] = std::get<size_t>(v);
            }
          }
          return info;
        }
        utsname u{};
        uname(&u);
        info["architecture"] = std::string(u.machine);
        info["device_name"] = cpu_model_name();
        info["total_memory"] = allocator::total_system_memory();
        return info;
      },
      nb::arg("d") = nb::none(),
      nb::sig("def device_info(d: None | Device | DeviceType = None) -> dict[str, str | int]"),
      "Properties of a device: ``architecture``, ``device_name`` and\n"
      "``total_memory`` (bytes) for the CPU. An unavailable device gives an\n"
      "empty dict.");

  m.def("is_available", &is_available, nb::arg("device"),
        nb::sig("def is_available(device: Device | DeviceType) -> bool"),
        "Whether a back-end is available for the device.");

  // GPU work stops when the interpreter exits, before the C runtime's exit
  // handlers: there CUDA's libraries (cuBLAS, NVRTC, the runtime) tear
  // themselves down, and daemon threads still evaluating on the GPU crashed
  // inside them. Registered with Python's atexit, not a module attribute.
  nb::module_::import_("atexit").attr("register")(nb::cpp_function([] {
    nb::gil_scoped_release release; // threads finishing device work need no GIL
    scheduler::before_exit();
  }));

  init_backend_modules(m);
}

} // namespace loom::bindings

namespace nanobind::detail {

bool type_caster<loom::bindings::StreamArg>::from_python(handle src, uint8_t,
                                                         cleanup_list*) noexcept {
  using namespace loom;
  value.thread_local_stream.reset();
  if (src.is_none()) {
    value.value = std::monostate{};
    return true;
  }
  try {
    if (nb::isinstance<Stream>(src)) {
      value.value = nb::cast<Stream>(src);
    } else if (nb::isinstance<Device>(src)) {
      value.value = nb::cast<Device>(src);
    } else if (nb::isinstance<Device::DeviceType>(src)) {
      value.value = Device(nb::cast<Device::DeviceType>(src));
    } else if (nb::isinstance<bindings::ThreadLocalStream>(src)) {
      value.thread_local_stream = nb::cast<bindings::ThreadLocalStream>(src);
    } else {
      return false;
    }
  } catch (...) {
    return false;
  }
  return true;
}

} // namespace nanobind::detail
