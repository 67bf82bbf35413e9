// A stream is a queue of work on one device, owned by the thread that made it.
#pragma once

#include <ostream>
#include <variant>

#include "loom/device.h"

namespace loom {

struct Stream {
  int index;
  Device device;
  constexpr Stream(int i, Device d) : index(i), device(d) {}
  bool operator==(const Stream& o) const { return index == o.index; }
  bool operator!=(const Stream& o) const { return index != o.index; }
};

// Every op takes one of these: nothing (default stream of the default
// device), a device (its default stream) or a stream.
using StreamOrDevice = std::variant<std::monostate, Stream, Device>;

Stream default_stream(Device d);
void set_default_stream(Stream s);
Stream new_stream(Device d);
Stream to_stream(StreamOrDevice s);
// Raises if `s` was not created on (or is not the default of) the calling thread.
void check_stream_thread(const Stream& s);
void synchronize();
void synchronize(Stream s);
// Destroys the streams created on the calling thread.
void clear_streams();

std::ostream& operator<<(std::ostream& os, const Stream& s);

} // namespace loom
