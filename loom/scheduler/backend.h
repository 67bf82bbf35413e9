// Device backends, registered at run time. The CPU path is built into the
// scheduler; a GPU backend compiled into the library registers a probe, and
// the probe runs the first time anything asks about GPUs: it registers the
// backend (and its memory pools) only if a device is present. So one library
// serves machines with and without a GPU, and a CPU-only build differs from a
// CUDA build only in what registered.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "loom/device.h"
#include "loom/scheduler/event.h"
#include "loom/stream.h"

namespace loom {
class array;
class Primitive;
} // namespace loom

namespace loom::scheduler {

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  virtual int device_count() const = 0;
  // Runs or enqueues one node on its stream, on that stream's worker thread.
  // Outputs must be written (or queued to be written) when it returns.
  virtual void eval(Primitive& p, const std::vector<array>& inputs,
                    std::vector<array>& outputs) = 0;
  // Makes `timeline` reach `value` once all work enqueued on `stream` so far
  // has completed on the device (not merely launched): an event on a GPU
  // stream means kernel completion.
  virtual void signal_when_done(const Stream& stream, const std::shared_ptr<Timeline>& timeline,
                                uint64_t value) = 0;
  // Waits, on the calling thread, until all work enqueued on `stream` so far
  // has completed on the device; false when it cannot (the caller then waits
  // for the timeline as usual).
  virtual bool synchronize(const Stream& stream) { return false; }
  virtual void stream_created(const Stream& stream) = 0;
  // The stream's worker has drained; its device queue may be destroyed.
  virtual void stream_destroyed(const Stream& stream) = 0;
  // MLX's device_info() for device `index`.
  virtual std::map<std::string, std::variant<std::string, size_t>> device_info(int index) = 0;
  // The process is exiting: take no more device work (the work in flight
  // finishes first). Called before any library's static destructors run.
  virtual void before_exit() {}
};

// A probe returns the backend when its device is present, null otherwise.
using BackendProbe = DeviceBackend* (*)();
// Called by static initialisers of compiled-in backends; never runs the probe.
void register_probe(Device::DeviceType type, BackendProbe probe);
// The registered backend of `type`, probing on first use; null for the CPU
// (built in) and when no device of the type is present.
DeviceBackend* backend(Device::DeviceType type);
// Tells the backends found so far that the process is exiting (probes none).
// Python calls it from the interpreter's atexit, which runs before the C
// runtime's exit handlers, where CUDA libraries tear themselves down.
void before_exit();

} // namespace loom::scheduler
