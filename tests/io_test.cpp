// loom/io: round trips of every dtype through npy, npz and safetensors,
// malformed files (clear errors, no oversized allocation) and atomic writes.
#include "loom/io/io.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "loom/allocator/memory.h"
#include "loom/ops/creation.h"
#include "loom/ops/shape.h"

using namespace loom;
namespace fs = std::filesystem;

namespace {

std::vector<Dtype> all_dtypes() {
  std::vector<Dtype> out;
  for (int i = 0; i < kNumDtypes; ++i) out.push_back(dtype_from_index(i));
  return out;
}

// Distinct bytes for every element, so a reordering or a shift shows.
array pattern(Shape shape, Dtype d) {
  size_t n = shape_size(shape) * d.size;
  std::vector<unsigned char> bytes(n);
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<unsigned char>((i * 37 + 11) & 0x7f);
  if (d == bool_)
    for (auto& b : bytes) b &= 1;
  return array(bytes.data(), shape, d);
}

std::string bytes_of(array a) {
  a = copy(a);
  a.eval();
  a.wait();
  return std::string(a.data<char>(), a.nbytes());
}

std::string to_string(io::BufferWriter& w) { return w.bytes(); }

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "no error";
}

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("loom_io_test_" + std::to_string(::getpid()));
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

} // namespace

TEST(Io, NpyRoundTripEveryDtypeAndShape) {
  for (Dtype d : all_dtypes()) {
    for (Shape shape : {Shape{}, Shape{0}, Shape{5}, Shape{2, 3}, Shape{2, 0, 3}, Shape{3, 1, 4}}) {
      array a = pattern(shape, d);
      io::BufferWriter w;
      io::save_npy(w, a);
      EXPECT_EQ(w.bytes().size() % 64, a.nbytes() % 64) << "data starts 64-byte aligned";
      auto r = io::memory_reader(w.bytes(), "mem.npy");
      array b = io::load_npy(*r);
      EXPECT_EQ(b.dtype(), d);
      EXPECT_EQ(b.shape(), shape);
      EXPECT_EQ(bytes_of(b), bytes_of(a)) << dtype_name(d);
    }
  }
}

