// GGUF, version 3 (ggml's file format): a header, typed key/value metadata,
// tensor descriptions (dimensions innermost first, a ggml type, an offset),
// then the tensor data, every piece aligned to `general.alignment` (32).
#include <algorithm>
#include <cstring>
#include <set>

#include "loom/io/detail.h"

namespace loom::io {

namespace {

constexpr uint32_t kVersion = 3;
constexpr uint64_t kDefaultAlignment = 32;
constexpr uint32_t kMaxDims = 8;

// Metadata value types.
enum : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};

std::optional<Dtype> value_dtype(uint32_t t) {
  switch (t) {
    case kU8:
      return uint8;
    case kI8:
      return int8;
    case kU16:
      return uint16;
    case kI16:
      return int16;
    case kU32:
      return uint32;
    case kI32:
      return int32;
    case kF32:
      return float32;
    case kBool:
      return bool_;
    case kU64:
      return uint64;
    case kI64:
      return int64;
    case kF64:
      return float64;
    default:
      return std::nullopt;
  }
}

std::optional<uint32_t> value_type(Dtype d) {
  for (uint32_t t : {kU8, kI8, kU16, kI16, kU32, kI32, kF32, kBool, kU64, kI64, kF64})
    if (value_dtype(t) == d) return t;
  return std::nullopt;
}

// ggml tensor types Loom holds unchanged.
std::optional<Dtype> tensor_dtype(uint32_t t) {
  switch (t) {
    case 0:
      return float32;
    case 1:
      return float16;
    case 24:
      return int8;
    case 25:
      return int16;
    case 26:
      return int32;
    case 30:
      return bfloat16;
    default:
      return std::nullopt;
  }
}

std::optional<uint32_t> tensor_type(Dtype d) {
  for (uint32_t t : {0u, 1u, 24u, 25u, 26u, 30u})
    if (tensor_dtype(t) == d) return t;
  return std::nullopt;
}

std::string ggml_type_name(uint32_t t) {
  static const char* names[] = {"F32",   "F16",   "Q4_0",    "Q4_1",   "Q4_2",    "Q4_3",  "Q5_0",
                                "Q5_1",  "Q8_0",  "Q8_1",    "Q2_K",   "Q3_K",    "Q4_K",  "Q5_K",
                                "Q6_K",  "Q8_K",  "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL",
                                "IQ3_S", "IQ2_S", "IQ4_XS",  "I8",     "I16",     "I32",   "I64",
                                "F64",   "IQ1_M", "BF16"};
  if (t < sizeof(names) / sizeof(names[0])) return names[t];
  return "type " + std::to_string(t);
}

// Reads the metadata and tensor table through a buffered window, checking
// every length against the bytes left in the file.
class Cursor {
 public:
  explicit Cursor(Reader& r) : r_(r) {}
  uint64_t pos() const { return pos_; }
  uint64_t left() const { return r_.size() - pos_; }
  [[noreturn]] void fail(const std::string& what) const {
    detail::malformed(r_, "gguf", what + " (at byte " + std::to_string(pos_) + ")");
  }
  void read(void* dst, uint64_t n) {
    if (n > left()) fail("the file ends inside the header (truncated header)");
    auto* out = static_cast<char*>(dst);
    while (n > 0) {
      if (pos_ < buf_start_ || pos_ >= buf_start_ + buf_.size()) {
        size_t take = static_cast<size_t>(std::min<uint64_t>(1 << 16, left()));
        buf_.resize(take);
        r_.read_at(pos_, buf_.data(), take);
        buf_start_ = pos_;
      }
      size_t at = static_cast<size_t>(pos_ - buf_start_);
      size_t take = static_cast<size_t>(std::min<uint64_t>(n, buf_.size() - at));
      std::memcpy(out, buf_.data() + at, take);
      out += take;
      pos_ += take;
      n -= take;
    }
  }
  template <typename T>
  T get() {
    T v;
    read(&v, sizeof(T));
    return v;
  }
  std::string string() {
    uint64_t n = get<uint64_t>();
    if (n > left())
      fail("a string of " + std::to_string(n) + " bytes runs past the end of the file");
    std::string s(n, '\0');
    read(s.data(), n);
    return s;
  }

