// The generated sources of the sort/select, quantized, FFT and im2col kernels
// (backend/cuda/sort_large.cpp, quantized.cpp, fft.cpp, conv.cpp), built with NVRTC for
// sm_90: NVRTC needs no GPU, so a kernel that does not compile fails here,
// not on the device machine. Without the CUDA backend the tests skip.
#include <gtest/gtest.h>

#include <string>

#include "loom/dtype.h"

#ifdef LOOM_HAVE_CUDA
#include "loom/backend/cuda/codegen.h"

namespace loom::cuda {
std::string sort_large_kernel_source(const std::string& name, Dtype d, bool desc_ties);
std::string quantized_kernel_source(const std::string& name, Dtype d, Dtype out, int bits);
std::string fft_helper_source();
std::string hadamard_kernel_source(const std::string& name, Dtype d);
std::string im2col_kernel_source(const std::string& name, Dtype d);
std::string cross_entropy_kernel_source(const std::string& name, Dtype d);
std::string delta_rule_kernel_source(const std::string& name, Dtype d, int per_lane, bool per_key,
                                     bool mask);
} // namespace loom::cuda
#endif

using namespace loom;

namespace {

#ifdef LOOM_HAVE_CUDA
constexpr int kArch = 90;

TEST(CudaOpsCodegen, LargeSortBuildsForEveryDtype) {
  for (Dtype d : {bool_, uint8, uint16, uint32, uint64, int8, int16, int32, int64, float16,
                  bfloat16, float32, float64}) {
    for (bool desc : {false, true}) {
      std::string src = cuda::sort_large_kernel_source("loom_sortl_test", d, desc);
      EXPECT_FALSE(cuda::nvrtc_build(src, kArch).empty()) << src;
    }
  }
}

TEST(CudaOpsCodegen, QuantizedBuildsForEveryWidthAndFloatType) {
  for (Dtype d : {float32, float16, bfloat16}) {
    for (int bits : {1, 2, 3, 4, 5, 6, 8}) {
      std::string src = cuda::quantized_kernel_source("loom_quant_test", d, d, bits);
      EXPECT_FALSE(cuda::nvrtc_build(src, kArch).empty()) << src;
    }
    std::string src = cuda::quantized_kernel_source("loom_quant_test", d, float32, 4);
    EXPECT_FALSE(cuda::nvrtc_build(src, kArch).empty()) << src;
  }
}

TEST(CudaOpsCodegen, FftHelpersAndHadamardBuild) {
  EXPECT_FALSE(cuda::nvrtc_build(cuda::fft_helper_source(), kArch).empty());
  for (Dtype d : {float32, float64, float16, bfloat16}) {
    std::string src = cuda::hadamard_kernel_source("loom_hadamard_test", d);
    EXPECT_FALSE(cuda::nvrtc_build(src, kArch).empty()) << src;
  }
}
TEST(CudaOpsCodegen, Im2colAndCrossEntropyBuildForEveryFloatType) {
  for (Dtype d : {float32, float64, float16, bfloat16}) {
    std::string src = cuda::im2col_kernel_source("loom_im2col_test", d);
    EXPECT_FALSE(cuda::nvrtc_build(src, kArch).empty()) << src;
    src = cuda::cross_entropy_kernel_source("loom_cross_entropy_test", d);
    EXPECT_FALSE(cuda::nvrtc_build(src, kArch).empty()) << src;
  }
}
TEST(CudaOpsCodegen, DeltaRuleBuildsForEveryLayout) {
  for (Dtype d : {float32, float16, bfloat16}) {
    for (int lanes : {1, 4, 8}) {
      for (bool per_key : {false, true}) {
        for (bool mask : {false, true}) {
          std::string src =
              cuda::delta_rule_kernel_source("loom_delta_rule_test", d, lanes, per_key, mask);
          EXPECT_FALSE(cuda::nvrtc_build(src, kArch).empty()) << src;
        }
      }
    }
  }
}
#else
TEST(CudaOpsCodegen, SkippedWithoutTheCudaBackend) {
  GTEST_SKIP() << "Loom was built without the CUDA backend (LOOM_CUDA=OFF or no toolkit)";
}
#endif

} // namespace
