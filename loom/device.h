// Devices are registered at run time: a CPU build and a CUDA build of the same
// program differ only in which backends registered themselves.
#pragma once

#include <ostream>
#include <string>

namespace loom {

struct Device {
  enum class DeviceType { cpu, gpu };
  static constexpr DeviceType cpu = DeviceType::cpu;
  static constexpr DeviceType gpu = DeviceType::gpu;

  DeviceType type;
  int index;

  constexpr Device(DeviceType t, int i = 0) : type(t), index(i) {}
  constexpr bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  constexpr bool operator!=(const Device& o) const { return !(*this == o); }
};

const Device& default_device();
void set_default_device(const Device& d);
bool is_available(const Device& d);
int device_count(Device::DeviceType t);

std::ostream& operator<<(std::ostream& os, const Device& d);
std::string to_string(Device::DeviceType t);

} // namespace loom
