// The BLAS in use runs the CPU's best kernels: on a CPU with AVX2 or better,
// OpenBLAS must not report a generic core (Debian's 0.3.21 falls back to
// Prescott on CPUs it does not know, 4-8x slower on matrix products).
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "loom/backend/cpu/blas_info.h"
#include "loom/ops.h"

using namespace loom;

TEST(Blas, CoreMatchesTheCpu) {
  std::string core = cpu::blas::core_name();
  std::string preferred = cpu::blas::preferred_core();
  RecordProperty("blas_core", core);
  ASSERT_FALSE(core.empty());
  if (preferred.empty())
    GTEST_SKIP() << "CPU without AVX2: OpenBLAS picks its core (" << core << ")";
  // Cores with AVX2 or AVX-512 kernels (OpenBLAS's names, any case).
  const std::set<std::string> vector_cores{"haswell", "zen", "skylakex", "cooperlake",
                                           "sapphirerapids"};
  std::string lower;
  for (char c : core) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  EXPECT_TRUE(vector_cores.count(lower))
      << "OpenBLAS runs the generic core " << core << " on a CPU with AVX2 or better (expected "
      << preferred << "): " << cpu::blas::config();
}

TEST(Blas, MatmulThroughTheLoadedLibrary) {
  array a = reshape(arange(0.0, 6.0, 1.0, float32), {2, 3});
  array b = reshape(arange(0.0, 6.0, 1.0, float32), {3, 2});
  array c = matmul(a, b);
  c.eval();
  const float* p = c.data<float>();
  EXPECT_FLOAT_EQ(p[0], 10.0f);
  EXPECT_FLOAT_EQ(p[1], 13.0f);
  EXPECT_FLOAT_EQ(p[2], 28.0f);
  EXPECT_FLOAT_EQ(p[3], 40.0f);
}
