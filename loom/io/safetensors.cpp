// safetensors: an 8-byte little-endian header length, a JSON header mapping
// each name to {dtype, shape, data_offsets} (plus an optional "__metadata__"
// string map), then the data, offsets relative to its start.
#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "loom/io/detail.h"

namespace loom::io {

namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

// The reference implementation refuses larger headers; so do we, before
// reading one.
constexpr uint64_t kMaxHeader = 100'000'000;

const char* st_dtype(Dtype d) {
  switch (d.val) {
    case Dtype::Val::bool_:
      return "BOOL";
    case Dtype::Val::uint8:
      return "U8";
    case Dtype::Val::uint16:
      return "U16";
    case Dtype::Val::uint32:
      return "U32";
    case Dtype::Val::uint64:
      return "U64";
    case Dtype::Val::int8:
      return "I8";
    case Dtype::Val::int16:
      return "I16";
    case Dtype::Val::int32:
      return "I32";
    case Dtype::Val::int64:
      return "I64";
    case Dtype::Val::float16:
      return "F16";
    case Dtype::Val::bfloat16:
      return "BF16";
    case Dtype::Val::float32:
      return "F32";
    case Dtype::Val::float64:
      return "F64";
    case Dtype::Val::complex64:
      return "C64";
  }
  throw std::logic_error("[save_safetensors] unknown dtype");
}

std::optional<Dtype> dtype_from_st(const std::string& s) {
  for (int i = 0; i < kNumDtypes; ++i) {
    Dtype d = dtype_from_index(i);
    if (s == st_dtype(d)) return d;
  }
  return std::nullopt;
}

} // namespace

void save_safetensors(Writer& w, const NamedArrays& arrays, const StringMap& metadata) {
  ordered_json header = ordered_json::object();
  if (!metadata.empty()) {
    ordered_json meta = ordered_json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header["__metadata__"] = meta;
  }
  uint64_t offset = 0;
  std::set<std::string> names;
  for (const auto& [name, a] : arrays) {
    if (name == "__metadata__")
      throw std::invalid_argument(
          "[save_safetensors] '__metadata__' is reserved and cannot "
          "name an array.");
    if (!names.insert(name).second)
      throw std::invalid_argument("[save_safetensors] Duplicate array name '" + name + "'.");
    detail::evaluate(a);
    ordered_json entry;
    entry["dtype"] = st_dtype(a.dtype());
    entry["shape"] = a.shape();
    entry["data_offsets"] = {offset, offset + a.nbytes()};
    header[name] = entry;
    offset += a.nbytes();
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const json::exception& e) {
    throw std::invalid_argument(std::string("[save_safetensors] Names and metadata must be "
                                            "valid UTF-8 (") +
                                e.what() + ").");
  }
  // Pad with spaces so the data starts 8-byte aligned, as the reference
  // writer does.
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string len;
  detail::put64(len, text.size());
  w.write(len.data(), len.size());
  w.write(text.data(), text.size());
  for (const auto& [name, a] : arrays) detail::write_elements(w, a);
}

