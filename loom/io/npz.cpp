// NumPy's .npz: a zip archive whose members are .npy files. The zip reader
// and writer follow PKWARE's APPNOTE (stored and deflated members, ZIP64 for
// large archives); zlib does the deflating and the CRC-32.
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <set>

#include "loom/io/detail.h"

namespace loom::io {

namespace {

constexpr uint32_t kLocalSig = 0x04034b50;
constexpr uint32_t kCentralSig = 0x02014b50;
constexpr uint32_t kEndSig = 0x06054b50;
constexpr uint32_t kEnd64Sig = 0x06064b50;
constexpr uint32_t kEnd64LocatorSig = 0x07064b50;
constexpr uint32_t k32Max = 0xffffffffu;
// Deflate cannot expand data by more than ~1032x; a member claiming more
// than that is a lie we refuse before allocating.
constexpr uint64_t kMaxInflateRatio = 1032;

[[noreturn]] void bad_zip(const Reader& r, const std::string& what) {
  detail::malformed(r, "npz", what);
}

// A zip member as the central directory describes it.
struct Member {
  std::string name;
  uint16_t method = 0;
  uint16_t flags = 0;
  uint32_t crc = 0;
  uint64_t compressed = 0;
  uint64_t uncompressed = 0;
  uint64_t local_offset = 0;
};

// The members of the archive, from its central directory.
std::vector<Member> read_directory(Reader& r) {
  uint64_t size = r.size();
  if (size < 22) {
    throw std::invalid_argument(
        "[load_npz] Input must be a zip file or a file-like object that "
        "can be opened with zipfile.ZipFile (" +
        r.name() + " is too short for a zip archive).");
  }
  // The end record sits in the last 22 + 65535 (comment) bytes.
  uint64_t tail_len = std::min<uint64_t>(size, 22 + 65535);
  std::vector<unsigned char> tail(tail_len);
  r.read_at(size - tail_len, tail.data(), tail_len);
  int64_t at = -1;
  for (int64_t i = static_cast<int64_t>(tail_len) - 22; i >= 0; --i) {
    if (detail::le32(&tail[i]) == kEndSig) {
      at = i;
      break;
    }
  }
  if (at < 0) {
    throw std::invalid_argument(
        "[load_npz] Input must be a zip file or a file-like object that "
        "can be opened with zipfile.ZipFile (" +
        r.name() + " has no zip end-of-directory record).");
  }
  const unsigned char* end = &tail[at];
  uint64_t entries = detail::le16(end + 10);
  uint64_t dir_size = detail::le32(end + 12);
  uint64_t dir_offset = detail::le32(end + 16);
  uint64_t end_pos = size - tail_len + static_cast<uint64_t>(at);
  if (entries == 0xffff || dir_size == k32Max || dir_offset == k32Max) {
    if (end_pos < 20) bad_zip(r, "ZIP64 locator missing");
    unsigned char loc[20];
    r.read_at(end_pos - 20, loc, 20);
    if (detail::le32(loc) != kEnd64LocatorSig) bad_zip(r, "ZIP64 locator missing");
    uint64_t rec_pos = detail::le64(loc + 8);
    unsigned char rec[56];
    if (rec_pos > size || size - rec_pos < 56) bad_zip(r, "ZIP64 end record out of range");
    r.read_at(rec_pos, rec, 56);
    if (detail::le32(rec) != kEnd64Sig) bad_zip(r, "bad ZIP64 end record signature");
    entries = detail::le64(rec + 32);
    dir_size = detail::le64(rec + 40);
    dir_offset = detail::le64(rec + 48);
  }
  if (dir_offset > size || dir_size > size - dir_offset)
    bad_zip(r, "the central directory lies beyond the end of the file");
  // Each entry takes at least 46 bytes: the count cannot exceed what fits.
  if (entries > dir_size / 46) bad_zip(r, "the central directory is shorter than its entries");
  std::vector<unsigned char> dir(dir_size);
  r.read_at(dir_offset, dir.data(), dir_size);

  std::vector<Member> out;
  size_t p = 0;
  for (uint64_t e = 0; e < entries; ++e) {
    if (dir_size - p < 46 || detail::le32(&dir[p]) != kCentralSig)
      bad_zip(r, "corrupt central directory entry " + std::to_string(e));
    const unsigned char* h = &dir[p];
    Member m;
    m.flags = detail::le16(h + 8);
    m.method = detail::le16(h + 10);
    m.crc = detail::le32(h + 16);
    m.compressed = detail::le32(h + 20);
    m.uncompressed = detail::le32(h + 24);
    size_t name_len = detail::le16(h + 28);
    size_t extra_len = detail::le16(h + 30);
    size_t comment_len = detail::le16(h + 32);
    m.local_offset = detail::le32(h + 42);
    if (dir_size - p - 46 < name_len + extra_len + comment_len)
      bad_zip(r, "central directory entry " + std::to_string(e) + " runs past the directory");
    m.name.assign(reinterpret_cast<const char*>(h + 46), name_len);
    // ZIP64 extra field: the 64-bit values of whichever fields are saturated.
    const unsigned char* x = h + 46 + name_len;
    size_t q = 0;
    while (q + 4 <= extra_len) {
      uint16_t id = detail::le16(x + q);
      uint16_t len = detail::le16(x + q + 2);
      if (q + 4 + len > extra_len) bad_zip(r, "corrupt extra field of " + m.name);
      if (id == 0x0001) {
        const unsigned char* v = x + q + 4;
        size_t left = len;
        auto take = [&](uint64_t& field) {
          if (field != k32Max) return;
          if (left < 8) bad_zip(r, "short ZIP64 extra field of " + m.name);
          field = detail::le64(v);
          v += 8;
          left -= 8;
        };
        take(m.uncompressed);
        take(m.compressed);
        take(m.local_offset);
      }
      q += 4 + len;
    }
    p += 46 + name_len + extra_len + comment_len;
    out.push_back(std::move(m));
  }
  return out;
}

// Streams a deflated member; reads must be sequential (load_npy's are).
class InflateReader final : public Reader {
 public:
  InflateReader(Reader& parent, uint64_t offset, uint64_t compressed, uint64_t size,
                std::string name)
      : Reader(std::move(name)),
        parent_(parent),
        offset_(offset),
        compressed_(compressed),
        size_(size) {
    if (inflateInit2(&z_, -MAX_WBITS) != Z_OK)
      throw std::runtime_error("[load] zlib failed to initialise");
  }
  ~InflateReader() override { inflateEnd(&z_); }
  uint64_t size() const override { return size_; }
  uint32_t crc() const { return crc_; }
  uint64_t produced() const { return pos_; }
  // Reads what the array did not need, so the CRC covers the whole member.
  void drain() {
    unsigned char rest[4096];
    while (pos_ < size_)
      read_at(pos_, rest, static_cast<size_t>(std::min<uint64_t>(sizeof(rest), size_ - pos_)));
  }