 private:
  Reader& r_;
  uint64_t pos_ = 0;
  uint64_t buf_start_ = 0;
  std::vector<char> buf_;
};

GgufValue read_value(Cursor& c, uint32_t type, const std::string& key) {
  if (type == kString) return c.string();
  if (type == kArray) {
    uint32_t elem = c.get<uint32_t>();
    uint64_t count = c.get<uint64_t>();
    if (elem == kString) {
      // Each string takes at least its 8-byte length.
      if (count > c.left() / 8) c.fail("metadata '" + key + "' declares more strings than fit");
      std::vector<std::string> out;
      out.reserve(count);
      for (uint64_t i = 0; i < count; ++i) out.push_back(c.string());
      return out;
    }
    auto d = value_dtype(elem);
    if (!d)
      c.fail("metadata '" + key + "' is an array of unsupported type " + std::to_string(elem));
    if (count > INT32_MAX || count * d->size > c.left())
      c.fail("metadata '" + key + "' declares " + std::to_string(count) +
             " elements, more than the file holds");
    auto data = detail::allocate_checked(count * d->size);
    c.read(data->ptr(), count * d->size);
    return detail::make_array(std::move(data), {static_cast<int32_t>(count)}, *d);
  }
  auto d = value_dtype(type);
  if (!d) c.fail("metadata '" + key + "' has unknown value type " + std::to_string(type));
  auto data = detail::allocate_checked(d->size);
  c.read(data->ptr(), d->size);
  return detail::make_array(std::move(data), {}, *d);
}

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

void put_string(std::string& s, const std::string& v) {
  detail::put64(s, v.size());
  s += v;
}

} // namespace

void save_gguf(Writer& w, const NamedArrays& arrays, const GgufMetadata& metadata) {
  std::string head("GGUF", 4);
  detail::put32(head, kVersion);
  detail::put64(head, arrays.size());
  detail::put64(head, metadata.size());
  for (const auto& [key, value] : metadata) {
    put_string(head, key);
    if (auto* s = std::get_if<std::string>(&value)) {
      detail::put32(head, kString);
      put_string(head, *s);
    } else if (auto* l = std::get_if<std::vector<std::string>>(&value)) {
      detail::put32(head, kArray);
      detail::put32(head, kString);
      detail::put64(head, l->size());
      for (const auto& v : *l) put_string(head, v);
    } else {
      const array& a = std::get<array>(value);
      auto t = value_type(a.dtype());
      if (!t)
        throw std::invalid_argument("[save_gguf] array type " + dtype_name(a.dtype()) +
                                    " not support for metadata.");
      if (a.ndim() > 1)
        throw std::runtime_error("[save_gguf] Cannot save arrays with more than one dimension.");
      detail::evaluate(a);
      if (a.ndim() == 1) {
        detail::put32(head, kArray);
        detail::put32(head, *t);
        detail::put64(head, a.size());
      } else {
        detail::put32(head, *t);
      }
      BufferWriter bytes;
      detail::write_elements(bytes, a);
      head += bytes.bytes();
    }
  }
  uint64_t offset = 0;
  std::set<std::string> names;
  for (const auto& [name, a] : arrays) {
    auto t = tensor_type(a.dtype());
    if (!t)
      throw std::runtime_error("[save_gguf] dtype " + dtype_name(a.dtype()) + " is not supported");
    if (!names.insert(name).second)
      throw std::invalid_argument("[save_gguf] Duplicate array name '" + name + "'.");
    detail::evaluate(a);
    put_string(head, name);
    detail::put32(head, static_cast<uint32_t>(a.ndim()));
    for (int d = a.ndim() - 1; d >= 0; --d) detail::put64(head, a.shape(d));
    detail::put32(head, *t);
    detail::put64(head, offset);
    offset = align_up(offset + a.nbytes(), kDefaultAlignment);
  }
  head.append(align_up(head.size(), kDefaultAlignment) - head.size(), '\0');
  w.write(head.data(), head.size());
  const std::string zeros(kDefaultAlignment, '\0');
  for (const auto& [name, a] : arrays) {
    detail::write_elements(w, a);
    w.write(zeros.data(), align_up(a.nbytes(), kDefaultAlignment) - a.nbytes());
  }
}

