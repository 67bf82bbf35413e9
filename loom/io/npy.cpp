// NumPy's .npy format (format versions 1.0, 2.0 and 3.0): a magic string, a
// header that is a Python dict literal, then the raw elements.
#include <algorithm>
#include <bit>
#include <cctype>
#include <cstring>

#include "loom/io/detail.h"
#include "loom/ops/shape.h"

namespace loom::io {

namespace {

static_assert(std::endian::native == std::endian::little, "loom/io assumes a little-endian host");

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
// No real header comes near this; it bounds what a hostile file can make us read.
constexpr uint32_t kMaxHeader = 1 << 20;

// NumPy's type string for each dtype. bfloat16 has no NumPy type: like MLX it
// is written as two opaque bytes ('<V2'), which MLX and Loom read back.
std::string descr_of(Dtype d) {
  switch (d.val) {
    case Dtype::Val::bool_:
      return "|b1";
    case Dtype::Val::uint8:
      return "|u1";
    case Dtype::Val::int8:
      return "|i1";
    case Dtype::Val::uint16:
      return "<u2";
    case Dtype::Val::uint32:
      return "<u4";
    case Dtype::Val::uint64:
      return "<u8";
    case Dtype::Val::int16:
      return "<i2";
    case Dtype::Val::int32:
      return "<i4";
    case Dtype::Val::int64:
      return "<i8";
    case Dtype::Val::float16:
      return "<f2";
    case Dtype::Val::bfloat16:
      return "<V2";
    case Dtype::Val::float32:
      return "<f4";
    case Dtype::Val::float64:
      return "<f8";
    case Dtype::Val::complex64:
      return "<c8";
  }
  throw std::logic_error("[save] unknown dtype");
}

struct Descr {
  Dtype dtype = float32;
  bool swap = false; // big-endian data
};

Descr parse_descr(const Reader& r, const std::string& s) {
  auto unsupported = [&]() -> Descr {
    std::string why = s.find('O') != std::string::npos
                          ? " (object arrays need pickle, which Loom never loads)"
                          : "";
    throw std::invalid_argument("[load] Unsupported array protocol type-string: " + s +
                                " in npy file " + r.name() + why + ".");
  };
  if (s.size() < 3) unsupported();
  char order = s[0];
  char kind = s[1];
  int size = 0;
  for (size_t i = 2; i < s.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(s[i])) || size > 100) unsupported();
    size = size * 10 + (s[i] - '0');
  }
  if (order != '<' && order != '>' && order != '|' && order != '=') unsupported();
  Descr d;
  d.swap = order == '>' && size > 1;
  switch (kind) {
    case 'b':
      if (size == 1)
        d.dtype = bool_;
      else
        unsupported();
      break;
    case 'u':
      if (size == 1)
        d.dtype = uint8;
      else if (size == 2)
        d.dtype = uint16;
      else if (size == 4)
        d.dtype = uint32;
      else if (size == 8)
        d.dtype = uint64;
      else
        unsupported();
      break;
    case 'i':
      if (size == 1)
        d.dtype = int8;
      else if (size == 2)
        d.dtype = int16;
      else if (size == 4)
        d.dtype = int32;
      else if (size == 8)
        d.dtype = int64;
      else
        unsupported();
      break;
    case 'f':
      if (size == 2)
        d.dtype = float16;
      else if (size == 4)
        d.dtype = float32;
      else if (size == 8)
        d.dtype = float64;
      else
        unsupported();
      break;
    case 'c':
      if (size == 8)
        d.dtype = complex64;
      else
        unsupported();
      break;
    case 'V':
      if (size == 2)
        d.dtype = bfloat16;
      else
        unsupported();
      break;
    default:
      unsupported();
  }
  return d;
}

// The header: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// A small parser for exactly the literals NumPy writes (strings, booleans,
// integers, tuples); anything else is an error, never evaluated.
class HeaderParser {
 public:
  HeaderParser(const Reader& r, const std::string& text) : r_(r), s_(text) {}

  void parse(std::string& descr, bool& fortran, std::vector<int64_t>& shape) {
    bool seen_descr = false, seen_fortran = false, seen_shape = false;
    expect('{');
    while (true) {
      skip_space();
      if (peek() == '}') break;
      std::string key = string_literal();
      expect(':');
      if (key == "descr") {
        skip_space();
        if (peek() != '\'' && peek() != '"')
          fail("structured dtypes (a list 'descr') are not supported");
        descr = string_literal();
        seen_descr = true;
      } else if (key == "fortran_order") {
        fortran = boolean();
        seen_fortran = true;
      } else if (key == "shape") {
        shape = tuple();
        seen_shape = true;
      } else {
        fail("unexpected key '" + key + "' in the header");
      }
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      skip_space();
      if (peek() != '}') fail("expected ',' or '}' in the header");
    }
    ++pos_;
    if (!seen_descr || !seen_fortran || !seen_shape)
      fail("the header lacks one of 'descr', 'fortran_order' and 'shape'");
  }