TEST(Io, NpyWritesAnyLayoutInCOrder) {
  array a = pattern({3, 4, 2}, int32);
  array t = transpose(a, {2, 0, 1});
  io::BufferWriter w;
  io::save_npy(w, t);
  auto r = io::memory_reader(w.bytes(), "t.npy");
  array b = io::load_npy(*r);
  EXPECT_EQ(b.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(bytes_of(b), bytes_of(t));

  array bc = broadcast_to(pattern({1, 3}, float32), {4, 3});
  io::BufferWriter w2;
  io::save_npy(w2, bc);
  auto r2 = io::memory_reader(w2.bytes(), "b.npy");
  EXPECT_EQ(bytes_of(io::load_npy(*r2)), bytes_of(bc));
}

TEST(Io, NpyBigEndianAndFortranInput) {
  // Hand-written headers: big-endian int32 (2, 3) and a Fortran-ordered one.
  auto npy = [](const std::string& dict, const std::string& data) {
    std::string h = dict;
    while ((10 + h.size() + 1) % 64) h += ' ';
    h += '\n';
    std::string out("\x93NUMPY\x01\x00", 8);
    out.push_back(char(h.size() & 0xff));
    out.push_back(char(h.size() >> 8));
    return out + h + data;
  };
  std::string be;
  for (int i = 0; i < 6; ++i) be += std::string("\0\0\0", 3) + char(i);
  auto r = io::memory_reader(npy("{'descr': '>i4', 'fortran_order': False, 'shape': (2, 3), }", be),
                             "be.npy");
  array a = io::load_npy(*r);
  std::vector<int32_t> want{0, 1, 2, 3, 4, 5};
  EXPECT_EQ(bytes_of(a), std::string(reinterpret_cast<char*>(want.data()), 24));

  std::vector<int32_t> col{0, 3, 1, 4, 2, 5}; // column-major (2, 3)
  auto rf = io::memory_reader(npy("{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3), }",
                                  std::string(reinterpret_cast<char*>(col.data()), 24)),
                              "f.npy");
  array f = io::load_npy(*rf);
  EXPECT_EQ(f.shape(), (Shape{2, 3}));
  EXPECT_EQ(bytes_of(f), std::string(reinterpret_cast<char*>(want.data()), 24));

  auto ro = io::memory_reader(
      npy("{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", std::string(8, '\0')),
      "obj.npy");
  std::string e = error_of([&] { io::load_npy(*ro); });
  EXPECT_NE(e.find("Unsupported array protocol type-string: |O"), std::string::npos) << e;
  EXPECT_NE(e.find("pickle"), std::string::npos) << e;
}

TEST(Io, NpyMalformedFilesRaiseWithoutAllocating) {
  io::BufferWriter w;
  io::save_npy(w, pattern({4, 4}, float32));
  const std::string good = w.bytes();

  auto err = [](const std::string& bytes) {
    auto r = io::memory_reader(bytes, "bad.npy");
    return error_of([&] { io::load_npy(*r); });
  };
  EXPECT_NE(err(good.substr(0, 5)).find("too short"), std::string::npos);
  EXPECT_NE(err("XXNUMPY" + good.substr(7)).find("magic"), std::string::npos);
  EXPECT_NE(err(good.substr(0, 40)).find("truncated header"), std::string::npos);
  EXPECT_NE(err(good.substr(0, good.size() - 1)).find("declares 64 bytes of data"),
            std::string::npos);

  // A header claiming 10^12 elements must fail before allocating.
  size_t base = get_active_memory();
  reset_peak_memory();
  std::string huge = good;
  auto at = huge.find("(4, 4)");
  huge.replace(at, 6, "(1000000, 1000000)");
  std::string e = err(huge);
  EXPECT_NE(e.find("Invalid npy file bad.npy"), std::string::npos) << e;
  EXPECT_LT(get_peak_memory() - base, size_t(1) << 20);
}

TEST(Io, NpzRoundTripStoredAndDeflated) {
  for (bool compressed : {false, true}) {
    io::NamedArrays in;
    int i = 0;
    for (Dtype d : all_dtypes())
      in.emplace_back("a.b/" + std::to_string(i++) + "_é", pattern({3, 5}, d));
    in.emplace_back("empty", pattern({0, 2}, float32));
    in.emplace_back("scalar", pattern({}, int64));
    io::BufferWriter w;
    io::save_npz(w, in, compressed);
    auto r = io::memory_reader(w.bytes(), "mem.npz");
    io::NamedArrays out = io::load_npz(*r);
    ASSERT_EQ(out.size(), in.size());
    for (size_t k = 0; k < in.size(); ++k) {
      EXPECT_EQ(out[k].first, in[k].first);
      EXPECT_EQ(out[k].second.dtype(), in[k].second.dtype());
      EXPECT_EQ(out[k].second.shape(), in[k].second.shape());
      EXPECT_EQ(bytes_of(out[k].second), bytes_of(in[k].second));
    }
  }
}

TEST(Io, NpzCorruptionIsDetected) {
  io::NamedArrays in{{"x", pattern({64}, float32)}};
  io::BufferWriter w;
  io::save_npz(w, in, false);
  std::string bytes = w.bytes();
  bytes[200] ^= 0x5a; // inside x's data
  auto r = io::memory_reader(bytes, "c.npz");
  std::string e = error_of([&] { io::load_npz(*r); });
  EXPECT_NE(e.find("CRC-32 mismatch"), std::string::npos) << e;

  auto r2 = io::memory_reader("not a zip at all, just text", "t.npz");
  e = error_of([&] { io::load_npz(*r2); });
  EXPECT_NE(e.find("zip"), std::string::npos) << e;

  auto r3 = io::memory_reader(w.bytes().substr(0, w.bytes().size() - 30), "cut.npz");
  e = error_of([&] { io::load_npz(*r3); });
  EXPECT_NE(e.find("cut.npz"), std::string::npos) << e;
}

TEST(Io, SafetensorsRoundTripWithMetadata) {
  io::NamedArrays in;
  int i = 0;
  for (Dtype d : all_dtypes())
    in.emplace_back("layer." + std::to_string(i++) + ".ü", pattern({2, 3}, d));
  in.emplace_back("empty", pattern({0}, bfloat16));
  io::StringMap meta{{"format", "mlx"}, {"note", "ünïcode"}};
  io::BufferWriter w;
  io::save_safetensors(w, in, meta);
  uint64_t header_len;
  std::memcpy(&header_len, w.bytes().data(), 8);
  EXPECT_EQ(header_len % 8, 0u);
  auto r = io::memory_reader(w.bytes(), "m.safetensors");
  auto [out, meta_out] = io::load_safetensors(*r);
  ASSERT_EQ(out.size(), in.size());
  for (size_t k = 0; k < in.size(); ++k) {
    EXPECT_EQ(out[k].first, in[k].first);
    EXPECT_EQ(out[k].second.dtype(), in[k].second.dtype());
    EXPECT_EQ(bytes_of(out[k].second), bytes_of(in[k].second));
  }
  EXPECT_EQ(meta_out, meta);
}

TEST(Io, SafetensorsMalformedHeaders) {
  auto file = [](const std::string& header, size_t data_bytes) {
    std::string out(8, '\0');
    uint64_t n = header.size();
    std::memcpy(out.data(), &n, 8);
    return out + header + std::string(data_bytes, '\0');
  };
  auto err = [](const std::string& bytes) {
    auto r = io::memory_reader(bytes, "bad.safetensors");
    return error_of([&] { io::load_safetensors(*r); });
  };
  std::string t = R"("t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  EXPECT_EQ(err(file("{" + t + "}", 8)), "no error");
  EXPECT_NE(err("abc").find("truncated header"), std::string::npos);
  std::string big(8, '\xff');
  EXPECT_NE(err(big + "{}").find("truncated header"), std::string::npos);
  EXPECT_NE(err(file("{" + t + "," + t + "}", 8)).find("duplicate key 't'"), std::string::npos);
  EXPECT_NE(err(file(R"({"t":{"dtype":"F99","shape":[2],"data_offsets":[0,8]}})", 8))
                .find("unsupported dtype 'F99'"),
            std::string::npos);
  EXPECT_NE(err(file("{" + t + "}", 4)).find("out of range"), std::string::npos);
  EXPECT_NE(
      err(file(R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8)).find("need 12"),
      std::string::npos);
  EXPECT_NE(err(file("{not json", 0)).find("not valid JSON"), std::string::npos);
  EXPECT_NE(err(file(R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},)"
                     R"("b":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}})",
                     8))
                .find("overlap"),
            std::string::npos);
  // 10^12 elements: refused before any allocation.
  size_t base = get_active_memory();
  reset_peak_memory();
  std::string e = err(file(
      R"({"t":{"dtype":"F32","shape":[1000000,1000000],"data_offsets":[0,4000000000000]}})", 16));
  EXPECT_NE(e.find("Invalid safetensors file bad.safetensors"), std::string::npos) << e;
  EXPECT_LT(get_peak_memory() - base, size_t(1) << 20);
}

