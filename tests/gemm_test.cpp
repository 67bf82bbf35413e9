// cpu::gemm (float32: Loom's AVX-512 kernel or OpenBLAS panels) and
// cpu::gemm_bf16 (the AVX-512 BF16 kernel where the CPU has one) against a
// double-precision loop:
// both transposes, leading dimensions wider than the matrix, odd K (the
// bfloat16 kernel works in k-pairs), tails of the 12 x 32 tiles, K = 1, and
// sizes on both sides of the split over the pool and of the shared packed B.
#include "loom/backend/cpu/gemm.h"

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace loom;

namespace {

struct Case {
  int64_t M, N, K;
  bool ta, tb;
  int64_t pad; // extra elements at the end of every stored row
};

std::string name(const Case& c) {
  return std::to_string(c.M) + "x" + std::to_string(c.N) + "x" + std::to_string(c.K) +
         (c.ta ? " ta" : "") + (c.tb ? " tb" : "") + " pad " + std::to_string(c.pad);
}

uint16_t to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return static_cast<uint16_t>(bits >> 16); // values below are exact in bfloat16
}

float from_bf16(uint16_t h) {
  const uint32_t bits = uint32_t{h} << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// A stored operand: op(X) is rows x cols; stored transposed when `trans`.
struct Stored {
  std::vector<float> values;
  int64_t ld;
  float at(bool trans, int64_t i, int64_t j) const {
    return trans ? values[j * ld + i] : values[i * ld + j];
  }
};

// Small multiples of 1/8 in [-2, 2]: exact in bfloat16, no subnormals.
Stored make(int64_t rows, int64_t cols, bool trans, int64_t pad, std::mt19937& rng) {
  const int64_t srows = trans ? cols : rows, scols = trans ? rows : cols;
  Stored s{std::vector<float>(static_cast<size_t>(srows * (scols + pad))), scols + pad};
  std::uniform_int_distribution<int> d(-16, 16);
  for (float& v : s.values) v = static_cast<float>(d(rng)) / 8.0f;
  return s;
}

std::vector<Case> cases() {
  std::vector<Case> out;
  const std::vector<std::array<int64_t, 3>> sizes = {
      {1, 1, 1},
      {3, 5, 1},
      {13, 33, 7},
      {12, 32, 2},
      {25, 70, 9},
      {96, 96, 96},
      {100, 130, 71},
      {64, 300, 1},
      {257, 129, 65},
      {31, 513, 130},
      {300, 40, 256},
      {256, 1024, 33},
      // An untransposed op(B) of at most 64K floats is read in place by the
      // native float32 kernel: exactly 64K, a ragged last panel, one past.
      {256, 256, 256},
      {300, 200, 100},
      {64, 257, 256}};
  for (const auto& s : sizes) {
    for (int t = 0; t < 4; ++t) {
      out.push_back({s[0], s[1], s[2], (t & 1) != 0, (t & 2) != 0, t == 3 ? 5 : 0});
    }
  }
  return out;
}

void check_bf16(const Case& c, std::mt19937& rng) {
  const Stored a = make(c.M, c.K, c.ta, c.pad, rng);
  const Stored b = make(c.K, c.N, c.tb, c.pad, rng);
  std::vector<uint16_t> ah(a.values.size()), bh(b.values.size());
  for (size_t i = 0; i < ah.size(); ++i) ah[i] = to_bf16(a.values[i]);
  for (size_t i = 0; i < bh.size(); ++i) bh[i] = to_bf16(b.values[i]);
  const int64_t ldc = c.N + 3;
  std::vector<float> out(static_cast<size_t>(c.M * ldc), -7.0f);
  cpu::gemm_bf16(c.ta, c.tb, c.M, c.N, c.K, ah.data(), a.ld, bh.data(), b.ld, out.data(), ldc);
  for (int64_t i = 0; i < c.M; ++i) {
    for (int64_t j = 0; j < c.N; ++j) {
      double want = 0.0;
      for (int64_t k = 0; k < c.K; ++k) {
        want += static_cast<double>(from_bf16(ah[c.ta ? k * a.ld + i : i * a.ld + k])) *
                from_bf16(bh[c.tb ? j * b.ld + k : k * b.ld + j]);
      }
      // Every product and partial sum is a multiple of 1/64 below 2^16:
      // exact in float32 whatever the order.
      ASSERT_EQ(out[i * ldc + j], static_cast<float>(want)) << name(c) << " at " << i << ", " << j;
    }
    for (int64_t j = c.N; j < ldc; ++j) {
      ASSERT_EQ(out[i * ldc + j], -7.0f) << name(c) << ": wrote past column N in row " << i;
    }
  }
}

// C = alpha op(A) op(B) + beta C over a C of -7 (NaN where beta is 0: BLAS
// semantics never read C then).
void check_f32(const Case& c, std::mt19937& rng, float alpha = 1.0f, float beta = 0.0f) {
  const Stored a = make(c.M, c.K, c.ta, c.pad, rng);
  const Stored b = make(c.K, c.N, c.tb, c.pad, rng);
  const int64_t ldc = c.N + 3;
  const float init = beta == 0.0f ? std::nanf("") : -7.0f;
  std::vector<float> out(static_cast<size_t>(c.M * ldc), init);
  for (int64_t i = 0; i < c.M; ++i) {
    for (int64_t j = c.N; j < ldc; ++j) out[i * ldc + j] = -7.0f;
  }
  cpu::gemm<float>(c.ta, c.tb, c.M, c.N, c.K, alpha, a.values.data(), a.ld, b.values.data(), b.ld,
                   beta, out.data(), ldc);
  for (int64_t i = 0; i < c.M; ++i) {
    for (int64_t j = 0; j < c.N; ++j) {
      double want = 0.0;
      for (int64_t k = 0; k < c.K; ++k) {
        want += static_cast<double>(a.at(c.ta, i, k)) * b.at(c.tb, k, j);
      }
      want = alpha * want + (beta == 0.0f ? 0.0 : beta * -7.0);
      ASSERT_EQ(out[i * ldc + j], static_cast<float>(want)) << name(c) << " at " << i << ", " << j;
    }
    for (int64_t j = c.N; j < ldc; ++j) {
      ASSERT_EQ(out[i * ldc + j], -7.0f) << name(c) << ": wrote past column N in row " << i;
    }
  }
}

// float32 -> bfloat16, nearest even, NaN kept (quiet): the reference
// rounding, written out here rather than borrowed from the code under test.
uint16_t round_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  if (std::isnan(f)) return static_cast<uint16_t>((bits >> 16) | 0x40);
  const uint32_t upper = bits >> 16, lower = bits & 0xFFFF;
  if (lower > 0x8000 || (lower == 0x8000 && (upper & 1))) return static_cast<uint16_t>(upper + 1);
  return static_cast<uint16_t>(upper);
}

