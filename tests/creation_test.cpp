// Creation ops: full/zeros/ones, arange, linspace, eye/identity, copy.
#include "loom/ops/creation.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "loom/ops/shape.h"

using namespace loom;

namespace {

template <typename T>
std::vector<T> values(array a) {
  a = copy(a); // row-major
  a.eval();
  return std::vector<T>(a.data<T>(), a.data<T>() + a.size());
}

std::vector<uint32_t> float_bits(const std::vector<float>& v) {
  std::vector<uint32_t> out(v.size());
  std::memcpy(out.data(), v.data(), v.size() * 4);
  return out;
}

template <typename E, typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("wrong exception type: ") + e.what();
  }
  return "no exception";
}

} // namespace

TEST(CreationFull, ScalarsAndArrays) {
  array z = zeros({2, 3});
  EXPECT_EQ(z.dtype(), float32);
  EXPECT_EQ(values<float>(z), std::vector<float>(6, 0.0f));
  EXPECT_EQ(values<int32_t>(ones({4}, int32)), std::vector<int32_t>(4, 1));
  EXPECT_EQ(values<bool>(ones({2}, bool_)), (std::vector<bool>{true, true}));
  EXPECT_EQ(values<complex64_t>(ones({1}, complex64))[0], complex64_t(1.0f, 0.0f));
  array f = full({2, 2}, array(3.5f), int32);
  EXPECT_EQ(f.dtype(), int32);
  EXPECT_EQ(values<int32_t>(f), std::vector<int32_t>(4, 3));
  EXPECT_EQ(full({2, 2}, array(7)).dtype(), int32);
  // A row broadcast over the shape.
  EXPECT_EQ(values<int32_t>(full({2, 2}, array({1, 2}))), (std::vector<int32_t>{1, 2, 1, 2}));
  EXPECT_EQ(values<float>(full({2, 2}, array({5.0f, 6.0f}, {2, 1}))),
            (std::vector<float>{5, 5, 6, 6}));
  // A fresh, writable row-major buffer.
  array big = full({1000, 1000}, array(2.0f));
  big.eval();
  EXPECT_TRUE(big.flags().row_contiguous);
  EXPECT_EQ(big.data_size(), 1000000u);
  EXPECT_EQ(big.data<float>()[999999], 2.0f);
  EXPECT_EQ(values<float>(zeros({0, 3})).size(), 0u);
  // *_like keep shape and dtype.
  array a({1, 2, 3}, {3});
  EXPECT_EQ(zeros_like(a).dtype(), int32);
  EXPECT_EQ(values<int32_t>(ones_like(a)), std::vector<int32_t>(3, 1));
  EXPECT_EQ(values<int32_t>(full_like(a, array(2.7f))), std::vector<int32_t>(3, 2));
}

TEST(CreationFull, Errors) {
  EXPECT_EQ(error_of<std::invalid_argument>([] {
              full({2, -2}, array(1));
            }),
            "[full] Negative dimensions not allowed.");
  EXPECT_EQ(error_of<std::invalid_argument>([] {
              zeros({2, -2});
            }),
            "[full] Negative dimensions not allowed.");
  EXPECT_EQ(error_of<std::invalid_argument>([] {
              full({2, 2}, array({1, 2, 3}));
            }),
            "[broadcast_shapes] Shapes (3) and (2,2) cannot be broadcast.");
  EXPECT_EQ(error_of<std::invalid_argument>([] {
              full({2}, zeros({2, 2}));
            }),
            "Cannot broadcast array of shape (2,2) into shape (2).");
}