TEST(Io, AtomicSaveKeepsThePreviousFileOnFailure) {
  TempDir dir;
  std::string path = (dir.path / "ckpt.safetensors").string();
  io::save_safetensors(path, {{"w", pattern({4}, float32)}});
  std::string before;
  {
    std::ifstream f(path, std::ios::binary);
    before.assign(std::istreambuf_iterator<char>(f), {});
  }
  {
    io::AtomicFileWriter w(path, "save_safetensors");
    w.write("partial", 7);
    EXPECT_TRUE(fs::exists(w.temp_path()));
    // Destroyed without commit(): as if the save failed half way.
  }
  std::string after;
  {
    std::ifstream f(path, std::ios::binary);
    after.assign(std::istreambuf_iterator<char>(f), {});
  }
  EXPECT_EQ(after, before);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator{}), 1);
}

TEST(Io, PathsGetTheirExtensionAndFormatIsInferred) {
  TempDir dir;
  std::string base = (dir.path / "w").string();
  io::save(base, pattern({2, 2}, float16));
  io::savez(base, {{"a", pattern({3}, int8)}}, true);
  io::save_safetensors(base, {{"a", pattern({3}, bfloat16)}});
  EXPECT_TRUE(fs::exists(base + ".npy"));
  EXPECT_TRUE(fs::exists(base + ".npz"));
  EXPECT_TRUE(fs::exists(base + ".safetensors"));
  EXPECT_EQ(io::load(base + ".npy").single->dtype(), float16);
  EXPECT_EQ(io::load(base + ".npz").arrays.at(0).second.dtype(), int8);
  EXPECT_EQ(io::load(base + ".safetensors").arrays.at(0).second.dtype(), bfloat16);
  EXPECT_EQ(io::load(base + ".npy", "npy").format, io::Format::npy);
  EXPECT_NE(error_of([&] { io::load(base); }).find("Could not infer file format"),
            std::string::npos);
  EXPECT_NE(error_of([&] { io::load(base + ".npy", "foo"); }).find("Unknown file format foo"),
            std::string::npos);
  EXPECT_NE(error_of([&] { io::load(base + ".missing.npy"); }).find("Failed to open file"),
            std::string::npos);
}

