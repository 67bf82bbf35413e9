// Element-wise ops: validation, MLX type promotion and broadcasting. The
// primitives built here always see inputs of one shape and one dtype.
#include "loom/ops/elementwise.h"

#include <cmath>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>

#include "loom/ops/creation.h"
#include "loom/ops/reduce.h"
#include "loom/ops/shape.h"
#include "loom/ops/utils.h"
#include "loom/primitives/binary.h"
#include "loom/primitives/ternary.h"
#include "loom/primitives/unary.h"

namespace loom {

namespace {

array cast_to(const array& a, Dtype dtype, Stream s) {
  return a.dtype() == dtype ? a : astype(a, dtype, s);
}

// Integers and bool compute inexact functions in float32, as in MLX.
Dtype at_least_float(Dtype d) { return is_inexact(d) ? d : float32; }

void reject_complex(const array& a, const char* op) {
  if (is_complex(a.dtype())) {
    throw std::invalid_argument(std::string("[") + op + "] Not supported for " +
                                dtype_name(a.dtype()) + ".");
  }
}

array build_unary(UnaryOp op, const array& a, Dtype compute, StreamOrDevice sd) {
  Stream s = to_stream(sd);
  return make_unary(op, cast_to(a, compute, s), s);
}

Shape common_shape(const std::vector<array>& inputs) {
  std::vector<Shape> shapes;
  shapes.reserve(inputs.size());
  for (const auto& x : inputs) shapes.push_back(x.shape());
  return broadcast_shapes(shapes);
}

// Casts to `dtype` (before broadcasting, so the cast touches the smaller
// array), then broadcasts to `shape` with a view.
array prepare(const array& x, Dtype dtype, const Shape& shape, Stream s) {
  array y = cast_to(x, dtype, s);
  return y.shape() == shape ? y : broadcast_to(y, shape, s);
}

array build_binary(BinaryOp op, const array& a, const array& b, Dtype compute, StreamOrDevice sd) {
  Stream s = to_stream(sd);
  Shape shape = a.shape() == b.shape() ? a.shape() : broadcast_shapes(a.shape(), b.shape());
  return make_binary(op, prepare(a, compute, shape, s), prepare(b, compute, shape, s), s);
}

array promoted(BinaryOp op, const array& a, const array& b, StreamOrDevice s) {
  return build_binary(op, a, b, promote_types(a.dtype(), b.dtype()), s);
}

// Bitwise ops and shifts: the promoted dtype must be an integer or bool.
// MLX raises a RuntimeError naming the input dtypes, except right_shift,
// which names the promoted dtype twice; the messages follow it.
Dtype bitwise_dtype(const array& a, const array& b, const char* op, bool name_promoted = false) {
  Dtype d = promote_types(a.dtype(), b.dtype());
  if (!is_integral(d) && d != bool_) {
    Dtype first = name_promoted ? d : a.dtype();
    Dtype second = name_promoted ? d : b.dtype();
    throw std::runtime_error(std::string("[") + op +
                             "] Only allowed on integer or boolean types but got types " +
                             dtype_name(first) + " and " + dtype_name(second) + ".");
  }
  return d;
}

} // namespace

// --- unary ---

array negative(const array& a, StreamOrDevice s) {
  if (a.dtype() == bool_) {
    throw std::invalid_argument("[negative] Not supported for bool, use logical_not instead.");
  }
  return build_unary(UnaryOp::Negative, a, a.dtype(), s);
}

array abs(const array& a, StreamOrDevice s) { return build_unary(UnaryOp::Abs, a, a.dtype(), s); }

array sign(const array& a, StreamOrDevice s) { return build_unary(UnaryOp::Sign, a, a.dtype(), s); }

array square(const array& a, StreamOrDevice s) {
  return build_unary(UnaryOp::Square, a, a.dtype(), s);
}

array sqrt(const array& a, StreamOrDevice s) {
  return build_unary(UnaryOp::Sqrt, a, at_least_float(a.dtype()), s);
}

array rsqrt(const array& a, StreamOrDevice s) {
  return build_unary(UnaryOp::Rsqrt, a, at_least_float(a.dtype()), s);
}

array reciprocal(const array& a, StreamOrDevice s) {
  return build_unary(UnaryOp::Reciprocal, a, at_least_float(a.dtype()), s);
}

array exp(const array& a, StreamOrDevice s) {
  return build_unary(UnaryOp::Exp, a, at_least_float(a.dtype()), s);
}

array log(const array& a, StreamOrDevice s) {
  return build_unary(UnaryOp::Log, a, at_least_float(a.dtype()), s);
}

array sin(const array& a, StreamOrDevice s) {
  return build_unary(UnaryOp::Sin, a, at_least_float(a.dtype()), s);
}

array cos(const array& a, StreamOrDevice s) {
  return build_unary(UnaryOp::Cos, a, at_least_float(a.dtype()), s);
}

array tanh(const array& a, StreamOrDevice s) {
  return build_unary(UnaryOp::Tanh, a, at_least_float(a.dtype()), s);
}

array erf(const array& a, StreamOrDevice s) {
  reject_complex(a, "erf");
  return build_unary(UnaryOp::Erf, a, at_least_float(a.dtype()), s);
}

array sigmoid(const array& a, StreamOrDevice s) {
  reject_complex(a, "sigmoid");
  return build_unary(UnaryOp::Sigmoid, a, at_least_float(a.dtype()), s);
}

array logical_not(const array& a, StreamOrDevice s) {
  return build_unary(UnaryOp::LogicalNot, a, a.dtype(), s);
}

array bitwise_invert(const array& a, StreamOrDevice s) {
  if (!is_integral(a.dtype()) && a.dtype() != bool_) {
    throw std::invalid_argument("[bitwise_invert] Bitwise inverse only allowed on integer types.");
  }
  return build_unary(UnaryOp::BitwiseInvert, a, a.dtype(), s);
}

array isnan(const array& a, StreamOrDevice s) {
  return build_unary(UnaryOp::IsNan, a, a.dtype(), s);
}

array isinf(const array& a, StreamOrDevice s) {
  return build_unary(UnaryOp::IsInf, a, a.dtype(), s);
}

array floor(const array& a, StreamOrDevice s) {
  reject_complex(a, "floor");
  return build_unary(UnaryOp::Floor, a, a.dtype(), s);
}

array ceil(const array& a, StreamOrDevice s) {
  reject_complex(a, "ceil");
  return build_unary(UnaryOp::Ceil, a, a.dtype(), s);
}

array sinh(const array& a, StreamOrDevice s) {
  return build_unary(UnaryOp::Sinh, a, at_least_float(a.dtype()), s);
}

array cosh(const array& a, StreamOrDevice s) {
  return build_unary(UnaryOp::Cosh, a, at_least_float(a.dtype()), s);
}

array tan(const array& a, StreamOrDevice s) {
  return build_unary(UnaryOp::Tan, a, at_least_float(a.dtype()), s);
}

array arcsin(const array& a, StreamOrDevice s) {
  return build_unary(UnaryOp::ArcSin, a, at_least_float(a.dtype()), s);
}

array arccos(const array& a, StreamOrDevice s) {
  return build_unary(UnaryOp::ArcCos, a, at_least_float(a.dtype()), s);
}

array arctan(const array& a, StreamOrDevice s) {
  return build_unary(UnaryOp::ArcTan, a, at_least_float(a.dtype()), s);
}

array arcsinh(const array& a, StreamOrDevice s) {
  return build_unary(UnaryOp::ArcSinh, a, at_least_float(a.dtype()), s);
}

array arccosh(const array& a, StreamOrDevice s) {
  return build_unary(UnaryOp::ArcCosh, a, at_least_float(a.dtype()), s);
}

array arctanh(const array& a, StreamOrDevice s) {
  return build_unary(UnaryOp::ArcTanh, a, at_least_float(a.dtype()), s);
}

array expm1(const array& a, StreamOrDevice s) {
  reject_complex(a, "expm1");
  return build_unary(UnaryOp::Expm1, a, at_least_float(a.dtype()), s);
}

array erfinv(const array& a, StreamOrDevice s) {
  reject_complex(a, "erfinv");
  return build_unary(UnaryOp::ErfInv, a, at_least_float(a.dtype()), s);
}

array real(const array& a, StreamOrDevice s) {
  if (!is_complex(a.dtype())) return a;
  return build_unary(UnaryOp::Real, a, a.dtype(), s);
}

array imag(const array& a, StreamOrDevice s) {
  if (!is_complex(a.dtype())) return zeros_like(a, s);
  return build_unary(UnaryOp::Imag, a, a.dtype(), s);
}

array stop_gradient(const array& a, StreamOrDevice sd) {
  Stream s = to_stream(sd);
  return array(a.shape(), a.dtype(), std::make_shared<StopGradient>(s), {a});
}

// --- binary ---

array add(const array& a, const array& b, StreamOrDevice s) {
  return promoted(BinaryOp::Add, a, b, s);
}

array subtract(const array& a, const array& b, StreamOrDevice s) {
  return promoted(BinaryOp::Subtract, a, b, s);
}

array multiply(const array& a, const array& b, StreamOrDevice s) {
  return promoted(BinaryOp::Multiply, a, b, s);
}

array divide(const array& a, const array& b, StreamOrDevice s) {
  return build_binary(BinaryOp::Divide, a, b, at_least_float(promote_types(a.dtype(), b.dtype())),
                      s);
}

array floor_divide(const array& a, const array& b, StreamOrDevice s) {
  Dtype d = promote_types(a.dtype(), b.dtype());
  // There is no floor in the complex plane: MLX divides.
  if (is_complex(d)) return build_binary(BinaryOp::Divide, a, b, d, s);
  return build_binary(BinaryOp::FloorDivide, a, b, d, s);
}

array remainder(const array& a, const array& b, StreamOrDevice s) {
  Dtype d = promote_types(a.dtype(), b.dtype());
  if (is_complex(d)) throw std::invalid_argument("[remainder] Complex type not supported.");
  return build_binary(BinaryOp::Remainder, a, b, d, s);
}

array power(const array& a, const array& b, StreamOrDevice s) {
  return promoted(BinaryOp::Power, a, b, s);
}

array maximum(const array& a, const array& b, StreamOrDevice s) {
  return promoted(BinaryOp::Maximum, a, b, s);
}

array minimum(const array& a, const array& b, StreamOrDevice s) {
  return promoted(BinaryOp::Minimum, a, b, s);
}

array equal(const array& a, const array& b, StreamOrDevice s) {
  return promoted(BinaryOp::Equal, a, b, s);
}

array not_equal(const array& a, const array& b, StreamOrDevice s) {
  return promoted(BinaryOp::NotEqual, a, b, s);
}

array less(const array& a, const array& b, StreamOrDevice s) {
  return promoted(BinaryOp::Less, a, b, s);
}

array less_equal(const array& a, const array& b, StreamOrDevice s) {
  return promoted(BinaryOp::LessEqual, a, b, s);
}

array greater(const array& a, const array& b, StreamOrDevice s) {
  return promoted(BinaryOp::Greater, a, b, s);
}

array greater_equal(const array& a, const array& b, StreamOrDevice s) {
  return promoted(BinaryOp::GreaterEqual, a, b, s);
}

// Operands of different dtypes are compared as bool rather than promoted:
// only their truth values matter, and a bool cast is the cheapest one.
array logical_and(const array& a, const array& b, StreamOrDevice s) {
  return build_binary(BinaryOp::LogicalAnd, a, b, a.dtype() == b.dtype() ? a.dtype() : bool_, s);
}

array logical_or(const array& a, const array& b, StreamOrDevice s) {
  return build_binary(BinaryOp::LogicalOr, a, b, a.dtype() == b.dtype() ? a.dtype() : bool_, s);
}

array bitwise_and(const array& a, const array& b, StreamOrDevice s) {
  return build_binary(BinaryOp::BitwiseAnd, a, b, bitwise_dtype(a, b, "bitwise_and"), s);
}

array bitwise_or(const array& a, const array& b, StreamOrDevice s) {
  return build_binary(BinaryOp::BitwiseOr, a, b, bitwise_dtype(a, b, "bitwise_or"), s);
}

array bitwise_xor(const array& a, const array& b, StreamOrDevice s) {
  return build_binary(BinaryOp::BitwiseXor, a, b, bitwise_dtype(a, b, "bitwise_xor"), s);
}

// Shifting bools shifts them as uint8 (True << True is 2).
array left_shift(const array& a, const array& b, StreamOrDevice s) {
  Dtype d = bitwise_dtype(a, b, "left_shift");
  return build_binary(BinaryOp::LeftShift, a, b, d == bool_ ? uint8 : d, s);
}

array right_shift(const array& a, const array& b, StreamOrDevice s) {
  Dtype d = bitwise_dtype(a, b, "right_shift", true);
  return build_binary(BinaryOp::RightShift, a, b, d == bool_ ? uint8 : d, s);
}

array arctan2(const array& a, const array& b, StreamOrDevice s) {
  Dtype d = promote_types(a.dtype(), b.dtype());
  if (is_complex(d)) {
    throw std::invalid_argument(std::string("[arctan2] Not supported for ") + dtype_name(d) + ".");
  }
  return build_binary(BinaryOp::ArcTan2, a, b, at_least_float(d), s);
}

// --- ternary ---

array where(const array& condition, const array& x, const array& y, StreamOrDevice sd) {
  Stream s = to_stream(sd);
  Shape shape = common_shape({condition, x, y});
  Dtype d = promote_types(x.dtype(), y.dtype());
  return make_select(prepare(condition, bool_, shape, s), prepare(x, d, shape, s),
                     prepare(y, d, shape, s), s);
}

// --- whole-array comparisons ---

array isclose(const array& a, const array& b, double rtol, double atol, bool equal_nan,
              StreamOrDevice sd) {
  Stream s = to_stream(sd);
  // |a - b| <= atol + rtol * |b|, computed in a's and b's promoted dtype
  // (so unsigned differences wrap, as in MLX) against float32 tolerances.
  array lhs = abs(subtract(a, b, s), s);
  array rhs = add(array(atol), multiply(array(rtol), abs(b, s), s), s);
  array close = less_equal(lhs, rhs, s);
  // Infinities are close only to themselves (inf - inf would be NaN).
  array any_inf = logical_or(isinf(a, s), isinf(b, s), s);
  close = where(any_inf, equal(a, b, s), close, s);
  if (equal_nan) close = logical_or(close, logical_and(isnan(a, s), isnan(b, s), s), s);
  return close;
}

array allclose(const array& a, const array& b, double rtol, double atol, bool equal_nan,
               StreamOrDevice s) {
  return all(isclose(a, b, rtol, atol, equal_nan, s), false, s);
}

array array_equal(const array& a, const array& b, bool equal_nan, StreamOrDevice sd) {
  Stream s = to_stream(sd);
  if (a.shape() != b.shape()) return array(false);
  Dtype d = promote_types(a.dtype(), b.dtype());
  array same = equal(a, b, s);
  if (equal_nan && is_inexact(d)) {
    same = logical_or(same, logical_and(isnan(a, s), isnan(b, s), s), s);
  }
  return all(same, false, s);
}

// --- composites ---

namespace {

// The real and imaginary parts of a complex array with finite real parts
// (z * -i is exact then; astype to a real dtype keeps the real part).
std::pair<array, array> complex_parts(const array& z, Stream s) {
  array re = astype(z, float32, s);
  array im = astype(multiply(z, array(complex64_t(0.0f, -1.0f)), s), float32, s);
  return {re, im};
}

array make_complex(const array& re, const array& im, Stream s) {
  return add(astype(re, complex64, s),
             multiply(astype(im, complex64, s), array(complex64_t(0.0f, 1.0f)), s), s);
}

// Round half to even of a real floating array. x - floor(x) is exact, so the
// tie test is too; values too large to have a fraction come back unchanged,
// and a zero result takes the sign of x (round(-0.4) is -0.0).
array round_half_even(const array& x, Stream s) {
  Dtype d = x.dtype();
  array r = floor(x, s);
  array frac = subtract(x, r, s);
  array half = array(0.5, d);
  array odd = not_equal(remainder(r, array(2.0, d), s), array(0.0, d), s);
  array up = logical_or(greater(frac, half, s), logical_and(equal(frac, half, s), odd, s), s);
  array out = where(up, add(r, array(1.0, d), s), r, s);
  return where(equal(out, array(0.0, d), s), multiply(x, array(0.0, d), s), out, s);
}

array round_real(const array& x, int decimals, Stream s) {
  if (decimals == 0) return round_half_even(x, s);
  array scale = array(std::pow(10.0, decimals), x.dtype());
  return divide(round_half_even(multiply(x, scale, s), s), scale, s);
}

} // namespace

array isfinite(const array& a, StreamOrDevice s) {
  return logical_not(logical_or(isnan(a, s), isinf(a, s), s), s);
}

array isposinf(const array& a, StreamOrDevice s) {
  if (!is_inexact(a.dtype())) return zeros(a.shape(), bool_, s);
  return logical_and(isinf(a, s), greater(a, zeros({}, a.dtype(), s), s), s);
}

array isneginf(const array& a, StreamOrDevice s) {
  if (!is_inexact(a.dtype())) return zeros(a.shape(), bool_, s);
  return logical_and(isinf(a, s), less(a, zeros({}, a.dtype(), s), s), s);
}

array logical_xor(const array& a, const array& b, StreamOrDevice s) {
  return not_equal(astype(a, bool_, s), astype(b, bool_, s), s);
}

array round(const array& a, int decimals, StreamOrDevice sd) {
  Stream s = to_stream(sd);
  if (is_complex(a.dtype())) {
    auto [re, im] = complex_parts(a, s);
    return make_complex(round_real(re, decimals, s), round_real(im, decimals, s), s);
  }
  if (is_inexact(a.dtype())) return round_real(a, decimals, s);
  // Integers have no fraction: only negative decimals change them.
  if (decimals >= 0) return a;
  array scale = array(std::pow(10.0, -decimals), float32);
  array f = astype(a, float32, s);
  return astype(multiply(round_half_even(divide(f, scale, s), s), scale, s), a.dtype(), s);
}

array trunc(const array& a, StreamOrDevice s) {
  if (!is_inexact(a.dtype())) return a;
  reject_complex(a, "trunc");
  return where(less(a, zeros({}, a.dtype(), s), s), ceil(a, s), floor(a, s), s);
}

// Table entries (not log(a) / log(base)): half-precision inputs round once,
// and complex infinities keep a zero imaginary part.
array log2(const array& a, StreamOrDevice s) {
  return build_unary(UnaryOp::Log2, a, at_least_float(a.dtype()), s);
}

array log10(const array& a, StreamOrDevice s) {
  return build_unary(UnaryOp::Log10, a, at_least_float(a.dtype()), s);
}

array log1p(const array& a, StreamOrDevice sd) {
  Stream s = to_stream(sd);
  if (!is_complex(a.dtype())) return build_unary(UnaryOp::Log1p, a, at_least_float(a.dtype()), s);
  array x = cast_to(a, at_least_float(a.dtype()), s);
  Dtype d = x.dtype();
  // Goldberg's correction: u = 1 + x rounds, and log(u) * x / (u - 1) cancels
  // that rounding error; where u is exactly 1, log1p(x) is x itself.
  array u = add(array(1.0, d), x, s);
  array one = array(1.0, d);
  array u_is_one = equal(u, one, s);
  array denom = where(u_is_one, one, subtract(u, one, s), s);
  array corrected = multiply(log(u, s), divide(x, denom, s), s);
  // u = +inf (x = +inf) would give inf * (inf / inf): log1p(inf) is inf.
  return where(u_is_one, x, where(isposinf(u, s), u, corrected, s), s);
}

array logaddexp(const array& a, const array& b, StreamOrDevice sd) {
  Stream s = to_stream(sd);
  Dtype d = at_least_float(promote_types(a.dtype(), b.dtype()));
  array x = cast_to(a, d, s);
  array y = cast_to(b, d, s);
  // m + log(e^(x - m) + e^(y - m)) with m = max(x, y) (gradient-free, the
  // value does not depend on it; an infinite max shifts by zero). The term at
  // the max is exactly 1, so the sum minus 1 is the other term, exactly: log1p
  // of it keeps log(1 + e^-20) = 2e-9. The gradient is sigmoid(x - y), 1/2 each at a tie.
  array m = stop_gradient(maximum(x, y, s), s);
  m = where(isinf(m, s), zeros({}, d, s), m, s);
  array ex = exp(subtract(x, m, s), s);
  array ey = exp(subtract(y, m, s), s);
  array one = array(1.0, d);
  array rest = where(greater_equal(x, y, s), add(ey, subtract(ex, one, s), s),
                     add(ex, subtract(ey, one, s), s), s);
  return add(m, log1p(rest, s), s);
}

array clip(const array& a, const std::optional<array>& a_min, const std::optional<array>& a_max,
           StreamOrDevice s) {
  if (!a_min && !a_max) {
    throw std::invalid_argument("At most one of a_min and a_max may be None");
  }
  array out = a;
  if (a_min) out = maximum(out, *a_min, s);
  if (a_max) out = minimum(out, *a_max, s);
  return out;
}

array nan_to_num(const array& a, float nan, std::optional<float> posinf,
                 std::optional<float> neginf, StreamOrDevice s) {
  Dtype d = a.dtype();
  if (!is_inexact(d)) return a;
  if (is_complex(d)) {
    throw std::invalid_argument("[nan_to_num] Not supported for complex64.");
  }
  double big = d == float16    ? 65504.0
               : d == bfloat16 ? 3.3895313892515355e38
               : d == float64  ? std::numeric_limits<double>::max()
                               : std::numeric_limits<float>::max();
  array out = where(isnan(a, s), array(nan, d), a, s);
  out = where(isposinf(a, s), array(posinf ? double(*posinf) : big, d), out, s);
  return where(isneginf(a, s), array(neginf ? double(*neginf) : -big, d), out, s);
}

array degrees(const array& a, StreamOrDevice s) {
  Dtype d = at_least_float(a.dtype());
  return multiply(astype(a, d, s), array(180.0 / M_PI, d), s);
}

array radians(const array& a, StreamOrDevice s) {
  Dtype d = at_least_float(a.dtype());
  return multiply(astype(a, d, s), array(M_PI / 180.0, d), s);
}

array conjugate(const array& a, StreamOrDevice s) { return conj_if_complex(a, to_stream(s)); }

array positive(const array& a, StreamOrDevice) { return a; }

std::vector<array> divmod(const array& a, const array& b, StreamOrDevice s) {
  return {floor_divide(a, b, s), remainder(a, b, s)};
}

} // namespace loom
