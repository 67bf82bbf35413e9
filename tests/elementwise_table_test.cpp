// The element-wise op table: every op has one complete entry, and what the
// primitives, kernels and transforms do follows from it.
#include "loom/primitives/elementwise_table.h"

#include <gtest/gtest.h>

#include <cmath>
#include <iterator>
#include <set>
#include <string>

#include "loom/ops.h"
#include "loom/primitives/binary.h"
#include "loom/primitives/unary.h"

using namespace loom;

namespace {

template <typename Info, size_t N>
void expect_complete(const Info (&table)[N], int arity) {
  std::set<std::string> names;
  for (const auto& e : table) {
    ASSERT_NE(e.name, nullptr);
    EXPECT_TRUE(names.insert(e.name).second) << "duplicate entry " << e.name;
    EXPECT_EQ(e.arity, arity) << e.name;
    std::string code = e.code;
    EXPECT_FALSE(code.empty()) << e.name;
    for (int i = 0; i < arity; ++i) {
      EXPECT_NE(code.find("{" + std::to_string(i) + "}"), std::string::npos)
          << e.name << " code form does not use operand " << i;
    }
  }
}

} // namespace

TEST(ElementwiseTable, EveryEntryIsComplete) {
  expect_complete(ew::kUnaryInfo, 1);
  expect_complete(ew::kBinaryInfo, 2);
  expect_complete(ew::kTernaryInfo, 3);
  EXPECT_EQ(std::size(ew::kUnaryInfo), static_cast<size_t>(UnaryOp::Log1p) + 1);
  EXPECT_EQ(std::size(ew::kBinaryInfo), static_cast<size_t>(BinaryOp::ArcTan2) + 1);
}

TEST(ElementwiseTable, PrimitivesPrintAndTypeFromTheTable) {
  array x = array({1.0f, 2.0f});
  array s = sin(x);
  EXPECT_STREQ(s.primitive().name(), "Sin");
  EXPECT_STREQ(ew::info(UnaryOp::Sin).name, "Sin");
  EXPECT_EQ(unary_output_dtype(UnaryOp::IsNan, float32), bool_);
  EXPECT_EQ(unary_output_dtype(UnaryOp::Abs, complex64), float32);
  EXPECT_EQ(unary_output_dtype(UnaryOp::Abs, int16), int16);
  EXPECT_TRUE(binary_op_is_predicate(BinaryOp::LessEqual));
  EXPECT_FALSE(binary_op_is_predicate(BinaryOp::Maximum));
  EXPECT_EQ(binary_output_dtype(BinaryOp::Equal, float32), bool_);
  EXPECT_STREQ(binary_op_name(BinaryOp::FloorDivide), "FloorDivide");
}

TEST(ElementwiseTable, DtypeRulesSelectComputeTypes) {
  using ew::Accepts;
  static_assert(ew::accepts_v<Accepts::inexact, float>);
  static_assert(ew::accepts_v<Accepts::inexact, std::complex<float>>);
  static_assert(!ew::accepts_v<Accepts::inexact, int32_t>);
  static_assert(!ew::accepts_v<Accepts::numeric, bool>);
  static_assert(ew::accepts_v<Accepts::integral, bool>);
  static_assert(!ew::accepts_v<Accepts::integer, bool>);
  static_assert(!ew::accepts_v<Accepts::not_complex, std::complex<float>>);
  static_assert(ew::Sin::accepts == Accepts::inexact);
  static_assert(ew::LeftShift::accepts == Accepts::integer);
  SUCCEED();
}