// gemm_bf16_rounded against the exact product rounded once: the operands
// (multiples of 1/8) make every sum exact in float32, so the only rounding
// is the one to bfloat16, ties included (sums need up to 15 bits here).
void check_bf16_rounded(const Case& c, std::mt19937& rng) {
  const Stored a = make(c.M, c.K, c.ta, c.pad, rng);
  const Stored b = make(c.K, c.N, c.tb, c.pad, rng);
  std::vector<uint16_t> ah(a.values.size()), bh(b.values.size());
  for (size_t i = 0; i < ah.size(); ++i) ah[i] = to_bf16(a.values[i]);
  for (size_t i = 0; i < bh.size(); ++i) bh[i] = to_bf16(b.values[i]);
  const int64_t ldc = c.N + 3;
  std::vector<uint16_t> out(static_cast<size_t>(c.M * ldc), 0xBEEF);
  cpu::gemm_bf16_rounded(c.ta, c.tb, c.M, c.N, c.K, ah.data(), a.ld, bh.data(), b.ld, out.data(),
                         ldc);
  int64_t inexact = 0;
  for (int64_t i = 0; i < c.M; ++i) {
    for (int64_t j = 0; j < c.N; ++j) {
      double want = 0.0;
      for (int64_t k = 0; k < c.K; ++k)
        want += static_cast<double>(a.at(c.ta, i, k)) * b.at(c.tb, k, j);
      const uint16_t rounded = round_bf16(static_cast<float>(want));
      inexact += from_bf16(rounded) != static_cast<float>(want);
      ASSERT_EQ(out[i * ldc + j], rounded) << name(c) << " at " << i << ", " << j << ": " << want;
    }
    for (int64_t j = c.N; j < ldc; ++j) {
      ASSERT_EQ(out[i * ldc + j], 0xBEEF) << name(c) << ": wrote past column N in row " << i;
    }
  }
  // Sums of more than a few terms need more than bfloat16's 8 bits.
  if (c.K >= 64) {
    EXPECT_GT(inexact, 0) << name(c) << ": no result was rounded";
  }
}

} // namespace