std::pair<NamedArrays, StringMap> load_safetensors(Reader& r) {
  auto fail = [&](const std::string& what) { detail::malformed(r, "safetensors", what); };
  if (r.size() < 8) fail("the file is too short to hold a header length (truncated header)");
  unsigned char len_bytes[8];
  r.read_at(0, len_bytes, 8);
  uint64_t header_len = detail::le64(len_bytes);
  if (header_len > r.size() - 8)
    fail("the header declares " + std::to_string(header_len) + " bytes but the file holds " +
         std::to_string(r.size() - 8) + " after the length (truncated header)");
  if (header_len > kMaxHeader)
    fail("the header of " + std::to_string(header_len) + " bytes exceeds the 100 MB limit");
  std::string text(header_len, '\0');
  r.read_at(8, text.data(), header_len);

  // Duplicate names would silently shadow each other in a JSON object; the
  // parser callback sees every top-level key and refuses a repeat.
  std::set<std::string> keys;
  std::string duplicate;
  json header;
  try {
    header = json::parse(text, [&](int depth, json::parse_event_t event, json& parsed) {
      if (event == json::parse_event_t::key && depth == 1) {
        std::string k = parsed.get<std::string>();
        if (!keys.insert(k).second && duplicate.empty()) duplicate = k;
      }
      return true;
    });
  } catch (const json::exception& e) {
    fail(std::string("the header is not valid JSON (") + e.what() + ")");
  }
  if (!duplicate.empty()) fail("duplicate key '" + duplicate + "' in the header");
  if (!header.is_object()) fail("the header is not a JSON object");

  uint64_t data_start = 8 + header_len;
  uint64_t data_len = r.size() - data_start;
  StringMap metadata;
  struct Entry {
    std::string name;
    Dtype dtype;
    Shape shape;
    uint64_t begin, end;
  };
  std::vector<Entry> entries;
  for (auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      if (value.is_null()) continue;
      if (!value.is_object()) fail("'__metadata__' is not an object of strings");
      for (auto& [k, v] : value.items()) {
        if (!v.is_string()) fail("metadata value of '" + k + "' is not a string");
        metadata.emplace_back(k, v.get<std::string>());
      }
      continue;
    }
    std::string where = "tensor '" + name + "'";
    if (!value.is_object()) fail(where + " is not an object");
    auto dt = value.find("dtype");
    auto sh = value.find("shape");
    auto off = value.find("data_offsets");
    if (dt == value.end() || sh == value.end() || off == value.end())
      fail(where + " lacks one of 'dtype', 'shape' and 'data_offsets'");
    if (!dt->is_string()) fail(where + " has a non-string dtype");
    auto dtype = dtype_from_st(dt->get<std::string>());
    if (!dtype) fail(where + " has unsupported dtype '" + dt->get<std::string>() + "'");
    if (!sh->is_array()) fail(where + " has a shape that is not a list");
    std::vector<int64_t> dims;
    for (auto& d : *sh) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0 || d.get<int64_t>() > INT32_MAX)
        fail(where + " has a shape entry that is not an integer in [0, 2^31)");
      dims.push_back(d.get<int64_t>());
    }
    if (!off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
        !(*off)[1].is_number_unsigned())
      fail(where + " has 'data_offsets' that are not two non-negative integers");
    uint64_t begin = (*off)[0].get<uint64_t>();
    uint64_t end = (*off)[1].get<uint64_t>();
    auto nbytes = detail::checked_nbytes(dims, dtype->size);
    if (!nbytes) fail(where + " has a shape whose size overflows");
    if (begin > end || end > data_len)
      fail(where + " has offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
           "] out of range of the " + std::to_string(data_len) + " data bytes");
    if (end - begin != *nbytes)
      fail(where + " spans " + std::to_string(end - begin) +
           " bytes but its shape and dtype need " + std::to_string(*nbytes));
    entries.push_back({name, *dtype, Shape(dims.begin(), dims.end()), begin, end});
  }

  // File order, so reading walks the file forward.
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  // Overlapping tensors would let a small file claim any amount of memory.
  for (size_t i = 1; i < entries.size(); ++i) {
    if (entries[i].begin < entries[i - 1].end)
      fail("tensors '" + entries[i - 1].name + "' and '" + entries[i].name + "' overlap");
  }
  NamedArrays out;
  out.reserve(entries.size());
  for (auto& e : entries) {
    // Lazy for a mapped file: the pages are read when the array is used.
    auto data = detail::read_data(r, data_start + e.begin, e.end - e.begin, e.dtype.size);
    out.emplace_back(e.name, detail::make_array(std::move(data), e.shape, e.dtype));
  }
  return {std::move(out), std::move(metadata)};
}

} // namespace loom::io
