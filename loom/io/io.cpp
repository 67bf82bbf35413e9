// Path-level save and load: extensions, format inference, atomic files.
#include "loom/io/detail.h"

namespace loom::io {

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::string with_extension(std::string path, const std::string& ext) {
  if (!ends_with(path, ext)) path += ext;
  return path;
}

} // namespace

Format format_from_string(const std::string& s) {
  if (s == "npy") return Format::npy;
  if (s == "npz") return Format::npz;
  if (s == "safetensors") return Format::safetensors;
  if (s == "gguf") return Format::gguf;
  throw std::invalid_argument("[load] Unknown file format " + s);
}

Format format_from_path(const std::string& path) {
  auto dot = path.rfind('.');
  auto slash = path.rfind('/');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash))
    throw std::invalid_argument("[load] Could not infer file format from extension");
  return format_from_string(path.substr(dot + 1));
}

void save(std::string path, const array& a) {
  path = with_extension(std::move(path), ".npy");
  detail::evaluate(a);
  AtomicFileWriter w(path, "save");
  save_npy(w, a);
  w.commit();
}

void savez(std::string path, const NamedArrays& arrays, bool compressed) {
  const char* op = compressed ? "savez_compressed" : "savez";
  path = with_extension(std::move(path), ".npz");
  for (const auto& [name, a] : arrays) detail::evaluate(a);
  AtomicFileWriter w(path, op);
  save_npz(w, arrays, compressed);
  w.commit();
}

void save_safetensors(std::string path, const NamedArrays& arrays, const StringMap& metadata) {
  path = with_extension(std::move(path), ".safetensors");
  for (const auto& [name, a] : arrays) detail::evaluate(a);
  AtomicFileWriter w(path, "save_safetensors");
  save_safetensors(w, arrays, metadata);
  w.commit();
}

void save_gguf(std::string path, const NamedArrays& arrays, const GgufMetadata& metadata) {
  path = with_extension(std::move(path), ".gguf");
  for (const auto& [name, a] : arrays) detail::evaluate(a);
  AtomicFileWriter w(path, "save_gguf");
  save_gguf(w, arrays, metadata);
  w.commit();
}

Loaded load(Reader& r, Format format) {
  Loaded out{format, std::nullopt, {}, {}, {}};
  switch (format) {
    case Format::npy:
      out.single = load_npy(r);
      break;
    case Format::npz:
      out.arrays = load_npz(r);
      break;
    case Format::safetensors: {
      auto [arrays, metadata] = load_safetensors(r);
      out.arrays = std::move(arrays);
      out.metadata = std::move(metadata);
      break;
    }
    case Format::gguf: {
      auto [arrays, metadata] = load_gguf(r);
      out.arrays = std::move(arrays);
      out.gguf_metadata = std::move(metadata);
      break;
    }
  }
  return out;
}

Loaded load(const std::string& path, std::optional<std::string> format) {
  Format f = format ? format_from_string(*format) : format_from_path(path);
  // npy and safetensors hold arrays as raw contiguous bytes: mapped, they
  // load lazily; the other formats read (and decode) everything.
  auto r = f == Format::npy || f == Format::safetensors ? map_file(path, "load")
                                                        : open_file(path, "load");
  return load(*r, f);
}

} // namespace loom::io
