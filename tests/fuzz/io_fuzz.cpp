// libFuzzer harness for the loom/io parsers (npy, npz, safetensors, gguf).
// The first byte of an input picks the format (unless LOOM_FUZZ_FORMAT pins
// it), the rest is the file. A malformed file must raise a std::exception:
// a crash, a sanitizer report, a hang or an allocation beyond libFuzzer's
// -rss_limit_mb is a bug. Build and run: scripts/fuzz_all.sh (or fuzz_io.sh).
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <string>

#include "loom/io/io.h"

namespace {
// LOOM_FUZZ_FORMAT=npy|npz|safetensors|gguf pins every input to one parser
// (scripts/fuzz_all.sh's per-parser runs); unset, the first byte picks it.
int pinned = -1;
} // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* f = std::getenv("LOOM_FUZZ_FORMAT"); f && *f) {
    pinned = static_cast<int>(loom::io::format_from_string(f));
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  using loom::io::Format;
  static const Format formats[] = {Format::npy, Format::npz, Format::safetensors, Format::gguf};
  Format f = pinned >= 0 ? static_cast<Format>(pinned) : formats[data[0] % 4];
  auto r = loom::io::memory_reader(std::string(reinterpret_cast<const char*>(data) + 1, size - 1),
                                   "fuzz");
  try {
    loom::io::Loaded out = loom::io::load(*r, f);
    // Touch what was loaded, so a wrong size shows under ASan.
    for (auto& [name, a] : out.arrays) {
      a.eval();
      volatile char sink = 0;
      for (size_t i = 0; i < a.nbytes(); i += 4096) sink = sink + a.data<char>()[i];
    }
    if (out.single) out.single->eval();
  } catch (const std::exception&) {
  }
  return 0;
}