TEST(Gemm, Bf16RoundedMatchesRoundedExactProducts) {
  std::mt19937 rng(12);
  for (const Case& c : cases()) check_bf16_rounded(c, rng);
  // K past one k block of the native kernel (2048): float32 C, then rounded.
  check_bf16_rounded({30, 40, 2100, false, false, 0}, rng);
  check_bf16_rounded({30, 40, 2100, true, true, 1}, rng);
}

// Ties to even and NaN: a row of ones against columns whose sums land
// exactly between two bfloat16 values.
TEST(Gemm, Bf16RoundedTiesAndNaN) {
  const int64_t M = 24, N = 64, K = 2;
  std::vector<uint16_t> a(M * K, to_bf16(1.0f));
  std::vector<uint16_t> b(K * N);
  for (int64_t j = 0; j < N; ++j) {
    // 1 + j/128 (exact in bfloat16 for j < 128) plus half an ulp of it.
    const float base = 1.0f + static_cast<float>(j) / 128.0f;
    b[j] = to_bf16(base);
    b[N + j] = to_bf16(1.0f / 256.0f);
  }
  a[5 * K + 1] = 0x7FC0; // NaN in row 5
  std::vector<uint16_t> out(M * N);
  cpu::gemm_bf16_rounded(false, false, M, N, K, a.data(), K, b.data(), N, out.data(), N);
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      const float got = from_bf16(out[i * N + j]);
      if (i == 5) {
        EXPECT_TRUE(std::isnan(got)) << j;
        continue;
      }
      // A tie: even last bits stay, odd ones round up to the next even.
      const float want = 1.0f + static_cast<float>(j + (j & 1)) / 128.0f;
      ASSERT_EQ(got, want) << i << ", " << j;
    }
  }
}

// The same product with the pool's workers awake (back to back) and asleep
// (after more than their 5 ms of polling): the result is the same.
TEST(Gemm, PoolAwakeAndAsleep) {
  std::mt19937 rng(13);
  for (int pass = 0; pass < 2; ++pass) {
    if (pass == 1) std::this_thread::sleep_for(std::chrono::milliseconds(30));
    check_f32({256, 256, 256, false, false, 0}, rng);
    if (pass == 1) std::this_thread::sleep_for(std::chrono::milliseconds(30));
    check_f32({200, 192, 300, false, true, 0}, rng, 0.5f, 2.0f);
    if (pass == 1) std::this_thread::sleep_for(std::chrono::milliseconds(30));
    check_bf16_rounded({256, 256, 256, false, false, 0}, rng);
  }
}

TEST(Gemm, Bf16MatchesExactProducts) {
  std::mt19937 rng(7);
  for (const Case& c : cases()) check_bf16(c, rng);
}

// Wider than the shared packed B's budget (16 MB): each panel packs its own B.
TEST(Gemm, Bf16LargeBPackedPerPanel) {
  std::mt19937 rng(8);
  check_bf16({24, 4200, 2050, false, false, 0}, rng);
  check_bf16({24, 4200, 2050, true, true, 1}, rng);
}

// Both paths of gemm<float>: Loom's AVX-512 kernel where the CPU has one,
// and OpenBLAS's panels.
class GemmF32 : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { previous_ = cpu::gemm_f32_native_enable(GetParam() != 0); }
  void TearDown() override { cpu::gemm_f32_native_enable(previous_); }
  int previous_ = 1;
};

TEST_P(GemmF32, MatchesExactProducts) {
  std::mt19937 rng(9);
  for (const Case& c : cases()) check_f32(c, rng);
}

TEST_P(GemmF32, ScalesAndAccumulates) {
  std::mt19937 rng(10);
  for (const Case& c : cases()) check_f32(c, rng, 0.5f, 2.0f);
  check_f32({37, 45, 3, false, true, 0}, rng, -1.5f, 0.0f);
}

// k in several blocks (the native kernel's are at most 512 long), and an
// op(B) past the 16 MB the native kernel packs whole (OpenBLAS takes it).
TEST_P(GemmF32, LongKAndWideB) {
  std::mt19937 rng(11);
  check_f32({50, 70, 1100, false, true, 0}, rng);
  check_f32({50, 70, 1100, true, false, 2}, rng, 1.0f, 2.0f);
  check_f32({24, 4200, 1000, false, false, 0}, rng);
}

INSTANTIATE_TEST_SUITE_P(Paths, GemmF32, ::testing::Values(1, 0),
                         [](const ::testing::TestParamInfo<int>& p) {
                           return p.param ? std::string("Native") : std::string("OpenBlas");
                         });
