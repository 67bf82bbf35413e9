#include "loom/scheduler/backend.h"

#include <atomic>
#include <mutex>

namespace loom::scheduler {

namespace {
struct Slot {
  BackendProbe probe = nullptr;
  std::once_flag once;
  std::atomic<DeviceBackend*> backend{nullptr};
};
Slot& gpu_slot() {
  static Slot slot; // probes register from static initialisers: built on first use
  return slot;
}
} // namespace

void register_probe(Device::DeviceType type, BackendProbe probe) {
  if (type == Device::gpu) gpu_slot().probe = probe;
}

DeviceBackend* backend(Device::DeviceType type) {
  if (type != Device::gpu) return nullptr;
  auto& slot = gpu_slot();
  std::call_once(slot.once, [&] {
    if (slot.probe != nullptr) slot.backend = slot.probe();
  });
  return slot.backend.load();
}

void before_exit() {
  if (DeviceBackend* b = gpu_slot().backend.load()) b->before_exit();
}

} // namespace loom::scheduler
