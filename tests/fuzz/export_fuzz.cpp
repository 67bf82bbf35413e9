// libFuzzer harness for the function-file parser (loom/io/export.cpp): the
// input is a function file. A malformed file must raise a std::exception; a
// crash, a sanitizer report, a hang or an allocation beyond libFuzzer's
// -rss_limit_mb is a bug. Parsing rebuilds every primitive through its
// registered factory (decode_state, the factories' checks) and the callback
// records walk every reference. Build and run: scripts/fuzz_export.sh.
#include <cstdint>
#include <exception>
#include <string>

#include "loom/io/export.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = loom::io::memory_reader(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
  try {
    loom::io::ExportedFunction f = loom::io::read_function(*r);
    for (const auto& t : f.traces) {
      loom::io::TraceInfo info = loom::io::describe_trace(t);
      volatile size_t sink = info.nodes.size() + info.constants.size();
      (void)sink;
    }
  } catch (const std::exception&) {
  }
  return 0;
}
