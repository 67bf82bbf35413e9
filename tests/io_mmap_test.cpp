// loom/io lazy loading: npy and safetensors paths are memory-mapped, arrays
// share the mapping (no copy into Loom's pool), the mapping lives exactly as
// long as an array over it, and writes to a loaded array stay private.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "loom/allocator/memory.h"
#include "loom/io/io.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/reduce.h"

using namespace loom;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("loom_io_mmap_test_" + std::to_string(::getpid()));
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

// Lines of /proc/self/maps naming `path`.
int mappings_of(const std::string& path) {
  std::ifstream maps("/proc/self/maps");
  std::string line, real = fs::canonical(path).string();
  int n = 0;
  while (std::getline(maps, line)) {
    if (line.size() >= real.size() &&
        line.compare(line.size() - real.size(), real.size(), real) == 0)
      ++n;
  }
  return n;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

} // namespace

TEST(IoMmap, SafetensorsArraysShareTheMapping) {
  TempDir dir;
  std::string path = (dir.path / "w.safetensors").string();
  io::save_safetensors(path, {{"w", arange(0.0, 1 << 20, 1.0, float32)}, {"b", ones({3})}});
  size_t active = get_active_memory();
  {
    io::Loaded l = io::load(path);
    ASSERT_EQ(l.arrays.size(), 2u);
    EXPECT_LT(get_active_memory() - active, size_t(1) << 16); // nothing copied
    EXPECT_GE(mappings_of(path), 1);
    array w = l.arrays[1].first == "w" ? l.arrays[1].second : l.arrays[0].second;
    l.arrays.clear();
    EXPECT_GE(mappings_of(path), 1); // w still uses it
    array m = max(w);
    m.eval();
    EXPECT_EQ(m.item<float>(), float((1 << 20) - 1));
  }
  EXPECT_EQ(mappings_of(path), 0);
}

TEST(IoMmap, NpyWritesStayPrivateAndReplacementKeepsOldData) {
  TempDir dir;
  std::string path = (dir.path / "w.npy").string();
  io::save(path, arange(0.0, 4096.0, 1.0, float32));
  std::string before = read_file(path);
  {
    array a = *io::load(path).single;
    // An in-place kernel would write through the storage like this.
    static_cast<float*>(a.data_shared_ptr()->ptr_for_write())[7] = -1.0f;
    EXPECT_EQ(a.data<float>()[7], -1.0f);
    io::save(path, full({4096}, array(5.0f))); // rename: a new inode
    EXPECT_EQ(a.data<float>()[4095], 4095.0f); // the old file's page
  }
  EXPECT_NE(read_file(path), before);
  array b = *io::load(path).single;
  EXPECT_EQ(b.data<float>()[7], 5.0f);
}

TEST(IoMmap, BigEndianAndMemoryReadersCopy) {
  // A memory reader cannot share: arrays get their own buffer.
  io::BufferWriter w;
  io::save_npy(w, arange(0.0, 16.0, 1.0, float32));
  auto r = io::memory_reader(w.bytes(), "bytes");
  EXPECT_EQ(r->share(0, 4), nullptr);
  size_t active = get_active_memory();
  array a = io::load_npy(*r);
  EXPECT_GE(get_active_memory() - active, 64u);
  EXPECT_EQ(a.data<float>()[15], 15.0f);
}
