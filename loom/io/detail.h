// Pieces shared by the format parsers and writers of loom/io.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "loom/array.h"
#include "loom/io/io.h"

namespace loom::io::detail {

// "[load] Invalid <format> file <name>: <what>." as a std::runtime_error.
[[noreturn]] void malformed(const Reader& r, const char* format, const std::string& what);

// Evaluates `a` (saving is a synchronisation point) and waits for its data.
void evaluate(const array& a);
// Writes the elements of an evaluated array in C order, whatever its layout.
void write_elements(Writer& w, const array& a);

// A buffer for `nbytes` of data; the caller has checked that the file holds them.
std::shared_ptr<allocator::Data> allocate_checked(size_t nbytes);
// The bytes [offset, offset + n) of `r` as array storage: shared with the
// reader's mapping when it has one and `offset` is a multiple of `align` (an
// item size: kernels read whole items), else read into a new buffer.
std::shared_ptr<allocator::Data> read_data(Reader& r, uint64_t offset, size_t n, size_t align);
// An available row-major array over `data`.
array make_array(std::shared_ptr<allocator::Data> data, Shape shape, Dtype dtype);

// Element count of `dims` times `itemsize`, or nullopt on overflow or when a
// dimension does not fit a Loom shape (int32).
std::optional<uint64_t> checked_nbytes(const std::vector<int64_t>& dims, size_t itemsize);

inline uint16_t le16(const unsigned char* p) { return uint16_t(p[0] | (p[1] << 8)); }
inline uint32_t le32(const unsigned char* p) {
  return uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24);
}
inline uint64_t le64(const unsigned char* p) { return le32(p) | (uint64_t(le32(p + 4)) << 32); }
inline void put16(std::string& s, uint16_t v) {
  for (int i = 0; i < 2; ++i) s.push_back(char((v >> (8 * i)) & 0xff));
}
inline void put32(std::string& s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s.push_back(char((v >> (8 * i)) & 0xff));
}
inline void put64(std::string& s, uint64_t v) {
  for (int i = 0; i < 8; ++i) s.push_back(char((v >> (8 * i)) & 0xff));
}

// A window [offset, offset + size) of another reader (a stored zip member).
class SubReader final : public Reader {
 public:
  SubReader(Reader& parent, uint64_t offset, uint64_t size, std::string name)
      : Reader(std::move(name)), parent_(parent), offset_(offset), size_(size) {}
  uint64_t size() const override { return size_; }
  void read_at(uint64_t offset, void* dst, size_t n) override;

 private:
  Reader& parent_;
  uint64_t offset_;
  uint64_t size_;
};

} // namespace loom::io::detail
