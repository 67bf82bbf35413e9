// Saving and loading arrays: NumPy .npy and .npz, safetensors.
//
// Every parser and writer works on a byte source or sink, so the same code
// serves files, in-memory buffers and Python file objects. Parsers trust
// nothing in a file: a size, shape or offset is checked against the bytes the
// file actually holds before anything is allocated, and errors name the op,
// the file, the format and what is wrong. Writes to a path are atomic: a temp
// file in the same folder is written, flushed to disk and renamed over the
// target, so a failed save never leaves a truncated file where a good one was.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "loom/array.h"

namespace loom::io {

// --- byte sources and sinks ---------------------------------------------------

// Random-access bytes of known size. `name` labels errors (a path, or a
// description of a Python object).
class Reader {
 public:
  virtual ~Reader() = default;
  virtual uint64_t size() const = 0;
  // Reads exactly `n` bytes at `offset` or raises.
  virtual void read_at(uint64_t offset, void* dst, size_t n) = 0;
  // The bytes [offset, offset + n) as array storage without copying them
  // (a memory-mapped file), or null when this reader cannot share its bytes.
  virtual std::shared_ptr<allocator::Data> share(uint64_t /*offset*/, size_t /*n*/) {
    return nullptr;
  }
  const std::string& name() const { return name_; }

 protected:
  explicit Reader(std::string name) : name_(std::move(name)) {}
  std::string name_;
};

// Opens a file for reading; raises "[<op>] Failed to open file <path>".
std::unique_ptr<Reader> open_file(const std::string& path, const char* op = "load");
// Maps a file into memory (read-only file, private copy-on-write pages):
// arrays loaded from it share the mapping, so loading costs only the header
// and an array's pages are read from the file when first touched. The
// mapping lives while the reader or any array over it does. Replacing the
// file by rename (as every Loom save does) leaves the mapped old file intact;
// truncating it in place is undefined, as for any mapped file. Falls back to
// open_file() where the file cannot be mapped (empty, special files).
std::unique_ptr<Reader> map_file(const std::string& path, const char* op = "load");
// Reads from a copy of `bytes`.
std::unique_ptr<Reader> memory_reader(std::string bytes, std::string name);

class Writer {
 public:
  virtual ~Writer() = default;
  virtual void write(const void* src, size_t n) = 0;
  // Overwrites bytes already written (headers whose sizes are known last).
  virtual void write_at(uint64_t offset, const void* src, size_t n) = 0;
  virtual uint64_t tell() const = 0;
};

// Collects the bytes in memory (for Python file objects).
class BufferWriter final : public Writer {
 public:
  void write(const void* src, size_t n) override;
  void write_at(uint64_t offset, const void* src, size_t n) override;
  uint64_t tell() const override { return bytes_.size(); }
  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

// Writes a temp file beside `path`; commit() flushes it to disk and renames
// it over `path`. Destroyed without commit(), it removes the temp file and
// leaves `path` untouched.
class AtomicFileWriter final : public Writer {
 public:
  AtomicFileWriter(std::string path, const char* op);
  ~AtomicFileWriter() override;
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  void write(const void* src, size_t n) override;
  void write_at(uint64_t offset, const void* src, size_t n) override;
  uint64_t tell() const override { return pos_; }
  void commit();
  const std::string& temp_path() const { return temp_; }

 private:
  std::string path_;
  std::string temp_;
  std::string op_;
  int fd_ = -1;
  uint64_t pos_ = 0;
};

// --- formats ------------------------------------------------------------------

// Arrays in file order, with their names.
using NamedArrays = std::vector<std::pair<std::string, array>>;
using StringMap = std::vector<std::pair<std::string, std::string>>;

enum class Format { npy, npz, safetensors, gguf };
// "npy" -> Format::npy ...; raises "[load] Unknown file format <s>".
Format format_from_string(const std::string& s);
// From a path's extension; raises when it has none Loom reads.
Format format_from_path(const std::string& path);

// .npy: one array. Saving evaluates it; any layout is written in C order.
void save_npy(Writer& w, const array& a);
array load_npy(Reader& r);

// .npz: a zip archive of .npy members named <key>.npy (deflated when
// `compressed`).
void save_npz(Writer& w, const NamedArrays& arrays, bool compressed);
NamedArrays load_npz(Reader& r);

// safetensors: a JSON header (names, dtypes, shapes, offsets and a string
// metadata map) and the raw little-endian data.
void save_safetensors(Writer& w, const NamedArrays& arrays, const StringMap& metadata = {});
std::pair<NamedArrays, StringMap> load_safetensors(Reader& r);

// GGUF (version 3): tensors of float32, float16, bfloat16, int8, int16 and
// int32, and metadata values that are strings, lists of strings, or 0-d / 1-d
// arrays (numbers and booleans). Quantized tensor types are refused by name.
using GgufValue = std::variant<array, std::string, std::vector<std::string>>;
using GgufMetadata = std::vector<std::pair<std::string, GgufValue>>;
void save_gguf(Writer& w, const NamedArrays& arrays, const GgufMetadata& metadata = {});
std::pair<NamedArrays, GgufMetadata> load_gguf(Reader& r);

// --- paths ------------------------------------------------------------------

// MLX's conveniences: the format's extension is appended when the path does
// not already end with it ("w" -> "w.npy").
void save(std::string path, const array& a);
void savez(std::string path, const NamedArrays& arrays, bool compressed = false);
void save_safetensors(std::string path, const NamedArrays& arrays, const StringMap& metadata = {});
// Loads any format; `format` overrides the extension.
struct Loaded {
  Format format;
  std::optional<array> single; // npy
  NamedArrays arrays;          // npz, safetensors
  StringMap metadata;          // safetensors
  GgufMetadata gguf_metadata;  // gguf
};
Loaded load(const std::string& path, std::optional<std::string> format = std::nullopt);
Loaded load(Reader& r, Format format);
// Warnings the last loads on this thread raised (e.g. a GGUF tensor cast to
// float16), for the caller to report once it may (Python: with the GIL).
std::vector<std::string> take_load_warnings();

} // namespace loom::io
