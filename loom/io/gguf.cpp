// GGUF, version 3 (ggml's file format): a header, typed key/value metadata,
// tensor descriptions (dimensions innermost first, a ggml type, an offset),
// then the tensor data, every piece aligned to `general.alignment` (32).
#include <algorithm>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "loom/io/detail.h"
#include "loom/types/half.h"

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

// Block-quantized ggml types: elements per block and bytes per block.
struct BlockType {
  uint32_t type;
  int block;
  int bytes;
};

// Read into Loom's affine quantization (group 32, MLX's layout), as MLX does.
constexpr BlockType kQ4_0{2, 32, 18}, kQ4_1{3, 32, 20}, kQ8_0{8, 32, 34};
// Dequantized to float16, as MLX does, with a warning.
constexpr BlockType kQ2_K{10, 256, 84}, kQ4_K{12, 256, 144}, kQ6_K{14, 256, 210};

std::optional<BlockType> block_type(uint32_t t) {
  for (const BlockType& b : {kQ4_0, kQ4_1, kQ8_0, kQ2_K, kQ4_K, kQ6_K})
    if (b.type == t) return b;
  return std::nullopt;
}

bool is_affine_type(uint32_t t) { return t == kQ4_0.type || t == kQ4_1.type || t == kQ8_0.type; }

float half_at(const unsigned char* p) {
  return static_cast<float>(float16_t::to_float(detail::le16(p)));
}

// One Q4_0/Q4_1/Q8_0 block as MLX's affine codes (4 or 8 words), a scale and
// a bias: Q4_0 is (q - 8) d, Q4_1 is q d + m, Q8_0 is q d with signed q
// (stored as q + 128 with bias -128 d). ggml keeps elements j and j + 16 of a
// 4-bit block in one byte; MLX packs element i at bits 4 (i mod 8) of word i / 8.
void affine_block(uint32_t type, const unsigned char* b, uint32_t* codes, float16_t* scale,
                  float16_t* bias) {
  const float d = half_at(b);
  uint8_t q[32];
  if (type == kQ8_0.type) {
    for (int i = 0; i < 32; ++i) q[i] = static_cast<uint8_t>(static_cast<int8_t>(b[2 + i]) + 128);
    for (int w = 0; w < 8; ++w)
      codes[w] = uint32_t(q[4 * w]) | (uint32_t(q[4 * w + 1]) << 8) |
                 (uint32_t(q[4 * w + 2]) << 16) | (uint32_t(q[4 * w + 3]) << 24);
    *scale = float16_t(d);
    *bias = float16_t(-128.0f * d);
    return;
  }
  const unsigned char* qs = b + (type == kQ4_1.type ? 4 : 2);
  for (int j = 0; j < 16; ++j) {
    q[j] = qs[j] & 15;
    q[j + 16] = qs[j] >> 4;
  }
  for (int w = 0; w < 4; ++w) {
    uint32_t word = 0;
    for (int k = 0; k < 8; ++k) word |= uint32_t(q[8 * w + k]) << (4 * k);
    codes[w] = word;
  }
  *scale = float16_t(d);
  *bias = type == kQ4_1.type ? float16_t(half_at(b + 2)) : float16_t(-8.0f * d);
}