  void read_at(uint64_t offset, void* dst, size_t n) override {
    if (offset != pos_ || offset > size_ || n > size_ - offset)
      detail::malformed(*this, "npz", "member read out of order or past its declared size");
    auto* out = static_cast<unsigned char*>(dst);
    while (n > 0) {
      if (z_.avail_in == 0 && consumed_ < compressed_) {
        size_t take = static_cast<size_t>(std::min<uint64_t>(in_.size(), compressed_ - consumed_));
        parent_.read_at(offset_ + consumed_, in_.data(), take);
        consumed_ += take;
        z_.next_in = in_.data();
        z_.avail_in = static_cast<uInt>(take);
      }
      size_t chunk = std::min<size_t>(n, 1u << 30);
      z_.next_out = out;
      z_.avail_out = static_cast<uInt>(chunk);
      int rc = inflate(&z_, Z_NO_FLUSH);
      size_t got = chunk - z_.avail_out;
      crc_ = static_cast<uint32_t>(crc32_z(crc_, out, got));
      out += got;
      n -= got;
      pos_ += got;
      if (rc == Z_STREAM_END && n > 0)
        detail::malformed(*this, "npz", "the deflated data ends before its declared size");
      if (rc != Z_OK && rc != Z_STREAM_END && !(rc == Z_BUF_ERROR && got > 0))
        detail::malformed(
            *this, "npz",
            std::string("corrupt deflated data (") + (z_.msg ? z_.msg : "zlib") + ")");
      if (got == 0 && z_.avail_in == 0 && consumed_ >= compressed_ && n > 0)
        detail::malformed(*this, "npz", "the deflated data is truncated");
    }
  }