TEST(CreationArange, IntegersFollowStartAndSecondValue) {
  EXPECT_EQ(values<int32_t>(arange(0, 10, 3, int32)), (std::vector<int32_t>{0, 3, 6, 9}));
  EXPECT_EQ(values<int32_t>(arange(10, 0, -3, int32)), (std::vector<int32_t>{10, 7, 4, 1}));
  EXPECT_EQ(arange(10, 0, 3, int32).size(), 0u);
  // MLX (and NumPy): step' = T(start + step) - T(start).
  EXPECT_EQ(values<int32_t>(arange(0.5, 5, 1.5, int32)), (std::vector<int32_t>{0, 2, 4}));
  EXPECT_EQ(values<int32_t>(arange(0.5, 5, 0.7, int32)),
            (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(values<int32_t>(arange(-0.5, 5, 0.7, int32)), std::vector<int32_t>(8, 0));
  EXPECT_EQ(values<int32_t>(arange(5, -3, -1.5, int32)),
            (std::vector<int32_t>{5, 3, 1, -1, -3, -5}));
  EXPECT_EQ(values<uint8_t>(arange(0.5, 5, 1.7, uint8)), (std::vector<uint8_t>{0, 2, 4}));
  EXPECT_EQ(values<uint32_t>(arange(-5, 5, 3, uint32)),
            (std::vector<uint32_t>{4294967291u, 4294967294u, 1, 4}));
  EXPECT_EQ(values<int8_t>(arange(-3, 4, 2, int8)), (std::vector<int8_t>{-3, -1, 1, 3}));
  EXPECT_EQ(values<uint64_t>(arange(0, 5, 1, uint64)), (std::vector<uint64_t>{0, 1, 2, 3, 4}));
}

TEST(CreationArange, Floats) {
  auto v = values<float>(arange(0, 1, 0.3, float32));
  ASSERT_EQ(v.size(), 4u);
  EXPECT_EQ(v[3], 0.9f);
  EXPECT_EQ(values<float>(arange(2.5, -1, -0.5, float32)),
            (std::vector<float>{2.5, 2.0, 1.5, 1.0, 0.5, 0.0, -0.5}));
  // start + i * step, rounded once: no accumulated drift over long ranges.
  auto longer = values<float>(arange(0, 100, 0.1, float32));
  ASSERT_EQ(longer.size(), 1000u);
  EXPECT_EQ(longer[999], static_cast<float>(999 * 0.1));
  auto halves = values<float16_t>(arange(0, 100, 0.1, float16));
  EXPECT_NEAR(static_cast<float>(halves[999]), 99.9f, 0.05f);
  EXPECT_EQ(values<double>(arange(0, 3, 1, float64)), (std::vector<double>{0, 1, 2}));
  EXPECT_EQ(values<complex64_t>(arange(0.5, 2, 1, complex64)),
            (std::vector<complex64_t>{{0.5f, 0}, {1.5f, 0}}));
  // Infinite steps give one element when they point toward stop.
  EXPECT_EQ(arange(0, 3, INFINITY, float32).size(), 1u);
  EXPECT_EQ(values<float>(arange(3, 0, -INFINITY, float32))[0], 3.0f);
  EXPECT_EQ(arange(0, 3, -INFINITY, float32).size(), 0u);
  EXPECT_EQ(arange(0, 0, INFINITY, float32).size(), 0u);
  // Large ranges fill in parallel.
  auto big = values<int32_t>(arange(0, 5000000, 1, int32));
  EXPECT_EQ(big[4999999], 4999999);
}

TEST(CreationArange, Errors) {
  EXPECT_EQ(error_of<std::invalid_argument>([] { arange(0, 10, 0, int32); }),
            "[arange] step must be nonzero.");
  EXPECT_EQ(error_of<std::invalid_argument>([] { arange(0, 5, 1, bool_); }),
            "bool not supported for arange.");
  EXPECT_EQ(error_of<std::invalid_argument>([] { arange(0, 1e10, 1, float32); }),
            "[arange] Maximum size exceeded.");
  EXPECT_EQ(error_of<std::invalid_argument>([] { arange(0, NAN, 1, float32); }),
            "[arange] Cannot compute length.");
  EXPECT_EQ(error_of<std::invalid_argument>([] { arange(-INFINITY, 0, 1, float32); }),
            "[arange] Cannot compute length.");
  EXPECT_EQ(error_of<std::invalid_argument>([] { arange(NAN, 5, 0, float32); }),
            "[arange] Cannot compute length.");
  EXPECT_EQ(arange(0, 2147483647.0, 1, int32).shape(), (Shape{2147483647}));
}

TEST(CreationLinspace, MatchesMlxBitForBit) {
  EXPECT_EQ(float_bits(values<float>(linspace(0.1, 0.7, 7))),
            (std::vector<uint32_t>{0x3dcccccd, 0x3e4ccccd, 0x3e99999a, 0x3ecccccd, 0x3f000000,
                                   0x3f199999, 0x3f333333}));
  EXPECT_EQ(float_bits(values<float>(linspace(-3.3, 17.9, 13))),
            (std::vector<uint32_t>{0xc0533333, 0xbfc44445, 0x3e6eeef0, 0x40000000, 0x40711112,
                                   0x40b11110, 0x40e99999, 0x41111110, 0x412d5556, 0x41499999,
                                   0x4165dddd, 0x41811111, 0x418f3333}));
  EXPECT_EQ(
      float_bits(values<float>(linspace(1e-3, 5.5, 11))),
      (std::vector<uint32_t>{0x3a83126f, 0x3f0d07c8, 0x3f8ce704, 0x3fd34a24, 0x400cd6a2, 0x40300831,
                             0x405339c2, 0x40766b50, 0x408cce70, 0x409e6738, 0x40b00000}));
  auto h = values<float16_t>(linspace(0, 1, 4, float16));
  EXPECT_EQ((std::vector<uint16_t>{h[0].bits, h[1].bits, h[2].bits, h[3].bits}),
            (std::vector<uint16_t>{0, 13653, 14677, 15360}));
}

TEST(CreationLinspace, EdgesAndDtypes) {
  EXPECT_EQ(values<float>(linspace(0, 1, 5)), (std::vector<float>{0, 0.25, 0.5, 0.75, 1}));
  EXPECT_EQ(values<float>(linspace(0, 1, 1)), (std::vector<float>{0}));
  EXPECT_EQ(linspace(0, 1, 0).size(), 0u);
  EXPECT_EQ(values<int32_t>(linspace(0, 10, 4, int32)), (std::vector<int32_t>{0, 3, 6, 10}));
  EXPECT_EQ(values<bool>(linspace(0, 1, 4, bool_)), (std::vector<bool>{false, true, true, true}));
  EXPECT_EQ(error_of<std::invalid_argument>([] { linspace(0, 1, -1); }),
            "[linspace] number of samples, -1, must be non-negative.");
}

TEST(CreationEye, DiagonalsAndErrors) {
  EXPECT_EQ(values<float>(eye(3, 3)), (std::vector<float>{1, 0, 0, 0, 1, 0, 0, 0, 1}));
  EXPECT_EQ(values<float>(eye(2, 3, 1)), (std::vector<float>{0, 1, 0, 0, 0, 1}));
  EXPECT_EQ(values<float>(eye(2, 3, -1)), (std::vector<float>{0, 0, 0, 1, 0, 0}));
  EXPECT_EQ(values<float>(eye(2, 3, 5)), std::vector<float>(6, 0));
  EXPECT_EQ(values<float>(eye(2, 3, -5)), std::vector<float>(6, 0));
  EXPECT_EQ(eye(0, 0).shape(), (Shape{0, 0}));
  EXPECT_EQ(eye(2, 0).shape(), (Shape{2, 0}));
  EXPECT_EQ(values<bool>(eye(2, 2, 0, bool_)), (std::vector<bool>{true, false, false, true}));
  EXPECT_EQ(values<int32_t>(identity(2, int32)), (std::vector<int32_t>{1, 0, 0, 1}));
  EXPECT_EQ(error_of<std::invalid_argument>([] { eye(-1, 2); }),
            "[eye] N and M must be positive integers.");
  EXPECT_EQ(error_of<std::invalid_argument>([] { identity(-1); }),
            "[eye] N and M must be positive integers.");
}

TEST(CreationCopy, FreshBuffer) {
  array a({1.0f, 2.0f, 3.0f});
  array c = copy(a);
  c.eval();
  EXPECT_NE(c.data_shared_ptr(), a.data_shared_ptr());
  EXPECT_EQ(values<float>(c), (std::vector<float>{1, 2, 3}));
}