// The 6-bit scale and min of sub-block j of a Q4_K block.
void k4_scale_min(int j, const unsigned char* q, int& sc, int& m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// One K-quant block of 256 elements to float (ggml's reference dequantizers).
void k_block(uint32_t type, const unsigned char* b, float* y) {
  if (type == kQ4_K.type) {
    const float d = half_at(b), dmin = half_at(b + 2);
    const unsigned char* scales = b + 4;
    const unsigned char* q = b + 16;
    for (int j = 0, is = 0; j < 256; j += 64, is += 2) {
      int sc, m;
      k4_scale_min(is, scales, sc, m);
      const float d1 = d * sc, m1 = dmin * m;
      k4_scale_min(is + 1, scales, sc, m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
      q += 32;
    }
  } else if (type == kQ6_K.type) {
    const unsigned char* ql = b;
    const unsigned char* qh = b + 128;
    const auto* sc = reinterpret_cast<const int8_t*>(b + 192);
    const float d = half_at(b + 208);
    for (int n = 0; n < 256; n += 128) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = int((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = int((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = int((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = int((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * sc[is] * q1;
        y[l + 32] = d * sc[is + 2] * q2;
        y[l + 64] = d * sc[is + 4] * q3;
        y[l + 96] = d * sc[is + 6] * q4;
      }
      y += 128;
      ql += 64;
      qh += 32;
      sc += 8;
    }
  } else { // Q2_K
    const unsigned char* scales = b;
    const unsigned char* q = b + 16;
    const float d = half_at(b + 80), dmin = half_at(b + 82);
    int is = 0;
    for (int n = 0; n < 256; n += 128) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int half = 0; half < 2; ++half) {
          const int sc = scales[is++];
          const float dl = d * (sc & 0xF), ml = dmin * (sc >> 4);
          for (int l = 0; l < 16; ++l) *y++ = dl * ((q[l + 16 * half] >> shift) & 3) - ml;
        }
      }
      q += 32;
    }
  }
}

thread_local std::vector<std::string> g_warnings;

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
    std::optional<BlockType> blocks; // a block-quantized ggml type
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
    auto blocks = block_type(type);
    auto dtype = blocks ? std::optional<Dtype>(uint8) : tensor_dtype(type);
    if (!dtype)
      c.fail("tensor '" + name + "' has ggml type " + ggml_type_name(type) +
             ", which Loom does not read (supported: F32, F16, BF16, I8, I16, I32, Q4_0, Q4_1, "
             "Q8_0, Q2_K, Q4_K, Q6_K)");
    uint64_t offset = c.get<uint64_t>();
    std::optional<uint64_t> nbytes;
    if (blocks) {
      if (nd == 0 || dims.back() % blocks->block != 0)
        c.fail("tensor '" + name + "' of type " + ggml_type_name(type) +
               " has a row length that is not a multiple of " + std::to_string(blocks->block));
      std::vector<int64_t> block_dims = dims;
      block_dims.back() = dims.back() / blocks->block;
      nbytes = detail::checked_nbytes(block_dims, blocks->bytes);
      // The decoded form is larger: 4 bytes per element at most.
      if (nbytes && !detail::checked_nbytes(dims, 4)) nbytes.reset();
    } else {
      nbytes = detail::checked_nbytes(dims, dtype->size);
    }
    if (!nbytes) c.fail("tensor '" + name + "' has a shape whose size overflows");
    entries.push_back({name, *dtype, Shape(dims.begin(), dims.end()), offset, *nbytes, blocks});
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
    if (!e.blocks) {
      out.emplace_back(e.name, detail::make_array(std::move(data), e.shape, e.dtype));
      continue;
    }
    const BlockType& bt = *e.blocks;
    const auto* raw = static_cast<const unsigned char*>(data->ptr());
    const uint64_t n_blocks = e.nbytes / bt.bytes;
    if (is_affine_type(bt.type)) {
      // name -> codes; name without ".weight" + ".scales" / ".biases", as MLX.
      const int bits = bt.type == kQ8_0.type ? 8 : 4;
      Shape codes_shape = e.shape, group_shape = e.shape;
      // In 64 bits: a row may be up to 2^31 long (an empty tensor's, with no
      // bytes to hold it), and the product with `bits` would overflow.
      codes_shape.back() = static_cast<int32_t>(int64_t{e.shape.back()} * bits / 32);
      group_shape.back() = e.shape.back() / 32;
      auto codes = detail::allocate_checked(n_blocks * bits * 4);
      auto scales = detail::allocate_checked(n_blocks * 2);
      auto biases = detail::allocate_checked(n_blocks * 2);
      auto* cp = static_cast<uint32_t*>(codes->ptr());
      auto* sp = static_cast<float16_t*>(scales->ptr());
      auto* bp = static_cast<float16_t*>(biases->ptr());
      for (uint64_t i = 0; i < n_blocks; ++i)
        affine_block(bt.type, raw + i * bt.bytes, cp + i * bits, sp + i, bp + i);
      std::string base = e.name;
      const std::string suffix = ".weight";
      if (base.size() >= suffix.size() &&
          base.compare(base.size() - suffix.size(), suffix.size(), suffix) == 0)
        base.resize(base.size() - suffix.size());
      out.emplace_back(e.name, detail::make_array(std::move(codes), codes_shape, uint32));
      out.emplace_back(base + ".scales",
                       detail::make_array(std::move(scales), group_shape, float16));
      out.emplace_back(base + ".biases",
                       detail::make_array(std::move(biases), group_shape, float16));
      continue;
    }
    // K-quants: decoded to float16 (MLX does the same, silently).
    g_warnings.push_back("[load] GGUF tensor '" + e.name + "' of type " + ggml_type_name(bt.type) +
                         " is not a quantization Loom holds; it was dequantized to float16.");
    auto half = detail::allocate_checked(n_blocks * bt.block * 2);
    auto* hp = static_cast<float16_t*>(half->ptr());
    std::vector<float> buf(bt.block);
    for (uint64_t i = 0; i < n_blocks; ++i) {
      k_block(bt.type, raw + i * bt.bytes, buf.data());
      for (int j = 0; j < bt.block; ++j) hp[i * bt.block + j] = float16_t(buf[j]);
    }
    out.emplace_back(e.name, detail::make_array(std::move(half), e.shape, float16));
  }
  return {std::move(out), std::move(metadata)};
}

std::vector<std::string> take_load_warnings() {
  std::vector<std::string> out;
  out.swap(g_warnings);
  return out;
}

} // namespace loom::io