 private:
  [[noreturn]] void fail(const std::string& what) { detail::malformed(r_, "npy", what); }
  void skip_space() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void expect(char c) {
    skip_space();
    if (peek() != c) fail(std::string("expected '") + c + "' in the header");
    ++pos_;
  }
  std::string string_literal() {
    skip_space();
    char q = peek();
    if (q != '\'' && q != '"') fail("expected a string in the header");
    auto end = s_.find(q, pos_ + 1);
    if (end == std::string::npos) fail("unterminated string in the header");
    std::string out = s_.substr(pos_ + 1, end - pos_ - 1);
    pos_ = end + 1;
    return out;
  }
  bool boolean() {
    skip_space();
    if (s_.compare(pos_, 4, "True") == 0) {
      pos_ += 4;
      return true;
    }
    if (s_.compare(pos_, 5, "False") == 0) {
      pos_ += 5;
      return false;
    }
    fail("'fortran_order' must be True or False");
  }
  std::vector<int64_t> tuple() {
    std::vector<int64_t> out;
    expect('(');
    while (true) {
      skip_space();
      if (peek() == ')') break;
      if (!std::isdigit(static_cast<unsigned char>(peek())))
        fail("'shape' must be a tuple of non-negative integers");
      int64_t v = 0;
      while (std::isdigit(static_cast<unsigned char>(peek()))) {
        v = v * 10 + (s_[pos_++] - '0');
        if (v > INT32_MAX) fail("a dimension of 'shape' exceeds 2147483647");
      }
      out.push_back(v);
      if (out.size() > 64) fail("'shape' has more than 64 dimensions");
      skip_space();
      if (peek() == ',')
        ++pos_;
      else if (peek() != ')')
        fail("expected ',' or ')' in 'shape'");
    }
    ++pos_;
    return out;
  }

  const Reader& r_;
  const std::string& s_;
  size_t pos_ = 0;
};

void byteswap(void* data, size_t nbytes, Dtype d) {
  // complex64 is two float32 values, each swapped on its own.
  size_t width = d == complex64 ? 4 : d.size;
  auto* p = static_cast<unsigned char*>(data);
  for (size_t i = 0; i + width <= nbytes; i += width) std::reverse(p + i, p + i + width);
}

std::string shape_tuple(const Shape& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

} // namespace

void save_npy(Writer& w, const array& a) {
  detail::evaluate(a);
  std::string dict = "{'descr': '" + descr_of(a.dtype()) +
                     "', 'fortran_order': False, 'shape': " + shape_tuple(a.shape()) + ", }";
  // Pad with spaces so the data starts on a 64-byte boundary (NumPy's rule);
  // the header ends with a newline. Version 2.0 only when 1.0's 16-bit
  // length cannot hold it.
  auto padded_len = [&](size_t prefix) {
    size_t total = prefix + dict.size() + 1;
    return (total + 63) / 64 * 64 - prefix;
  };
  size_t header_len = padded_len(10);
  bool v2 = header_len > 65535;
  if (v2) header_len = padded_len(12);
  dict.append(header_len - dict.size() - 1, ' ');
  dict.push_back('\n');
  std::string head(kMagic, kMagicLen);
  head.push_back(v2 ? 2 : 1);
  head.push_back(0);
  if (v2)
    detail::put32(head, static_cast<uint32_t>(header_len));
  else
    detail::put16(head, static_cast<uint16_t>(header_len));
  head += dict;
  w.write(head.data(), head.size());
  detail::write_elements(w, a);
}

array load_npy(Reader& r) {
  unsigned char pre[12];
  if (r.size() < 10) detail::malformed(r, "npy", "the file is too short for an npy header");
  r.read_at(0, pre, 10);
  if (std::memcmp(pre, kMagic, kMagicLen) != 0)
    detail::malformed(r, "npy", "the file does not start with the npy magic string");
  int major = pre[6];
  uint64_t header_len;
  uint64_t header_start;
  if (major == 1) {
    header_len = detail::le16(pre + 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (r.size() < 12) detail::malformed(r, "npy", "the file is too short for an npy header");
    r.read_at(10, pre + 10, 2);
    header_len = detail::le32(pre + 8);
    header_start = 12;
  } else {
    detail::malformed(r, "npy", "unsupported format version " + std::to_string(major));
  }
  if (header_len > kMaxHeader || header_start + header_len > r.size())
    detail::malformed(r, "npy",
                      "the header declares " + std::to_string(header_len) +
                          " bytes but the file holds " + std::to_string(r.size()) +
                          " bytes (truncated header)");
  std::string text(header_len, '\0');
  r.read_at(header_start, text.data(), header_len);

  std::string descr;
  bool fortran = false;
  std::vector<int64_t> dims;
  HeaderParser(r, text).parse(descr, fortran, dims);
  Descr d = parse_descr(r, descr);
  auto nbytes = detail::checked_nbytes(dims, d.dtype.size);
  uint64_t data_start = header_start + header_len;
  uint64_t available = r.size() - data_start;
  if (!nbytes) detail::malformed(r, "npy", "the shape's element count overflows");
  if (*nbytes > available)
    detail::malformed(r, "npy",
                      "the header declares " + std::to_string(*nbytes) +
                          " bytes of data but the file holds " + std::to_string(available));

  std::shared_ptr<allocator::Data> data;
  if (d.swap) {
    data = detail::allocate_checked(*nbytes);
    r.read_at(data_start, data->ptr(), *nbytes);
    byteswap(data->ptr(), *nbytes, d.dtype);
  } else {
    // Lazy for a mapped file: the pages are read when the array is used.
    data = detail::read_data(r, data_start, *nbytes, d.dtype.size);
  }
  Shape shape(dims.begin(), dims.end());
  if (!fortran || shape.size() <= 1) return detail::make_array(std::move(data), shape, d.dtype);
  // Column-major data is the row-major data of the reversed shape; the
  // transpose is a view, so nothing is copied here.
  Shape reversed(shape.rbegin(), shape.rend());
  return transpose(detail::make_array(std::move(data), reversed, d.dtype));
}

} // namespace loom::io
