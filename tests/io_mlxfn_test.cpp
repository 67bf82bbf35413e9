// loom/io/mlxfn: functions exported by MLX 0.32.4 (the committed fixtures of
// python/tests/test_mlxfn.py, written by MLX) read and run from C++, and
// malformed MLX files raising clear errors.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "loom/io/export.h"
#include "loom/ops.h"

using namespace loom;
namespace fs = std::filesystem;

namespace {

// The repository root: ctest passes it (tests/CMakeLists.txt), since __FILE__
// may be relative to some other build directory when ccache rewrote it.
fs::path source_root() {
  if (const char* dir = std::getenv("LOOM_SOURCE_DIR")) return dir;
  return fs::path(__FILE__).parent_path().parent_path();
}

fs::path fixtures() { return source_root() / "python" / "tests" / "fixtures" / "mlxfn"; }

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "no error";
}

} // namespace

TEST(IoMlxfn, MlpMatchesMlxOutputs) {
  io::ImportedFunction f = io::import_function((fixtures() / "mlp.mlxfn").string());
  io::Loaded data = io::load((fixtures() / "mlp.npz").string());
  std::map<std::string, array> by_name(data.arrays.begin(), data.arrays.end());
  std::vector<array> out = f({by_name.at("t0_pos_0")}, {});
  ASSERT_EQ(out.size(), 1u);
  array diff = max(abs(subtract(out[0], by_name.at("t0_out_0"))));
  diff.eval();
  EXPECT_LT(diff.item<float>(), 1e-5f);
}

TEST(IoMlxfn, EveryFixtureParses) {
  // The fixtures were traced on MLX's CPU; imported on a GPU-default machine
  // their linalg nodes would refuse the GPU (MLX's rule), which is not what
  // this test checks.
  const Device previous = default_device();
  set_default_device(Device(Device::cpu, 0));
  int n = 0;
  for (const auto& entry : fs::directory_iterator(fixtures())) {
    if (entry.path().extension() != ".mlxfn") continue;
    auto r = io::memory_reader(read_file(entry.path()), entry.path().filename().string());
    EXPECT_TRUE(io::is_mlxfn(*r)) << entry.path();
    io::ExportedFunction f = io::read_function(*r);
    EXPECT_GE(f.traces.size(), 1u) << entry.path();
    ++n;
  }
  set_default_device(previous);
  EXPECT_GE(n, 30);
}

TEST(IoMlxfn, MalformedFilesNameTheProblem) {
  std::string raw = read_file(fixtures() / "matmul.mlxfn");
  for (size_t cut : {size_t(12), size_t(30), raw.size() / 2, raw.size() - 1}) {
    auto r = io::memory_reader(raw.substr(0, cut), "cut.mlxfn");
    std::string e = error_of([&] { io::read_function(*r); });
    EXPECT_NE(e.find("[import_function] Invalid MLX function file (.mlxfn) cut.mlxfn"),
              std::string::npos)
        << e;
  }
  std::string renamed = raw;
  size_t at = renamed.find("Matmul");
  ASSERT_NE(at, std::string::npos);
  renamed.replace(at, 6, "Matmux");
  auto r = io::memory_reader(renamed, "renamed.mlxfn");
  EXPECT_NE(error_of([&] { io::read_function(*r); }).find("MLX primitive 'Matmux'"),
            std::string::npos);
}

// Inputs the fuzzer once crashed on (scripts/fuzz_all.sh keeps them in its
// corpora too): each must raise a clear error now, here under ctest (and the
// ASan build's ctest) as well.
TEST(IoMlxfn, FuzzRegressionsRaise) {
  fs::path dir = source_root() / "tests" / "fuzz" / "regressions";
  int n = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::string name = entry.path().filename().string();
    if (name.rfind("mlxfn-", 0) != 0 && name.rfind("export-", 0) != 0) continue;
    auto r = io::memory_reader(read_file(entry.path()), name);
    EXPECT_NE(error_of([&] { io::read_function(*r); }).find("[import_function]"), std::string::npos)
        << name;
    ++n;
  }
  EXPECT_GE(n, 1);
}

// write_mlxfn: Loom's graph in MLX's layout, read back by the .mlxfn reader
// (MLX's own reader checks the committed loom_*.mlxfn fixtures in the
// Python oracle run).
TEST(IoMlxfn, WriterRoundTripsThroughTheReader) {
  array w = reshape(arange(0.0, 12.0, 1.0, float32), {3, 4});
  w.eval();
  io::KwFn fun = [w](const std::vector<array>& a, const std::map<std::string, array>&) {
    array h = matmul(a[0], w);
    return std::vector<array>{softmax(h, std::vector<int>{-1}), sum(h, std::vector<int>{1}),
                              fast::rms_norm(h, std::nullopt, 1e-5f), argmax(h, 1)};
  };
  array x = reshape(arange(-3.0, 3.0, 1.0, float32), {2, 3});
  io::ExportedFunction exported;
  exported.traces.push_back(io::trace_for_export(fun, {x}, {}, false));
  io::BufferWriter bytes;
  io::write_mlxfn(bytes, exported);
  auto r = io::memory_reader(bytes.bytes(), "written.mlxfn");
  ASSERT_TRUE(io::is_mlxfn(*r));
  io::ImportedFunction f(io::read_function(*r));
  std::vector<array> got = f({x}, {});
  std::vector<array> want = fun({x}, {});
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k) {
    EXPECT_EQ(got[k].shape(), want[k].shape());
    array diff = max(abs(subtract(astype(got[k], float32), astype(want[k], float32))));
    diff.eval();
    EXPECT_LT(diff.item<float>(), 1e-5f) << k;
  }
}

TEST(IoMlxfn, WriterNamesWhatMlxCannotHold) {
  io::KwFn fun = [](const std::vector<array>& a, const std::map<std::string, array>&) {
    return std::vector<array>{fft::rfft(a[0])};
  };
  io::ExportedFunction exported;
  exported.traces.push_back(io::trace_for_export(fun, {zeros({2, 8}, float32)}, {}, false));
  io::BufferWriter bytes;
  std::string msg = error_of([&] { io::write_mlxfn(bytes, exported); });
  EXPECT_NE(msg.find("[export_mlxfn] Cannot write the primitive FFT"), std::string::npos) << msg;
  EXPECT_EQ(bytes.bytes().size(), 0u);
}
