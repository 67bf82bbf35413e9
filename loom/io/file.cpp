// Byte sources and sinks for loom/io: files (atomic writes), memory, windows.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <random>

#include "loom/io/detail.h"

namespace loom::io {

namespace {

class FileReader final : public Reader {
 public:
  FileReader(int fd, uint64_t size, std::string path)
      : Reader(std::move(path)), fd_(fd), size_(size) {}
  ~FileReader() override { ::close(fd_); }
  uint64_t size() const override { return size_; }
  void read_at(uint64_t offset, void* dst, size_t n) override {
    if (offset > size_ || n > size_ - offset) {
      throw std::runtime_error("[load] Unable to read " + std::to_string(n) + " bytes at offset " +
                               std::to_string(offset) + " from file " + name_ + " of " +
                               std::to_string(size_) + " bytes.");
    }
    auto* out = static_cast<char*>(dst);
    while (n > 0) {
      ssize_t got = ::pread(fd_, out, n, static_cast<off_t>(offset));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        throw std::runtime_error("[load] Unable to read from file " + name_ + ": " +
                                 (got < 0 ? std::strerror(errno) : "unexpected end of file") + ".");
      }
      out += got;
      offset += static_cast<uint64_t>(got);
      n -= static_cast<size_t>(got);
    }
  }

 private:
  int fd_;
  uint64_t size_;
};

// A whole file mapped privately: pages are read on first touch, and writes
// to an array's storage (in-place kernels) go to private copies, never to
// the file.
struct Mapping {
  void* base = nullptr;
  size_t length = 0;
  ~Mapping() {
    if (base) ::munmap(base, length);
  }
};

class MappedReader final : public Reader {
 public:
  MappedReader(std::shared_ptr<Mapping> map, std::string path)
      : Reader(std::move(path)), map_(std::move(map)) {}
  uint64_t size() const override { return map_->length; }
  void read_at(uint64_t offset, void* dst, size_t n) override {
    if (offset > map_->length || n > map_->length - offset) {
      throw std::runtime_error("[load] Unable to read " + std::to_string(n) + " bytes at offset " +
                               std::to_string(offset) + " from file " + name_ + " of " +
                               std::to_string(map_->length) + " bytes.");
    }
    if (n > 0) std::memcpy(dst, static_cast<char*>(map_->base) + offset, n);
  }
  std::shared_ptr<allocator::Data> share(uint64_t offset, size_t n) override {
    if (offset > map_->length || n > map_->length - offset || n == 0) return nullptr;
    // The deleter holds the mapping: it is unmapped when the last array over
    // it (and this reader) is gone.
    std::shared_ptr<Mapping> keep = map_;
    return std::make_shared<allocator::Data>(static_cast<char*>(map_->base) + offset, n,
                                             [keep](void*) mutable { keep.reset(); });
  }

 private:
  std::shared_ptr<Mapping> map_;
};

class MemoryReader final : public Reader {
 public:
  MemoryReader(std::string bytes, std::string name)
      : Reader(std::move(name)), bytes_(std::move(bytes)) {}
  uint64_t size() const override { return bytes_.size(); }
  void read_at(uint64_t offset, void* dst, size_t n) override {
    if (offset > bytes_.size() || n > bytes_.size() - offset) {
      throw std::runtime_error("[load] Unable to read " + std::to_string(n) + " bytes at offset " +
                               std::to_string(offset) + " from " + name_ + " of " +
                               std::to_string(bytes_.size()) + " bytes.");
    }
    if (n > 0) std::memcpy(dst, bytes_.data() + offset, n);
  }

 private:
  std::string bytes_;
};

[[noreturn]] void io_error(const std::string& op, const std::string& what,
                           const std::string& path) {
  throw std::runtime_error("[" + op + "] " + what + " " + path + ": " + std::strerror(errno) + ".");
}

void write_all(int fd, const void* src, size_t n, uint64_t offset, const std::string& op,
               const std::string& path) {
  auto* p = static_cast<const char*>(src);
  while (n > 0) {
    ssize_t put = ::pwrite(fd, p, n, static_cast<off_t>(offset));
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) io_error(op, "Failed to write file", path);
    p += put;
    offset += static_cast<uint64_t>(put);
    n -= static_cast<size_t>(put);
  }
}

std::string parent_dir(const std::string& path) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

} // namespace

std::unique_ptr<Reader> open_file(const std::string& path, const char* op) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(std::string("[") + op + "] Failed to open file " + path);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw std::runtime_error(std::string("[") + op + "] Failed to open file " + path +
                             ": not a regular file.");
  }
  return std::make_unique<FileReader>(fd, static_cast<uint64_t>(st.st_size), path);
}

std::unique_ptr<Reader> map_file(const std::string& path, const char* op) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(std::string("[") + op + "] Failed to open file " + path);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0) {
    ::close(fd);
    return open_file(path, op);
  }
  auto map = std::make_shared<Mapping>();
  map->length = static_cast<size_t>(st.st_size);
  void* base = ::mmap(nullptr, map->length, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  ::close(fd); // the mapping keeps the file (its inode) alive
  if (base == MAP_FAILED) return open_file(path, op);
  map->base = base;
  return std::make_unique<MappedReader>(std::move(map), path);
}

std::unique_ptr<Reader> memory_reader(std::string bytes, std::string name) {
  return std::make_unique<MemoryReader>(std::move(bytes), std::move(name));
}

