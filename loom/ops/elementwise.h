// Element-wise arithmetic, math and comparisons, with NumPy broadcasting and
// MLX's type promotion.
#pragma once

#include <optional>
#include <vector>

#include "loom/array.h"

namespace loom {

// Unary.
array negative(const array& a, StreamOrDevice s = {});
array abs(const array& a, StreamOrDevice s = {});
array sign(const array& a, StreamOrDevice s = {});
array square(const array& a, StreamOrDevice s = {});
array sqrt(const array& a, StreamOrDevice s = {});
array rsqrt(const array& a, StreamOrDevice s = {});
array reciprocal(const array& a, StreamOrDevice s = {});
array exp(const array& a, StreamOrDevice s = {});
array log(const array& a, StreamOrDevice s = {});
array sin(const array& a, StreamOrDevice s = {});
array cos(const array& a, StreamOrDevice s = {});
array tanh(const array& a, StreamOrDevice s = {});
array erf(const array& a, StreamOrDevice s = {});
array sigmoid(const array& a, StreamOrDevice s = {});
array logical_not(const array& a, StreamOrDevice s = {});
array bitwise_invert(const array& a, StreamOrDevice s = {});
array isnan(const array& a, StreamOrDevice s = {});
array isinf(const array& a, StreamOrDevice s = {});
array floor(const array& a, StreamOrDevice s = {});
array ceil(const array& a, StreamOrDevice s = {});
array sinh(const array& a, StreamOrDevice s = {});
array cosh(const array& a, StreamOrDevice s = {});
array tan(const array& a, StreamOrDevice s = {});
array arcsin(const array& a, StreamOrDevice s = {});
array arccos(const array& a, StreamOrDevice s = {});
array arctan(const array& a, StreamOrDevice s = {});
array arcsinh(const array& a, StreamOrDevice s = {});
array arccosh(const array& a, StreamOrDevice s = {});
array arctanh(const array& a, StreamOrDevice s = {});
// exp(a) - 1, accurate for small a.
array expm1(const array& a, StreamOrDevice s = {});
array erfinv(const array& a, StreamOrDevice s = {});
// The real and imaginary parts: float32 for complex64; for real dtypes the
// input itself and zeros of its dtype.
array real(const array& a, StreamOrDevice s = {});
array imag(const array& a, StreamOrDevice s = {});
// Identity in the forward pass; blocks gradients.
array stop_gradient(const array& a, StreamOrDevice s = {});

// Binary (broadcasting, promoting).
array add(const array& a, const array& b, StreamOrDevice s = {});
array subtract(const array& a, const array& b, StreamOrDevice s = {});
array multiply(const array& a, const array& b, StreamOrDevice s = {});
array divide(const array& a, const array& b, StreamOrDevice s = {});
array floor_divide(const array& a, const array& b, StreamOrDevice s = {});
array remainder(const array& a, const array& b, StreamOrDevice s = {});
array power(const array& a, const array& b, StreamOrDevice s = {});
array maximum(const array& a, const array& b, StreamOrDevice s = {});
array minimum(const array& a, const array& b, StreamOrDevice s = {});
array equal(const array& a, const array& b, StreamOrDevice s = {});
array not_equal(const array& a, const array& b, StreamOrDevice s = {});
array less(const array& a, const array& b, StreamOrDevice s = {});
array less_equal(const array& a, const array& b, StreamOrDevice s = {});
array greater(const array& a, const array& b, StreamOrDevice s = {});
array greater_equal(const array& a, const array& b, StreamOrDevice s = {});
array logical_and(const array& a, const array& b, StreamOrDevice s = {});
array logical_or(const array& a, const array& b, StreamOrDevice s = {});
array bitwise_and(const array& a, const array& b, StreamOrDevice s = {});
array bitwise_or(const array& a, const array& b, StreamOrDevice s = {});
array bitwise_xor(const array& a, const array& b, StreamOrDevice s = {});
array left_shift(const array& a, const array& b, StreamOrDevice s = {});
array right_shift(const array& a, const array& b, StreamOrDevice s = {});
// The angle of the point (b, a), in (-pi, pi].
array arctan2(const array& a, const array& b, StreamOrDevice s = {});

// Ternary.
array where(const array& condition, const array& x, const array& y, StreamOrDevice s = {});

// Comparisons of whole arrays (reduce to a scalar bool array).
array isclose(const array& a, const array& b, double rtol = 1e-5, double atol = 1e-8,
              bool equal_nan = false, StreamOrDevice s = {});
array allclose(const array& a, const array& b, double rtol = 1e-5, double atol = 1e-8,
               bool equal_nan = false, StreamOrDevice s = {});
array array_equal(const array& a, const array& b, bool equal_nan = false, StreamOrDevice s = {});

// --- Composites: built from the ops above, no primitive of their own ---

array isfinite(const array& a, StreamOrDevice s = {});
array isposinf(const array& a, StreamOrDevice s = {});
array isneginf(const array& a, StreamOrDevice s = {});
// Truth values of both operands, whatever their dtypes.
array logical_xor(const array& a, const array& b, StreamOrDevice s = {});
// Halves to even; |x| >= 2^(mantissa bits) and the sign of zero are kept.
// Complex inputs round their real and imaginary parts.
array round(const array& a, int decimals = 0, StreamOrDevice s = {});
array trunc(const array& a, StreamOrDevice s = {});
// Half-precision inputs are computed in float32 (rounded once); complex
// inputs scale the parts of log(a), so log10(inf + 0j) is inf + 0j.
array log2(const array& a, StreamOrDevice s = {});
array log10(const array& a, StreamOrDevice s = {});
// log(1 + a), accurate for small a.
array log1p(const array& a, StreamOrDevice s = {});
// log(exp(a) + exp(b)) without overflow or cancellation.
array logaddexp(const array& a, const array& b, StreamOrDevice s = {});
// One bound may be absent, not both.
array clip(const array& a, const std::optional<array>& a_min, const std::optional<array>& a_max,
           StreamOrDevice s = {});
// NaN -> nan, +inf -> posinf, -inf -> neginf (the dtype's extremes by default).
array nan_to_num(const array& a, float nan = 0.0f, std::optional<float> posinf = std::nullopt,
                 std::optional<float> neginf = std::nullopt, StreamOrDevice s = {});
array degrees(const array& a, StreamOrDevice s = {});
array radians(const array& a, StreamOrDevice s = {});
// The complex conjugate (the input itself for real dtypes).
array conjugate(const array& a, StreamOrDevice s = {});
// Unary plus: the input itself.
array positive(const array& a, StreamOrDevice s = {});
// {a // b, a % b}.
std::vector<array> divmod(const array& a, const array& b, StreamOrDevice s = {});

} // namespace loom