TEST(Io, GgufRoundTripWithMetadata) {
  io::NamedArrays in;
  for (Dtype d : {float32, float16, bfloat16, int8, int16, int32})
    in.emplace_back("blk." + dtype_name(d), pattern({3, 2, 5}, d));
  in.emplace_back("scalar", pattern({}, float32));
  in.emplace_back("empty", pattern({0, 4}, float16));
  io::GgufMetadata meta{{"general.name", std::string("tiny")},
                        {"tokens", std::vector<std::string>{"a", "b", "ü"}},
                        {"n", array(7)},
                        {"v", pattern({4}, uint64)}};
  io::BufferWriter w;
  io::save_gguf(w, in, meta);
  EXPECT_EQ(w.bytes().size() % 32, 0u);
  auto r = io::memory_reader(w.bytes(), "m.gguf");
  auto [out, meta_out] = io::load_gguf(*r);
  ASSERT_EQ(out.size(), in.size());
  for (const auto& [name, a] : in) {
    auto it = std::find_if(out.begin(), out.end(), [&](auto& p) { return p.first == name; });
    ASSERT_NE(it, out.end()) << name;
    EXPECT_EQ(it->second.shape(), a.shape());
    EXPECT_EQ(bytes_of(it->second), bytes_of(a)) << name;
  }
  ASSERT_EQ(meta_out.size(), 4u);
  EXPECT_EQ(std::get<std::string>(meta_out[0].second), "tiny");
  EXPECT_EQ(std::get<std::vector<std::string>>(meta_out[1].second).size(), 3u);
  EXPECT_EQ(bytes_of(std::get<array>(meta_out[2].second)), bytes_of(array(7)));
  EXPECT_EQ(bytes_of(std::get<array>(meta_out[3].second)), bytes_of(pattern({4}, uint64)));

  std::string e = error_of([&] { io::save_gguf(w, {{"u", pattern({2}, uint8)}}); });
  EXPECT_NE(e.find("[save_gguf] dtype uint8 is not supported"), std::string::npos) << e;
}

// Random corruptions of valid files (byte flips, truncations, inserted
// runs): every parser either loads or raises a std::exception, never
// crashes, hangs or allocates beyond the file. A cheap, always-on companion
// of a real fuzzer.
TEST(Io, MutatedFilesLoadOrRaise) {
  io::NamedArrays arrays{
      {"a", pattern({3, 4}, float32)}, {"b.c", pattern({5}, int16)}, {"s", pattern({}, int32)}};
  std::vector<std::pair<io::Format, std::string>> seeds;
  {
    io::BufferWriter w;
    io::save_npy(w, arrays[0].second);
    seeds.emplace_back(io::Format::npy, w.bytes());
  }
  for (bool c : {false, true}) {
    io::BufferWriter w;
    io::save_npz(w, arrays, c);
    seeds.emplace_back(io::Format::npz, w.bytes());
  }
  {
    io::BufferWriter w;
    io::save_safetensors(w, arrays, {{"k", "v"}});
    seeds.emplace_back(io::Format::safetensors, w.bytes());
  }
  {
    io::BufferWriter w;
    io::save_gguf(w, arrays, {{"k", std::string("v")}, {"n", array(3)}});
    seeds.emplace_back(io::Format::gguf, w.bytes());
  }
  std::mt19937_64 rng(1234);
  size_t base = get_active_memory();
  reset_peak_memory();
  int loaded = 0, raised = 0;
  for (auto& [format, seed] : seeds) {
    for (int i = 0; i < 3000; ++i) {
      std::string m = seed;
      int edits = 1 + static_cast<int>(rng() % 4);
      for (int k = 0; k < edits; ++k) {
        size_t at = rng() % m.size();
        switch (rng() % 4) {
          case 0:
            m[at] = static_cast<char>(rng());
            break;
          case 1:
            m[at] ^= static_cast<char>(1 << (rng() % 8));
            break;
          case 2:
            m.resize(at);
            break;
          case 3:
            m.insert(at, std::string(1 + rng() % 16, static_cast<char>(rng())));
            break;
        }
        if (m.empty()) m = "x";
      }
      auto r = io::memory_reader(m, "mutant");
      try {
        io::load(*r, format);
        ++loaded;
      } catch (const std::exception&) {
        ++raised;
      }
    }
  }
  EXPECT_GT(raised, 1000);
  EXPECT_GT(loaded, 100);
  EXPECT_LT(get_peak_memory() - base, size_t(64) << 20);
}

// Inputs the fuzzer once failed on (tests/fuzz/regressions/<format>-*, kept in
// scripts/fuzz_all.sh's corpora too; the first byte is the harness's format
// selector): each loads or raises, under ctest and the ASan build's ctest.
TEST(Io, FuzzRegressionsLoadOrRaise) {
  const char* root = std::getenv("LOOM_SOURCE_DIR");
  fs::path dir = (root ? fs::path(root) : fs::path(__FILE__).parent_path().parent_path()) /
                 "tests" / "fuzz" / "regressions";
  int n = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::string name = entry.path().filename().string();
    std::string format = name.substr(0, name.find('-'));
    if (format != "npy" && format != "npz" && format != "safetensors" && format != "gguf") continue;
    std::ifstream f(entry.path(), std::ios::binary);
    std::string bytes(std::istreambuf_iterator<char>(f), {});
    ASSERT_FALSE(bytes.empty()) << name;
    auto r = io::memory_reader(bytes.substr(1), name);
    try {
      io::Loaded out = io::load(*r, io::format_from_string(format));
      for (auto& [key, a] : out.arrays) a.eval();
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
    ++n;
  }
  EXPECT_GE(n, 1);
}