 private:
  Reader& parent_;
  uint64_t offset_, compressed_, size_;
  uint64_t consumed_ = 0, pos_ = 0;
  uint32_t crc_ = 0;
  z_stream z_{};
  std::vector<unsigned char> in_ = std::vector<unsigned char>(1 << 16);
};

// Checks a stored member's CRC-32 over the reads load_npy makes, which are
// sequential, so each byte is read from the file once.
class CrcReader final : public Reader {
 public:
  explicit CrcReader(Reader& inner) : Reader(inner.name()), inner_(inner) {}
  uint64_t size() const override { return inner_.size(); }
  uint32_t crc() const { return crc_; }
  uint64_t produced() const { return pos_; }
  void read_at(uint64_t offset, void* dst, size_t n) override {
    if (offset != pos_) detail::malformed(*this, "npz", "member read out of order");
    inner_.read_at(offset, dst, n);
    crc_ = static_cast<uint32_t>(crc32_z(crc_, static_cast<const Bytef*>(dst), n));
    pos_ += n;
  }
  void drain() {
    unsigned char rest[4096];
    while (pos_ < size())
      read_at(pos_, rest, static_cast<size_t>(std::min<uint64_t>(sizeof(rest), size() - pos_)));
  }

 private:
  Reader& inner_;
  uint32_t crc_ = 0;
  uint64_t pos_ = 0;
};

// Feeds what it is given to a zip member: CRC, sizes and (when deflating) zlib.
class MemberWriter final : public Writer {
 public:
  MemberWriter(Writer& out, bool deflate) : out_(out), deflate_(deflate) {
    if (deflate_ && deflateInit2(&z_, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -MAX_WBITS, 8,
                                 Z_DEFAULT_STRATEGY) != Z_OK)
      throw std::runtime_error("[savez_compressed] zlib failed to initialise");
  }
  ~MemberWriter() override {
    if (deflate_) deflateEnd(&z_);
  }
  void write(const void* src, size_t n) override {
    crc_ = static_cast<uint32_t>(crc32_z(crc_, static_cast<const Bytef*>(src), n));
    size_ += n;
    if (!deflate_) {
      out_.write(src, n);
      written_ += n;
      return;
    }
    pump(static_cast<const unsigned char*>(src), n, Z_NO_FLUSH);
  }
  void write_at(uint64_t, const void*, size_t) override {
    throw std::logic_error("[savez] a zip member is written in order");
  }
  uint64_t tell() const override { return size_; }
  void finish() {
    if (deflate_) pump(nullptr, 0, Z_FINISH);
  }
  uint32_t crc() const { return crc_; }
  uint64_t size() const { return size_; }
  uint64_t written() const { return written_; }

 private:
  void pump(const unsigned char* src, size_t n, int flush) {
    unsigned char buf[1 << 16];
    do {
      size_t chunk = std::min<size_t>(n, 1u << 30);
      z_.next_in = const_cast<unsigned char*>(src);
      z_.avail_in = static_cast<uInt>(chunk);
      int mode = (n == chunk) ? flush : Z_NO_FLUSH;
      do {
        z_.next_out = buf;
        z_.avail_out = sizeof(buf);
        deflate(&z_, mode);
        size_t have = sizeof(buf) - z_.avail_out;
        out_.write(buf, have);
        written_ += have;
      } while (z_.avail_out == 0);
      src += chunk;
      n -= chunk;
    } while (n > 0);
  }