std::pair<NamedArrays, GgufMetadata> load_gguf(Reader& r) {
  Cursor c(r);
  if (r.size() < 24) c.fail("the file is too short for a GGUF header (truncated header)");
  char magic[4];
  c.read(magic, 4);
  if (std::memcmp(magic, "GGUF", 4) != 0) c.fail("the file does not start with 'GGUF'");
  uint32_t version = c.get<uint32_t>();
  if (version != 2 && version != 3)
    c.fail("unsupported GGUF version " + std::to_string(version) + " (2 and 3 are read)");
  uint64_t n_tensors = c.get<uint64_t>();
  uint64_t n_kv = c.get<uint64_t>();
  // A key/value takes at least 12 bytes and a tensor description 24.
  if (n_kv > c.left() / 12 || n_tensors > c.left() / 24)
    c.fail("the header declares " + std::to_string(n_tensors) + " tensors and " +
           std::to_string(n_kv) + " metadata entries, more than the file holds");

  GgufMetadata metadata;
  std::set<std::string> keys;
  uint64_t alignment = kDefaultAlignment;
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = c.string();
    if (!keys.insert(key).second) c.fail("duplicate metadata key '" + key + "'");
    uint32_t type = c.get<uint32_t>();
    GgufValue v = read_value(c, type, key);
    if (key == "general.alignment") {
      auto* a = std::get_if<array>(&v);
      if (!a || a->dtype() != uint32 || a->ndim() != 0) c.fail("'general.alignment' is not a u32");
      alignment = a->data<uint32_t>()[0];
      if (alignment == 0 || (alignment & (alignment - 1)) != 0)
        c.fail("'general.alignment' is not a power of two");
    }
    metadata.emplace_back(std::move(key), std::move(v));
  }

  struct Entry {
    std::string name;
    Dtype dtype;
    Shape shape;
    uint64_t offset, nbytes;
  };
  std::vector<Entry> entries;
  std::set<std::string> names;
  for (uint64_t i = 0; i < n_tensors; ++i) {
    std::string name = c.string();
    if (!names.insert(name).second) c.fail("duplicate tensor name '" + name + "'");
    uint32_t nd = c.get<uint32_t>();
    if (nd > kMaxDims) c.fail("tensor '" + name + "' has " + std::to_string(nd) + " dimensions");
    std::vector<int64_t> dims(nd);
    for (uint32_t d = 0; d < nd; ++d) {
      uint64_t v = c.get<uint64_t>();
      if (v > INT32_MAX) c.fail("tensor '" + name + "' has a dimension over 2^31");
      dims[nd - 1 - d] = static_cast<int64_t>(v); // innermost first in the file
    }
    uint32_t type = c.get<uint32_t>();
    auto dtype = tensor_dtype(type);
    if (!dtype)
      c.fail("tensor '" + name + "' has ggml type " + ggml_type_name(type) +
             ", which Loom does not read (supported: F32, F16, BF16, I8, I16, I32)");
    uint64_t offset = c.get<uint64_t>();
    auto nbytes = detail::checked_nbytes(dims, dtype->size);
    if (!nbytes) c.fail("tensor '" + name + "' has a shape whose size overflows");
    entries.push_back({name, *dtype, Shape(dims.begin(), dims.end()), offset, *nbytes});
  }
  uint64_t data_start = align_up(c.pos(), alignment);
  uint64_t data_len = data_start <= r.size() ? r.size() - data_start : 0;
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.offset != b.offset ? a.offset < b.offset : a.nbytes < b.nbytes;
  });
  for (size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    if (e.offset > data_len || e.nbytes > data_len - e.offset)
      detail::malformed(r, "gguf",
                        "tensor '" + e.name + "' at offset " + std::to_string(e.offset) + " of " +
                            std::to_string(e.nbytes) + " bytes lies beyond the " +
                            std::to_string(data_len) + " data bytes");
    if (i > 0 && e.offset < entries[i - 1].offset + entries[i - 1].nbytes)
      detail::malformed(r, "gguf",
                        "tensors '" + entries[i - 1].name + "' and '" + e.name + "' overlap");
  }
  NamedArrays out;
  for (auto& e : entries) {
    auto data = detail::allocate_checked(e.nbytes);
    r.read_at(data_start + e.offset, data->ptr(), e.nbytes);
    out.emplace_back(e.name, detail::make_array(std::move(data), e.shape, e.dtype));
  }
  return {std::move(out), std::move(metadata)};
}

} // namespace loom::io