void BufferWriter::write(const void* src, size_t n) {
  bytes_.append(static_cast<const char*>(src), n);
}

void BufferWriter::write_at(uint64_t offset, const void* src, size_t n) {
  if (offset + n > bytes_.size()) throw std::logic_error("[BufferWriter] write_at past the end.");
  std::memcpy(bytes_.data() + offset, src, n);
}

AtomicFileWriter::AtomicFileWriter(std::string path, const char* op)
    : path_(std::move(path)), op_(op) {
  // The temp file lives in the target's folder so rename() stays on one file
  // system and is atomic; a random suffix keeps concurrent saves apart.
  static std::atomic<uint64_t> counter{0};
  std::random_device rd;
  auto slash = path_.rfind('/');
  std::string base = slash == std::string::npos ? path_ : path_.substr(slash + 1);
  temp_ = parent_dir(path_) + "/." + base + ".tmp" + std::to_string(::getpid()) + "_" +
          std::to_string(counter++) + "_" + std::to_string(rd());
  fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd_ < 0) throw std::runtime_error("[" + op_ + "] Failed to open file " + path_);
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(temp_.c_str());
  }
}

void AtomicFileWriter::write(const void* src, size_t n) {
  write_all(fd_, src, n, pos_, op_, path_);
  pos_ += n;
}

void AtomicFileWriter::write_at(uint64_t offset, const void* src, size_t n) {
  write_all(fd_, src, n, offset, op_, path_);
}

void AtomicFileWriter::commit() {
  if (::fsync(fd_) != 0) io_error(op_, "Failed to flush file", path_);
  if (::close(fd_) != 0) {
    fd_ = -1;
    ::unlink(temp_.c_str());
    io_error(op_, "Failed to close file", path_);
  }
  fd_ = -1;
  if (::rename(temp_.c_str(), path_.c_str()) != 0) {
    int err = errno;
    ::unlink(temp_.c_str());
    errno = err;
    io_error(op_, "Failed to replace file", path_);
  }
  // The rename itself is durable only once the folder is flushed.
  int dir = ::open(parent_dir(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

namespace detail {

void SubReader::read_at(uint64_t offset, void* dst, size_t n) {
  if (offset > size_ || n > size_ - offset) {
    throw std::runtime_error("[load] Unable to read " + std::to_string(n) + " bytes at offset " +
                             std::to_string(offset) + " from " + name_ + " of " +
                             std::to_string(size_) + " bytes.");
  }
  parent_.read_at(offset_ + offset, dst, n);
}

[[noreturn]] void malformed(const Reader& r, const char* format, const std::string& what) {
  throw std::runtime_error("[load] Invalid " + std::string(format) + " file " + r.name() + ": " +
                           what + ".");
}

void evaluate(const array& a) {
  array x = a;
  x.eval();
  x.wait();
}

void write_elements(Writer& w, const array& a) {
  size_t item = a.itemsize();
  if (a.size() == 0) return;
  if (a.flags().row_contiguous) {
    w.write(a.data<char>(), a.nbytes());
    return;
  }
  // Any other layout (transposed, broadcast, sliced): gather rows of the last
  // axis into a staging buffer and write it in chunks.
  const auto& shape = a.shape();
  const auto& strides = a.strides();
  int nd = a.ndim();
  const char* base = a.data<char>();
  int64_t inner = shape[nd - 1];
  int64_t inner_stride = strides[nd - 1] * static_cast<int64_t>(item);
  std::vector<int64_t> idx(nd, 0);
  std::string buf;
  constexpr size_t kChunk = 1 << 20;
  buf.reserve(kChunk + inner * item);
  size_t rows = a.size() / static_cast<size_t>(inner);
  for (size_t row = 0; row < rows; ++row) {
    int64_t off = 0;
    for (int d = 0; d < nd - 1; ++d) off += idx[d] * strides[d];
    const char* p = base + off * static_cast<int64_t>(item);
    for (int64_t j = 0; j < inner; ++j) buf.append(p + j * inner_stride, item);
    if (buf.size() >= kChunk) {
      w.write(buf.data(), buf.size());
      buf.clear();
    }
    for (int d = nd - 2; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  w.write(buf.data(), buf.size());
}

std::shared_ptr<allocator::Data> read_data(Reader& r, uint64_t offset, size_t n, size_t align) {
  if (n > 0 && align > 0 && offset % align == 0) {
    if (auto shared = r.share(offset, n)) return shared;
  }
  auto data = allocate_checked(n);
  if (n > 0) r.read_at(offset, data->ptr(), n);
  return data;
}

std::shared_ptr<allocator::Data> allocate_checked(size_t nbytes) {
  return allocator::allocate(nbytes);
}

array make_array(std::shared_ptr<allocator::Data> data, Shape shape, Dtype dtype) {
  array out = array::empty(std::move(shape), dtype);
  out.set_data(std::move(data));
  out.set_status(Status::available);
  return out;
}

std::optional<uint64_t> checked_nbytes(const std::vector<int64_t>& dims, size_t itemsize) {
  uint64_t total = itemsize;
  for (int64_t d : dims) {
    if (d < 0 || d > INT32_MAX) return std::nullopt;
    if (__builtin_mul_overflow(total, static_cast<uint64_t>(d), &total)) return std::nullopt;
  }
  return total;
}

} // namespace detail

} // namespace loom::io