  Writer& out_;
  bool deflate_;
  z_stream z_{};
  uint32_t crc_ = 0;
  uint64_t size_ = 0, written_ = 0;
};

bool is_ascii(const std::string& s) {
  for (unsigned char c : s)
    if (c >= 0x80) return false;
  return true;
}

} // namespace

void save_npz(Writer& w, const NamedArrays& arrays, bool compressed) {
  const char* op = compressed ? "savez_compressed" : "savez";
  std::set<std::string> names;
  for (const auto& [name, a] : arrays) {
    if (!names.insert(name).second)
      throw std::invalid_argument(std::string("[") + op + "] Duplicate array name '" + name + "'.");
    detail::evaluate(a);
  }
  std::string central;
  uint64_t count = 0;
  for (const auto& [key, a] : arrays) {
    std::string name = key + ".npy";
    if (name.size() > 0xffff)
      throw std::invalid_argument(std::string("[") + op +
                                  "] Array name too long for a zip member.");
    uint16_t flags = is_ascii(name) ? 0 : 0x0800; // UTF-8 names
    uint16_t method = compressed ? 8 : 0;
    uint64_t local = w.tell();
    // Like NumPy, every local header carries a ZIP64 field, so members of any
    // size are written in one pass and the sizes filled in afterwards.
    std::string lh;
    detail::put32(lh, kLocalSig);
    detail::put16(lh, 45);
    detail::put16(lh, flags);
    detail::put16(lh, method);
    detail::put16(lh, 0);    // time
    detail::put16(lh, 0x21); // date: 1980-01-01
    detail::put32(lh, 0);    // crc, patched
    detail::put32(lh, k32Max);
    detail::put32(lh, k32Max);
    detail::put16(lh, static_cast<uint16_t>(name.size()));
    detail::put16(lh, 20);
    lh += name;
    detail::put16(lh, 0x0001);
    detail::put16(lh, 16);
    size_t sizes_at = lh.size();
    detail::put64(lh, 0);
    detail::put64(lh, 0);
    w.write(lh.data(), lh.size());

    MemberWriter m(w, compressed);
    save_npy(m, a);
    m.finish();

    std::string patch;
    detail::put32(patch, m.crc());
    w.write_at(local + 14, patch.data(), 4);
    patch.clear();
    detail::put64(patch, m.size());
    detail::put64(patch, m.written());
    w.write_at(local + sizes_at, patch.data(), 16);

    bool big = m.size() >= k32Max || m.written() >= k32Max || local >= k32Max;
    std::string extra;
    if (big) {
      detail::put16(extra, 0x0001);
      detail::put16(extra, 24);
      detail::put64(extra, m.size());
      detail::put64(extra, m.written());
      detail::put64(extra, local);
    }
    detail::put32(central, kCentralSig);
    detail::put16(central, 45);
    detail::put16(central, 45);
    detail::put16(central, flags);
    detail::put16(central, method);
    detail::put16(central, 0);
    detail::put16(central, 0x21);
    detail::put32(central, m.crc());
    detail::put32(central, big ? k32Max : static_cast<uint32_t>(m.written()));
    detail::put32(central, big ? k32Max : static_cast<uint32_t>(m.size()));
    detail::put16(central, static_cast<uint16_t>(name.size()));
    detail::put16(central, static_cast<uint16_t>(extra.size()));
    detail::put16(central, 0);           // comment
    detail::put16(central, 0);           // disk
    detail::put16(central, 0);           // internal attributes
    detail::put32(central, 0x81a40000u); // external: a regular file, rw-r--r--
    detail::put32(central, big ? k32Max : static_cast<uint32_t>(local));
    central += name;
    central += extra;
    ++count;
  }
  uint64_t dir_offset = w.tell();
  w.write(central.data(), central.size());
  bool zip64 = count >= 0xffff || dir_offset >= k32Max || central.size() >= k32Max;
  std::string end;
  if (zip64) {
    uint64_t rec = w.tell();
    detail::put32(end, kEnd64Sig);
    detail::put64(end, 44);
    detail::put16(end, 45);
    detail::put16(end, 45);
    detail::put32(end, 0);
    detail::put32(end, 0);
    detail::put64(end, count);
    detail::put64(end, count);
    detail::put64(end, central.size());
    detail::put64(end, dir_offset);
    detail::put32(end, kEnd64LocatorSig);
    detail::put32(end, 0);
    detail::put64(end, rec);
    detail::put32(end, 1);
  }
  detail::put32(end, kEndSig);
  detail::put16(end, 0);
  detail::put16(end, 0);
  detail::put16(end, zip64 ? 0xffff : static_cast<uint16_t>(count));
  detail::put16(end, zip64 ? 0xffff : static_cast<uint16_t>(count));
  detail::put32(end, zip64 ? k32Max : static_cast<uint32_t>(central.size()));
  detail::put32(end, zip64 ? k32Max : static_cast<uint32_t>(dir_offset));
  detail::put16(end, 0);
  w.write(end.data(), end.size());
}

NamedArrays load_npz(Reader& r) {
  std::vector<Member> members = read_directory(r);
  NamedArrays out;
  std::set<std::string> seen;
  for (const Member& m : members) {
    std::string where = r.name() + " (member " + m.name + ")";
    if (m.flags & 0x1) bad_zip(r, "member " + m.name + " is encrypted");
    if (m.method != 0 && m.method != 8)
      bad_zip(r, "member " + m.name + " uses compression method " + std::to_string(m.method) +
                     " (only stored and deflated members are read)");
    unsigned char lh[30];
    if (m.local_offset > r.size() || r.size() - m.local_offset < 30)
      bad_zip(r, "member " + m.name + " starts beyond the end of the file");
    r.read_at(m.local_offset, lh, 30);
    if (detail::le32(lh) != kLocalSig) bad_zip(r, "bad local header of member " + m.name);
    uint64_t data = m.local_offset + 30 + detail::le16(lh + 26) + detail::le16(lh + 28);
    if (data > r.size() || m.compressed > r.size() - data)
      bad_zip(r, "member " + m.name + " declares " + std::to_string(m.compressed) +
                     " bytes beyond the end of the file");
    if (m.method == 0 && m.compressed != m.uncompressed)
      bad_zip(r, "stored member " + m.name + " has differing sizes");
    if (m.method == 8 && m.uncompressed > m.compressed * kMaxInflateRatio + 1024)
      bad_zip(r, "member " + m.name + " claims " + std::to_string(m.uncompressed) + " bytes from " +
                     std::to_string(m.compressed) +
                     " compressed bytes, more than deflate can produce");

    std::string key = m.name;
    if (key.size() >= 4 && key.compare(key.size() - 4, 4, ".npy") == 0) key.resize(key.size() - 4);
    if (!seen.insert(key).second) bad_zip(r, "duplicate member " + m.name);

    std::optional<array> a;
    uint32_t crc;
    uint64_t produced;
    if (m.method == 0) {
      detail::SubReader sub(r, data, m.compressed, where);
      CrcReader in(sub);
      a = load_npy(in);
      in.drain();
      crc = in.crc();
      produced = in.produced();
    } else {
      InflateReader in(r, data, m.compressed, m.uncompressed, where);
      a = load_npy(in);
      in.drain();
      crc = in.crc();
      produced = in.produced();
    }
    if (produced != m.uncompressed || crc != m.crc)
      bad_zip(r, "CRC-32 mismatch in member " + m.name + " (the data is corrupt)");
    out.emplace_back(std::move(key), std::move(*a));
  }
  return out;
}

} // namespace loom::io
