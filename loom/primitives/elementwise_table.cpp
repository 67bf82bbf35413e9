// The derivatives of the op table's entries (elementwise_table.h), written
// with ops so that they are lazy, batched by vmap and differentiable again.
// Each returns g times the derivative of the entry with respect to the
// operand in question; reverse mode conjugates the derivative for complex
// operands (MLX's convention).
#include "loom/primitives/elementwise_table.h"

#include <cmath>

#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/primitives/unary.h"

namespace loom {
namespace ew {

namespace {

array d(const UnaryChain& c, const array& v) { return c.reverse ? conj_if_complex(v, c.s) : v; }
array d(const BinaryChain& c, const array& v) { return c.reverse ? conj_if_complex(v, c.s) : v; }
array scalar(double v, const array& like) { return array(v, like.dtype()); }

// Piecewise constant ops: zero almost everywhere.
array zero_unary(const UnaryChain& c) { return zeros_like(c.x, c.s); }
array zero_binary(const BinaryChain& c) { return zeros_like(c.arg == 0 ? c.a : c.b, c.s); }

} // namespace

// --- unary ---

array Negative::derivative(const UnaryChain& c) { return negative(c.g, c.s); }
array Conjugate::derivative(const UnaryChain& c) { return conj_if_complex(c.g, c.s); }
array Abs::derivative(const UnaryChain& c) {
  // sign(x) is also d|z|/dz-bar for complex z; forward mode keeps the real
  // part of conj(sign(z)) * t, the directional derivative of |z|.
  return c.reverse ? multiply(c.g, sign(c.x, c.s), c.s)
                   : multiply(c.g, conj_if_complex(sign(c.x, c.s), c.s), c.s);
}
array Square::derivative(const UnaryChain& c) {
  return multiply(c.g, d(c, multiply(c.x, scalar(2.0, c.x), c.s)), c.s);
}
array Sqrt::derivative(const UnaryChain& c) {
  return divide(c.g, d(c, multiply(c.out, scalar(2.0, c.x), c.s)), c.s);
}
array Rsqrt::derivative(const UnaryChain& c) {
  return multiply(c.g, d(c, divide(multiply(c.out, scalar(-0.5, c.x), c.s), c.x, c.s)), c.s);
}
array Reciprocal::derivative(const UnaryChain& c) {
  return multiply(c.g, d(c, negative(square(c.out, c.s), c.s)), c.s);
}
array Exp::derivative(const UnaryChain& c) { return multiply(c.g, d(c, c.out), c.s); }
array Log::derivative(const UnaryChain& c) { return divide(c.g, d(c, c.x), c.s); }
array Sin::derivative(const UnaryChain& c) { return multiply(c.g, d(c, cos(c.x, c.s)), c.s); }
array Cos::derivative(const UnaryChain& c) {
  return multiply(c.g, d(c, negative(sin(c.x, c.s), c.s)), c.s);
}
array Tanh::derivative(const UnaryChain& c) {
  if (is_complex(c.x.dtype())) {
    return multiply(c.g, d(c, subtract(scalar(1.0, c.x), square(c.out, c.s), c.s)), c.s);
  }
  // sech^2 x = 4e / (1 + e)^2 with e = exp(-2|x|): 1 - tanh^2 x cancels
  // for large |x| (relative error 8e-4 at |x| = 6, 0 at |x| = 12).
  array e = exp(multiply(abs(c.x, c.s), scalar(-2.0, c.x), c.s), c.s);
  array denom = square(add(scalar(1.0, c.x), e, c.s), c.s);
  return multiply(c.g, divide(multiply(e, scalar(4.0, c.x), c.s), denom, c.s), c.s);
}
array Erf::derivative(const UnaryChain& c) {
  const double two_over_sqrt_pi = 2.0 / std::sqrt(M_PI);
  array e = exp(negative(square(c.x, c.s), c.s), c.s);
  return multiply(c.g, multiply(e, scalar(two_over_sqrt_pi, c.x), c.s), c.s);
}
array Sigmoid::derivative(const UnaryChain& c) {
  return multiply(c.g, multiply(c.out, subtract(scalar(1.0, c.x), c.out, c.s), c.s), c.s);
}
array Sinh::derivative(const UnaryChain& c) { return multiply(c.g, d(c, cosh(c.x, c.s)), c.s); }
array Cosh::derivative(const UnaryChain& c) { return multiply(c.g, d(c, sinh(c.x, c.s)), c.s); }
array Tan::derivative(const UnaryChain& c) {
  return divide(c.g, d(c, square(cos(c.x, c.s), c.s)), c.s);
}
array ArcSin::derivative(const UnaryChain& c) {
  array one_minus_x2 = subtract(scalar(1.0, c.x), square(c.x, c.s), c.s);
  return multiply(c.g, d(c, rsqrt(one_minus_x2, c.s)), c.s);
}
array ArcCos::derivative(const UnaryChain& c) {
  array one_minus_x2 = subtract(scalar(1.0, c.x), square(c.x, c.s), c.s);
  return multiply(c.g, d(c, negative(rsqrt(one_minus_x2, c.s), c.s)), c.s);
}
array ArcTan::derivative(const UnaryChain& c) {
  return divide(c.g, d(c, add(scalar(1.0, c.x), square(c.x, c.s), c.s)), c.s);
}
array ArcSinh::derivative(const UnaryChain& c) {
  array x2_plus_one = add(square(c.x, c.s), scalar(1.0, c.x), c.s);
  return multiply(c.g, d(c, rsqrt(x2_plus_one, c.s)), c.s);
}
array ArcCosh::derivative(const UnaryChain& c) {
  array x2_minus_one = subtract(square(c.x, c.s), scalar(1.0, c.x), c.s);
  return multiply(c.g, d(c, rsqrt(x2_minus_one, c.s)), c.s);
}
array ArcTanh::derivative(const UnaryChain& c) {
  return divide(c.g, d(c, subtract(scalar(1.0, c.x), square(c.x, c.s), c.s)), c.s);
}
array Expm1::derivative(const UnaryChain& c) { return multiply(c.g, exp(c.x, c.s), c.s); }
array Log1p::derivative(const UnaryChain& c) {
  return divide(c.g, add(c.x, scalar(1.0, c.x), c.s), c.s);
}
array ErfInv::derivative(const UnaryChain& c) {
  // d/dy erfinv(y) = sqrt(pi)/2 exp(erfinv(y)^2).
  const double half_sqrt_pi = std::sqrt(M_PI) / 2.0;
  array e = exp(square(c.out, c.s), c.s);
  return multiply(c.g, multiply(e, scalar(half_sqrt_pi, c.x), c.s), c.s);
}
array Log2::derivative(const UnaryChain& c) {
  return divide(c.g, d(c, multiply(c.x, scalar(std::log(2.0), c.x), c.s)), c.s);
}
array Log10::derivative(const UnaryChain& c) {
  return divide(c.g, d(c, multiply(c.x, scalar(std::log(10.0), c.x), c.s)), c.s);
}
// Reverse mode: a real cotangent g of Re z comes back as g + 0i, of Im z as
// g i (the cast to the input's dtype happens in Unary::vjp).
array Real::derivative(const UnaryChain& c) { return c.reverse ? c.g : real(c.g, c.s); }
array Imag::derivative(const UnaryChain& c) {
  if (!c.reverse) return imag(c.g, c.s);
  return multiply(astype(c.g, complex64, c.s), array(complex64_t(0.0f, 1.0f)), c.s);
}
array Sign::derivative(const UnaryChain& c) { return zero_unary(c); }
array Floor::derivative(const UnaryChain& c) { return zero_unary(c); }
array Ceil::derivative(const UnaryChain& c) { return zero_unary(c); }
array IsNan::derivative(const UnaryChain& c) { return zero_unary(c); }
array IsInf::derivative(const UnaryChain& c) { return zero_unary(c); }
array LogicalNot::derivative(const UnaryChain& c) { return zero_unary(c); }
array BitwiseInvert::derivative(const UnaryChain& c) { return zero_unary(c); }

// --- binary ---

array Add::derivative(const BinaryChain& c) { return c.g; }
array Subtract::derivative(const BinaryChain& c) { return c.arg == 0 ? c.g : negative(c.g, c.s); }
array Multiply::derivative(const BinaryChain& c) {
  return multiply(c.g, d(c, c.arg == 0 ? c.b : c.a), c.s);
}
array Divide::derivative(const BinaryChain& c) {
  if (c.arg == 0) return divide(c.g, d(c, c.b), c.s);
  return negative(multiply(c.g, d(c, divide(c.out, c.b, c.s)), c.s), c.s);
}
array Remainder::derivative(const BinaryChain& c) {
  // a mod b = a - b * floor(a / b): piecewise linear in both.
  if (c.arg == 0) return c.g;
  return negative(multiply(c.g, floor_divide(c.a, c.b, c.s), c.s), c.s);
}
array Power::derivative(const BinaryChain& c) {
  if (c.arg == 0) {
    array one = scalar(1.0, c.b);
    return multiply(c.g, d(c, multiply(c.b, power(c.a, subtract(c.b, one, c.s), c.s), c.s)), c.s);
  }
  // d/db a^b = a^b log(a); taken as 0 where a^b is 0 (a = 0, b > 0), where
  // the product would otherwise be 0 * -inf.
  array t = multiply(c.out, log(c.a, c.s), c.s);
  array zero_out = equal(c.out, scalar(0.0, c.out), c.s);
  return multiply(c.g, d(c, where(zero_out, scalar(0.0, t), t, c.s)), c.s);
}
array Maximum::derivative(const BinaryChain& c) {
  // Ties send the gradient to b, as in MLX.
  array a_wins = greater(c.a, c.b, c.s);
  array zero = scalar(0.0, c.g);
  return c.arg == 0 ? where(a_wins, c.g, zero, c.s) : where(a_wins, zero, c.g, c.s);
}
array Minimum::derivative(const BinaryChain& c) {
  array a_wins = less(c.a, c.b, c.s);
  array zero = scalar(0.0, c.g);
  return c.arg == 0 ? where(a_wins, c.g, zero, c.s) : where(a_wins, zero, c.g, c.s);
}
array ArcTan2::derivative(const BinaryChain& c) {
  // atan2(a, b): d/da = b / (a^2 + b^2), d/db = -a / (a^2 + b^2).
  array r2 = add(square(c.a, c.s), square(c.b, c.s), c.s);
  array num = c.arg == 0 ? c.b : negative(c.a, c.s);
  return multiply(c.g, divide(num, r2, c.s), c.s);
}
array FloorDivide::derivative(const BinaryChain& c) { return zero_binary(c); }
array Equal::derivative(const BinaryChain& c) { return zero_binary(c); }
array NotEqual::derivative(const BinaryChain& c) { return zero_binary(c); }
array Less::derivative(const BinaryChain& c) { return zero_binary(c); }
array LessEqual::derivative(const BinaryChain& c) { return zero_binary(c); }
array Greater::derivative(const BinaryChain& c) { return zero_binary(c); }
array GreaterEqual::derivative(const BinaryChain& c) { return zero_binary(c); }
array LogicalAnd::derivative(const BinaryChain& c) { return zero_binary(c); }
array LogicalOr::derivative(const BinaryChain& c) { return zero_binary(c); }
array BitwiseAnd::derivative(const BinaryChain& c) { return zero_binary(c); }
array BitwiseOr::derivative(const BinaryChain& c) { return zero_binary(c); }
array BitwiseXor::derivative(const BinaryChain& c) { return zero_binary(c); }
array LeftShift::derivative(const BinaryChain& c) { return zero_binary(c); }
array RightShift::derivative(const BinaryChain& c) { return zero_binary(c); }

// --- ternary ---

array Select::derivative(const TernaryChain& c) {
  // The condition is piecewise constant: no gradient flows to it.
  if (c.arg == 0) return zeros_like(c.condition, c.s);
  array zero(0.0, c.g.dtype());
  return c.arg == 1 ? where(c.condition, c.g, zero, c.s) : where(c.condition, zero, c.g, c.s);
}

// --- dispatch on the op value ---

array derivative(UnaryOp op, const UnaryChain& c) {
  return visit(op, [&]<typename E>() { return E::derivative(c); });
}

array derivative(BinaryOp op, const BinaryChain& c) {
  return visit(op, [&]<typename E>() { return E::derivative(c); });
}

} // namespace ew
} // namespace loom
