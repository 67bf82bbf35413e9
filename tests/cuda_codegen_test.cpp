// The fused-region kernels the CUDA backend generates, built with NVRTC for
// sm_90: NVRTC needs no GPU, so this runs wherever the backend is built (CI
// included) and a region whose source does not compile fails here, not on the
// device machine. Without the CUDA backend the tests skip.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "loom/compile/compiled.h"
#include "loom/primitives/binary.h"
#include "loom/primitives/creation.h"
#include "loom/primitives/shape.h"
#include "loom/primitives/ternary.h"
#include "loom/primitives/unary.h"

#ifdef LOOM_HAVE_CUDA
#include "loom/backend/cuda/codegen.h"
#endif

using namespace loom;
using compile_detail::Compiled;
using compile_detail::FusedOp;

namespace {

#ifdef LOOM_HAVE_CUDA
constexpr int kArch = 90;

Stream s() { return default_stream(Device::cpu); }

FusedOp unary(UnaryOp op, int arg, Dtype d, const Shape& shape) {
  return FusedOp{std::make_shared<Unary>(s(), op), {arg}, shape, d};
}
FusedOp binary(BinaryOp op, int a, int b, Dtype d, const Shape& shape) {
  return FusedOp{std::make_shared<Binary>(s(), op), {a, b}, shape, d};
}

// gelu: x * 0.5 * (1 + erf(x / sqrt(2))) over inputs x, 1/sqrt2, 0.5, 1.
Compiled gelu(Dtype d) {
  Shape sh{32, 1000, 4096};
  std::vector<FusedOp> ops;
  ops.push_back(binary(BinaryOp::Divide, 0, 1, d, sh));   // 4
  ops.push_back(unary(UnaryOp::Erf, 4, d, sh));           // 5
  ops.push_back(binary(BinaryOp::Add, 3, 5, d, sh));      // 6
  ops.push_back(binary(BinaryOp::Multiply, 0, 2, d, sh)); // 7
  ops.push_back(binary(BinaryOp::Multiply, 7, 6, d, sh)); // 8
  return Compiled(s(), 4, std::move(ops), {4});
}

TEST(CudaCodegen, GeluBuildsForEveryFloatTypeAndLayout) {
  for (Dtype d : {float32, float16, bfloat16, float64}) {
    Compiled c = gelu(d);
    for (const char* modes : {"csss", "gsss"}) {
      for (bool vec : {true, false}) {
        // Unroll 1 and the launcher's default of 2 (only vectorised kernels unroll).
        for (int unroll : {1, 2}) {
          if (!vec && unroll > 1) continue;
          std::string src = cuda::fused_kernel_source(c, {d, d, d, d}, modes, {d}, vec, unroll);
          ASSERT_FALSE(src.empty());
          EXPECT_NE(src.find("erf"), std::string::npos);
          size_t pos = src.find("NAME(");
          ASSERT_NE(pos, std::string::npos);
          src.replace(pos, 4, "loom_fused_test");
          EXPECT_FALSE(cuda::nvrtc_build(src, kArch).empty()) << src;
        }
      }
    }
  }
}

TEST(CudaCodegen, SeveralOutputsComparisonsSelectAndCasts) {
  Shape sh{7, 9};
  std::vector<FusedOp> ops;
  ops.push_back(unary(UnaryOp::Abs, 0, float32, sh));                               // 2
  ops.push_back(binary(BinaryOp::Greater, 2, 1, bool_, sh));                        // 3
  ops.push_back(FusedOp{std::make_shared<Select>(s()), {3, 2, 1}, sh, float32});    // 4
  ops.push_back(FusedOp{std::make_shared<AsType>(s(), float16), {4}, sh, float16}); // 5
  ops.push_back(FusedOp{std::make_shared<AsType>(s(), bool_), {0}, sh, bool_});     // 6
  Compiled c(s(), 2, std::move(ops), {1, 3, 4});
  for (int unroll : {1, 2}) {
    std::string src = cuda::fused_kernel_source(c, {float32, float32}, "gs",
                                                {bool_, float16, bool_}, true, unroll);
    ASSERT_FALSE(src.empty());
    src.replace(src.find("NAME("), 4, "loom_fused_test");
    EXPECT_FALSE(cuda::nvrtc_build(src, kArch).empty()) << src;
  }
}

TEST(CudaCodegen, IntegerRegionsBuild) {
  Shape sh{1000};
  std::vector<FusedOp> ops;
  ops.push_back(binary(BinaryOp::Multiply, 0, 1, int32, sh));
  ops.push_back(binary(BinaryOp::BitwiseAnd, 2, 1, int32, sh));
  ops.push_back(binary(BinaryOp::Maximum, 3, 0, int32, sh));
  ops.push_back(FusedOp{std::make_shared<AsType>(s(), float32), {4}, sh, float32});
  Compiled c(s(), 2, std::move(ops), {3});
  for (int unroll : {1, 2}) {
    std::string src = cuda::fused_kernel_source(c, {int32, int32}, "cs", {float32}, true, unroll);
    ASSERT_FALSE(src.empty());
    src.replace(src.find("NAME("), 4, "loom_fused_test");
    EXPECT_FALSE(cuda::nvrtc_build(src, kArch).empty()) << src;
  }
}

TEST(CudaCodegen, OpsWithoutADeviceFormAreDeclined) {
  Shape sh{16};
  std::vector<FusedOp> ops;
  ops.push_back(unary(UnaryOp::ErfInv, 0, float32, sh));
  ops.push_back(unary(UnaryOp::Sin, 1, float32, sh));
  Compiled c(s(), 1, std::move(ops), {1});
  EXPECT_TRUE(cuda::fused_kernel_source(c, {float32}, "c", {float32}, false).empty());
  // Float to integer casts keep the CPU's conventions: not generated.
  std::vector<FusedOp> cast;
  cast.push_back(FusedOp{std::make_shared<AsType>(s(), int32), {0}, sh, int32});
  cast.push_back(binary(BinaryOp::Add, 1, 1, int32, sh));
  Compiled c2(s(), 1, std::move(cast), {1});
  EXPECT_TRUE(cuda::fused_kernel_source(c2, {float32}, "c", {int32}, false).empty());
}
TEST(CudaCodegen, SoftmaxAndLogSumExpRowsBuild) {
  for (Dtype d : {float32, float16, bfloat16, float64}) {
    for (bool lse : {false, true}) {
      std::string src = cuda::row_softmax_source("loom_row_test", d, lse);
      EXPECT_FALSE(cuda::nvrtc_build(src, kArch).empty()) << src;
    }
  }
}
TEST(CudaCodegen, ArgReduceRowsBuild) {
  for (Dtype d : {float32, float16, bfloat16, float64, int8, uint8, int32, int64, uint64}) {
    for (bool is_max : {false, true}) {
      std::string src = cuda::arg_reduce_source("loom_arg_test", d, is_max);
      EXPECT_FALSE(cuda::nvrtc_build(src, kArch).empty()) << src;
    }
  }
}
TEST(CudaCodegen, GatherBuildsForEveryElementSizeAndIndexType) {
  for (size_t size : {1, 2, 4, 8}) {
    for (Dtype idx : {int32, int64, uint8, uint32}) {
      std::string src = cuda::gather_kernel_source("loom_gather_test", size, idx);
      EXPECT_FALSE(cuda::nvrtc_build(src, kArch).empty()) << src;
    }
  }
}
TEST(CudaCodegen, ScatterBuildsForEveryDtypeAndAccumulation) {
  // 0 none, 1 sum, 2 prod, 3 max, 4 min (Scatter::ReduceType's order).
  for (Dtype d : {bool_, int8, uint8, int16, uint16, int32, uint32, int64, uint64, float16,
                  bfloat16, float32, float64}) {
    for (int type = 0; type <= 4; ++type) {
      std::string src = cuda::scatter_kernel_source("loom_scatter_test", d, type, int32);
      EXPECT_FALSE(cuda::nvrtc_build(src, kArch).empty()) << src;
    }
  }
  for (int type : {0, 1}) {
    std::string src = cuda::scatter_kernel_source("loom_scatter_test", complex64, type, int64);
    EXPECT_FALSE(cuda::nvrtc_build(src, kArch).empty()) << src;
  }
}
TEST(CudaCodegen, FastNormsAndRopeBuildForEveryFloatType) {
  for (Dtype d : {float32, float16, bfloat16, float64}) {
    for (bool layer : {false, true}) {
      std::string src = cuda::norm_kernel_source("loom_norm_test", d, layer);
      EXPECT_FALSE(cuda::nvrtc_build(src, kArch).empty()) << src;
    }
    std::string src = cuda::rope_kernel_source("loom_rope_test", d);
    EXPECT_FALSE(cuda::nvrtc_build(src, kArch).empty()) << src;
  }
}
TEST(CudaCodegen, AttentionBuildsForEachMaskAndHeadSize) {
  // Each build takes NVRTC seconds (unrolled tiles): every mask kind once,
  // sinks and the half types once each, and the largest head size.
  struct Case {
    Dtype d;
    int D, Dv, mask;
    bool sinks;
  };
  for (Case c : {Case{float32, 64, 64, 0, false}, Case{float32, 64, 64, 1, false},
                 Case{float16, 64, 64, 2, false}, Case{bfloat16, 128, 128, 1, true},
                 Case{float32, 256, 128, 1, false}}) {
    std::string src =
        cuda::attention_kernel_source("loom_attention_test", c.d, c.D, c.Dv, c.mask, c.sinks);
    EXPECT_FALSE(cuda::nvrtc_build(src, kArch).empty()) << src;
  }
}
TEST(CudaCodegen, TensorCoreAttentionBuildsForEachMaskAndHeadSize) {
  // mma.sync through inline PTX: both half types, both head sizes, every
  // mask kind, sinks.
  struct Case {
    Dtype d;
    int D, mask;
    bool sinks;
    int warps;
  };
  for (Case c : {Case{bfloat16, 128, 0, false, 8}, Case{float16, 64, 1, true, 8},
                 Case{bfloat16, 64, 2, false, 4}, Case{float16, 128, 2, true, 4}}) {
    std::string src = cuda::attention_mma_kernel_source("loom_attention_mma_test", c.d, c.D, c.mask,
                                                        c.sinks, c.warps);
    EXPECT_FALSE(cuda::nvrtc_build(src, kArch).empty()) << src;
  }
  // Built for three blocks per multiprocessor (LOOM_CUDA_ATTN_MIN_BLOCKS).
  std::string src =
      cuda::attention_mma_kernel_source("loom_attention_mma_test", bfloat16, 128, 0, false, 4, 3);
  EXPECT_FALSE(cuda::nvrtc_build(src, kArch).empty()) << src;
}
TEST(CudaCodegen, TensorCoreAttentionBackwardBuilds) {
  // The fused backward's three passes: both half types, both head sizes,
  // every mask kind, sinks.
  struct Case {
    Dtype d;
    int D, mask;
    bool sinks;
  };
  for (Case c : {Case{bfloat16, 128, 0, false}, Case{float16, 64, 1, true},
                 Case{bfloat16, 64, 2, false}, Case{float16, 128, 2, true}}) {
    std::string src = cuda::attention_mma_stats_kernel_source("loom_attention_stats_test", c.d, c.D,
                                                              c.mask, c.sinks);
    EXPECT_FALSE(cuda::nvrtc_build(src, kArch).empty()) << src;
    src =
        cuda::attention_mma_bwd_kernel_source("loom_attention_bwd_test", c.d, c.D, c.mask, c.sinks);
    EXPECT_FALSE(cuda::nvrtc_build(src, kArch).empty()) << src;
  }
  for (Dtype d : {float16, bfloat16}) {
    std::string src = cuda::attention_bwd_finish_kernel_source("loom_attention_bwd_finish_test", d);
    EXPECT_FALSE(cuda::nvrtc_build(src, kArch).empty()) << src;
  }
}
TEST(CudaCodegen, RandomBuildsForEveryDistributionAndDtype) {
  // 0 bits, 1 uniform, 2 normal (RandomDistribution's order).
  for (bool byte_mode : {false, true}) {
    std::string src = cuda::random_kernel_source("loom_random_test", 0, uint8, byte_mode);
    EXPECT_FALSE(cuda::nvrtc_build(src, kArch).empty()) << src;
  }
  for (Dtype d : {float16, bfloat16, float32, float64}) {
    std::string src = cuda::random_kernel_source("loom_random_test", 1, d, false);
    EXPECT_FALSE(cuda::nvrtc_build(src, kArch).empty()) << src;
  }
  for (Dtype d : {float16, bfloat16, float32, complex64}) {
    std::string src = cuda::random_kernel_source("loom_random_test", 2, d, false);
    EXPECT_FALSE(cuda::nvrtc_build(src, kArch).empty()) << src;
  }
}
TEST(CudaCodegen, ScanAndSortBuildForEveryDtype) {
  for (Dtype d : {bool_, int8, uint8, int16, uint16, int32, uint32, int64, uint64, float16,
                  bfloat16, float32, float64}) {
    for (int op = 0; op < 4; ++op) {
      std::string src = cuda::scan_kernel_source("loom_scan_test", d, op);
      EXPECT_NE(src.find("loom_scan_test_rows"), std::string::npos);
      EXPECT_NE(src.find("loom_scan_test_cols"), std::string::npos);
      EXPECT_FALSE(cuda::nvrtc_build(src, kArch).empty()) << src;
    }
    for (bool indices : {false, true}) {
      std::string src = cuda::sort_kernel_source("loom_sort_test", d, indices);
      EXPECT_FALSE(cuda::nvrtc_build(src, kArch).empty()) << src;
    }
  }
}
TEST(CudaCodegen, StridedCopyBuildsForEveryElementSize) {
  for (size_t size : {1, 2, 4, 8}) {
    std::string src = cuda::strided_copy_kernel_source("loom_copy_test", size);
    EXPECT_FALSE(cuda::nvrtc_build(src, kArch).empty()) << src;
  }
}
#else
TEST(CudaCodegen, SkippedWithoutTheCudaBackend) {
  GTEST_SKIP() << "Loom was built without the CUDA backend (LOOM_CUDA=OFF or no toolkit)";
}
#endif

} // namespace