TEST(ElementwiseTable, FunctorsAreTheScalarSemantics) {
  EXPECT_EQ(ew::Negative{}(int8_t(-128)), int8_t(-128)); // wraps
  EXPECT_EQ(ew::FloorDivide{}(-7, 2), -4);
  EXPECT_EQ(ew::Remainder{}(-7, 2), 1); // sign of the divisor
  EXPECT_EQ(ew::FloorDivide{}(5, 0), 0);
  EXPECT_TRUE(std::isnan(ew::Maximum{}(NAN, 1.0f)));
  EXPECT_TRUE(std::isnan(ew::Maximum{}(1.0f, NAN)));
  EXPECT_EQ(ew::LeftShift{}(int32_t(1), int32_t(33)), 2); // count modulo 32
  EXPECT_FLOAT_EQ(ew::Exp{}(1.0f), std::exp(1.0f));
  EXPECT_EQ(ew::Select{}(true, 3, 4), 3);
}

TEST(ElementwiseTable, InverseAndHyperbolicFunctors) {
  EXPECT_FLOAT_EQ(ew::ArcTan2{}(1.0f, -1.0f), std::atan2(1.0f, -1.0f));
  EXPECT_TRUE(std::signbit(ew::ArcTan2{}(-0.0f, 1.0f)));
  EXPECT_FLOAT_EQ(ew::Expm1{}(1e-10f), 1e-10f);
  // erfinv inverts erf to double precision, tails included.
  for (double y : {-0.999999, -0.5, 1e-12, 0.3, 0.9, 0.99999999}) {
    EXPECT_NEAR(std::erf(scalar::erfinv_f64(y)), y, 4e-16) << y;
  }
  EXPECT_EQ(ew::ErfInv{}(1.0f), INFINITY);
  EXPECT_EQ(ew::ErfInv{}(-1.0f), -INFINITY);
  EXPECT_TRUE(std::isnan(ew::ErfInv{}(1.5f)));
  EXPECT_TRUE(std::signbit(ew::ErfInv{}(-0.0f)));
  // Complex log10 of +inf keeps a zero imaginary part (NumPy's result).
  auto l = ew::Log10{}(std::complex<float>(INFINITY, 0.0f));
  EXPECT_EQ(l.real(), INFINITY);
  EXPECT_EQ(l.imag(), 0.0f);
  EXPECT_FLOAT_EQ(ew::Log2{}(8.0f), 3.0f);
  EXPECT_EQ(ew::Real{}(std::complex<float>(1.0f, 2.0f)), 1.0f);
  EXPECT_EQ(ew::Imag{}(std::complex<float>(1.0f, 2.0f)), 2.0f);
  EXPECT_EQ(unary_output_dtype(UnaryOp::Real, complex64), float32);
}

TEST(ElementwiseTable, VisitHandsTheEntryType) {
  for (int i = 0; i < static_cast<int>(std::size(ew::kUnaryInfo)); ++i) {
    auto op = static_cast<UnaryOp>(i);
    const char* name = ew::visit(op, []<typename E>() { return E::name; });
    EXPECT_STREQ(name, ew::info(op).name);
  }
  for (int i = 0; i < static_cast<int>(std::size(ew::kBinaryInfo)); ++i) {
    auto op = static_cast<BinaryOp>(i);
    bool fusable = ew::visit(op, []<typename E>() { return E::fusable; });
    EXPECT_EQ(fusable, ew::info(op).fusable);
  }
}

TEST(ElementwiseTable, DerivativesComeFromTheEntries) {
  // vjp of each op goes through ew::derivative: check two against calculus.
  auto grad_of = [](auto f, float x) {
    auto [outs, grads] = vjp([&](const std::vector<array>& in) { return std::vector{f(in[0])}; },
                             {array(x)}, {array(1.0f)});
    return grads[0].template item<float>();
  };
  EXPECT_NEAR(grad_of([](const array& a) { return tanh(a); }, 0.5f),
              1.0f - std::tanh(0.5f) * std::tanh(0.5f), 1e-6);
  EXPECT_NEAR(grad_of([](const array& a) { return power(a, array(3.0f)); }, 2.0f), 12.0f, 1e-5);
  EXPECT_NEAR(grad_of([](const array& a) { return divide(array(1.0f), a); }, 2.0f), -0.25f, 1e-6);
}
