// The element-wise op table: every unary, binary and ternary op is ONE entry
// here. An entry is a struct holding
//   name      the primitive's printed name ("Sin")
//   accepts   the compute types it is defined on (its dtype rule; ops/ casts
//             or rejects anything else before a node is built)
//   yields    its output dtype: the input's, bool, or real (|complex| is float)
//   fusable   whether compile may fuse it into a generated kernel
//   code      its code-generation form: a C expression over the operands
//             {0}, {1}, {2} in their compute type, for the float/double
//             (and, for integer ops, integer) types it accepts
//   derivative_reads_output  whether the derivative uses the op's output
//   operator() the scalar functor on compute types, which every CPU kernel
//             runs (and generated C++ may call)
//   block     (optional) the float32 functor over a block, with identical
//             results: for functors that branch (sin, cos, tan: huge
//             arguments) or that a block can skip part of (erf, tanh: the
//             large-argument half when a piece has no large argument);
//             kernels call it instead of looping over operator()
//   costly    (optional, default false) true for functions that cost more per
//             element than a pass over memory (exp, log, erf, tanh, the
//             trigonometric family): compile stores their values instead of
//             recomputing them in other regions (PrimitiveTraits::costly)
//   derivative its chain rule, declared here and written with ops in
//             primitives/elementwise_table.cpp (vjp and jvp use it)
// and LOOM_UNARY_OPS / LOOM_BINARY_OPS / LOOM_TERNARY_OPS list the entries:
// the UnaryOp/BinaryOp enums, the runtime info table (info(op)), the CPU
// kernel dispatch and the derivatives are all generated from the lists.
//
// Adding an element-wise op: write its entry, add it to its list, write its
// derivative, add the user-facing function in ops/ and its tests.
//
// Compute types: float16/bfloat16 compute as float, bool as bool; the
// kernels load and store the storage types around the functor.
#pragma once

#include <cmath>
#include <complex>
#include <cstdint>
#include <type_traits>

#include "loom/primitives/elementwise_scalar.h"

namespace loom {

class array;
struct Stream;

namespace ew {

using namespace loom::scalar;

// The compute types an op is defined on.
enum class Accepts : uint8_t {
  all,
  numeric,     // not bool
  inexact,     // float, double, complex
  real,        // float, double
  not_complex, // bool, integers, float, double
  integral,    // bool and integers
  integer,     // integers, not bool
};

template <Accepts A, typename C>
inline constexpr bool accepts_v = A == Accepts::all || (A == Accepts::numeric && !is_bool_v<C>) ||
                                  (A == Accepts::inexact && is_inexact_v<C>) ||
                                  (A == Accepts::real && is_real_v<C>) ||
                                  (A == Accepts::not_complex && !is_complex_v<C>) ||
                                  (A == Accepts::integral && std::is_integral_v<C>) ||
                                  (A == Accepts::integer && is_int_v<C>);

// The output dtype.
enum class Yields : uint8_t {
  input,   // the (promoted) input dtype
  boolean, // bool
  real,    // the input dtype, float32 for complex64
};

// What a derivative sees. Reverse mode conjugates the derivative for complex
// inputs (MLX's convention); `out` is the op's output (a lazily rebuilt one in
// forward mode), read only by entries with derivative_reads_output.
struct UnaryChain {
  const array& x;
  const array& out;
  const array& g; // cotangent (vjp) or tangent (jvp)
  bool reverse;
  const Stream& s;
};

struct BinaryChain {
  int arg; // 0: d/da, 1: d/db
  const array& a;
  const array& b;
  const array& out;
  const array& g;
  bool reverse;
  const Stream& s;
};

struct TernaryChain {
  int arg; // 0: condition, 1: x, 2: y
  const array& condition;
  const array& x;
  const array& y;
  const array& g;
  const Stream& s;
};

// The data of an entry (see the top of this file).
#define LOOM_EW_ENTRY(NAME, ACCEPTS, YIELDS, FUSABLE, CODE, READS_OUTPUT) \
  static constexpr const char* name = #NAME;                              \
  static constexpr Accepts accepts = Accepts::ACCEPTS;                    \
  static constexpr Yields yields = Yields::YIELDS;                        \
  static constexpr bool fusable = FUSABLE;                                \
  static constexpr const char* code = CODE;                               \
  static constexpr bool derivative_reads_output = READS_OUTPUT;

// --- unary entries ---

struct Negative {
  LOOM_EW_ENTRY(Negative, numeric, input, true, "(-{0})", false)
  template <typename C>
  C operator()(C x) const {
    if constexpr (is_int_v<C>)
      return wrap_neg(x);
    else
      return -x;
  }
  static array derivative(const UnaryChain& c);
};

struct Abs {
  LOOM_EW_ENTRY(Abs, all, real, true, "fabs({0})", false)
  template <typename C>
  auto operator()(C x) const {
    if constexpr (is_bool_v<C> || std::is_unsigned_v<C>)
      return x;
    else if constexpr (is_int_v<C>)
      return x < 0 ? wrap_neg(x) : x; // abs(INT_MIN) wraps
    else
      return std::abs(x); // complex64 gives float
  }
  static array derivative(const UnaryChain& c);
};

struct Sign {
  LOOM_EW_ENTRY(Sign, all, input, true, "(({0} > 0) - ({0} < 0))", false)
  template <typename C>
  C operator()(C x) const {
    if constexpr (is_bool_v<C>) {
      return x;
    } else if constexpr (std::is_unsigned_v<C>) {
      return static_cast<C>(x != 0);
    } else if constexpr (is_complex_v<C>) {
      float m = std::abs(x);
      return m == 0.0f ? C(0.0f) : x / m;
    } else {
      // NaN compares false both ways and gives 0, as in MLX.
      return static_cast<C>((x > C(0)) - (x < C(0)));
    }
  }
  static array derivative(const UnaryChain& c);
};

struct Square {
  LOOM_EW_ENTRY(Square, all, input, true, "({0} * {0})", false)
  template <typename C>
  C operator()(C x) const {
    if constexpr (is_bool_v<C>)
      return x;
    else if constexpr (is_int_v<C>)
      return wrap_mul(x, x);
    else
      return x * x;
  }
  static array derivative(const UnaryChain& c);
};

struct Sqrt {
  LOOM_EW_ENTRY(Sqrt, inexact, input, true, "sqrt({0})", true)
  template <typename C>
  C operator()(C x) const {
    return std::sqrt(x);
  }
  static array derivative(const UnaryChain& c);
};

struct Rsqrt {
  LOOM_EW_ENTRY(Rsqrt, inexact, input, true, "(1 / sqrt({0}))", true)
  template <typename C>
  C operator()(C x) const {
    return C(1) / std::sqrt(x);
  }
  static array derivative(const UnaryChain& c);
};

struct Reciprocal {
  LOOM_EW_ENTRY(Reciprocal, inexact, input, true, "(1 / {0})", true)
  template <typename C>
  C operator()(C x) const {
    return C(1) / x;
  }
  static array derivative(const UnaryChain& c);
};

struct Exp {
  LOOM_EW_ENTRY(Exp, inexact, input, true, "exp({0})", true)
  static constexpr bool costly = true;
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_same_v<C, float>)
      return exp_f32(x);
    else if constexpr (std::is_same_v<C, double>)
      return exp_f64(x);
    else
      return std::exp(x);
  }
  static array derivative(const UnaryChain& c);
};

struct Log {
  LOOM_EW_ENTRY(Log, inexact, input, true, "log({0})", false)
  static constexpr bool costly = true;
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_same_v<C, float>)
      return log_f32(x);
    else if constexpr (std::is_same_v<C, double>)
      return log_f64(x);
    else
      return std::log(x);
  }
  static array derivative(const UnaryChain& c);
};

struct Sin {
  LOOM_EW_ENTRY(Sin, inexact, input, true, "sin({0})", false)
  static constexpr bool costly = true;
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_same_v<C, float>)
      return sin_f32(x);
    else
      return std::sin(x);
  }
  static void block(const float* x, float* y, size_t n) {
    ranged_block<sin_f32_core, sin_f32_wide>(x, y, n);
  }
  static array derivative(const UnaryChain& c);
};

struct Cos {
  LOOM_EW_ENTRY(Cos, inexact, input, true, "cos({0})", false)
  static constexpr bool costly = true;
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_same_v<C, float>)
      return cos_f32(x);
    else
      return std::cos(x);
  }
  static void block(const float* x, float* y, size_t n) {
    ranged_block<cos_f32_core, cos_f32_wide>(x, y, n);
  }
  static array derivative(const UnaryChain& c);
};

struct Tanh {
  LOOM_EW_ENTRY(Tanh, inexact, input, true, "tanh({0})", true)
  static constexpr bool costly = true;
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_same_v<C, float>)
      return tanh_f32(x);
    else
      return std::tanh(x);
  }
  static void block(const float* x, float* y, size_t n) {
    split_block<tanh_f32_small, tanh_in_small_range, tanh_f32, kTanhSplit>(x, y, n);
  }
  static array derivative(const UnaryChain& c);
};

struct Erf {
  LOOM_EW_ENTRY(Erf, real, input, true, "erf({0})", false)
  static constexpr bool costly = true;
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_same_v<C, float>)
      return erf_f32(x);
    else
      return std::erf(x);
  }
  static void block(const float* x, float* y, size_t n) { erf_block(x, y, n); }
  static array derivative(const UnaryChain& c);
};

struct Sigmoid {
  LOOM_EW_ENTRY(Sigmoid, real, input, true, "(1 / (1 + exp(-{0})))", true)
  static constexpr bool costly = true;
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_same_v<C, float>)
      return sigmoid_f32(x);
    else
      return C(1) / (C(1) + std::exp(-x));
  }
  static array derivative(const UnaryChain& c);
};

struct LogicalNot {
  LOOM_EW_ENTRY(LogicalNot, all, boolean, true, "({0} == 0)", false)
  template <typename C>
  bool operator()(C x) const {
    return x == C(0);
  }
  static array derivative(const UnaryChain& c);
};

struct BitwiseInvert {
  LOOM_EW_ENTRY(BitwiseInvert, integral, input, true, "(~{0})", false)
  template <typename C>
  C operator()(C x) const {
    if constexpr (is_bool_v<C>)
      return !x;
    else
      return static_cast<C>(~x);
  }
  static array derivative(const UnaryChain& c);
};

struct IsNan {
  LOOM_EW_ENTRY(IsNan, all, boolean, true, "isnan({0})", false)
  template <typename C>
  bool operator()(C x) const {
    if constexpr (is_complex_v<C>)
      return x.real() != x.real() || x.imag() != x.imag();
    else if constexpr (is_real_v<C>)
      return x != x;
    else
      return false;
  }
  static array derivative(const UnaryChain& c);
};

struct IsInf {
  LOOM_EW_ENTRY(IsInf, all, boolean, true, "isinf({0})", false)
  template <typename C>
  bool operator()(C x) const {
    if constexpr (is_complex_v<C>)
      return std::isinf(x.real()) || std::isinf(x.imag());
    else if constexpr (is_real_v<C>)
      return std::isinf(x);
    else
      return false;
  }
  static array derivative(const UnaryChain& c);
};

struct Floor {
  LOOM_EW_ENTRY(Floor, not_complex, input, true, "floor({0})", false)
  template <typename C>
  C operator()(C x) const {
    if constexpr (is_real_v<C>)
      return std::floor(x);
    else
      return x;
  }
  static array derivative(const UnaryChain& c);
};

struct Ceil {
  LOOM_EW_ENTRY(Ceil, not_complex, input, true, "ceil({0})", false)
  template <typename C>
  C operator()(C x) const {
    if constexpr (is_real_v<C>)
      return std::ceil(x);
    else
      return x;
  }
  static array derivative(const UnaryChain& c);
};

struct Conjugate {
  LOOM_EW_ENTRY(Conjugate, all, input, true, "{0}", false)
  template <typename C>
  C operator()(C x) const {
    if constexpr (is_complex_v<C>)
      return std::conj(x);
    else
      return x;
  }
  static array derivative(const UnaryChain& c);
};

struct Sinh {
  LOOM_EW_ENTRY(Sinh, inexact, input, true, "sinh({0})", false)
  static constexpr bool costly = true;
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_same_v<C, float>)
      return sinh_f32(x);
    else
      return std::sinh(x);
  }
  static array derivative(const UnaryChain& c);
};

struct Cosh {
  LOOM_EW_ENTRY(Cosh, inexact, input, true, "cosh({0})", false)
  static constexpr bool costly = true;
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_same_v<C, float>)
      return cosh_f32(x);
    else
      return std::cosh(x);
  }
  static array derivative(const UnaryChain& c);
};

struct Tan {
  LOOM_EW_ENTRY(Tan, inexact, input, true, "tan({0})", false)
  static constexpr bool costly = true;
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_same_v<C, float>)
      return tan_f32(x);
    else
      return std::tan(x);
  }
  static void block(const float* x, float* y, size_t n) {
    ranged_block<tan_f32_core, tan_f32_wide>(x, y, n);
  }
  static array derivative(const UnaryChain& c);
};

struct ArcSin {
  LOOM_EW_ENTRY(ArcSin, inexact, input, true, "asin({0})", false)
  static constexpr bool costly = true;
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_same_v<C, float>)
      return asin_f32(x);
    else
      return std::asin(x);
  }
  static array derivative(const UnaryChain& c);
};

struct ArcCos {
  LOOM_EW_ENTRY(ArcCos, inexact, input, true, "acos({0})", false)
  static constexpr bool costly = true;
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_same_v<C, float>)
      return acos_f32(x);
    else
      return std::acos(x);
  }
  static array derivative(const UnaryChain& c);
};

struct ArcTan {
  LOOM_EW_ENTRY(ArcTan, inexact, input, true, "atan({0})", false)
  static constexpr bool costly = true;
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_same_v<C, float>)
      return atan_f32(x);
    else
      return std::atan(x);
  }
  static array derivative(const UnaryChain& c);
};

struct ArcSinh {
  LOOM_EW_ENTRY(ArcSinh, inexact, input, true, "asinh({0})", false)
  static constexpr bool costly = true;
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_same_v<C, float>)
      return asinh_f32(x);
    else
      return std::asinh(x);
  }
  static array derivative(const UnaryChain& c);
};

struct ArcCosh {
  LOOM_EW_ENTRY(ArcCosh, inexact, input, true, "acosh({0})", false)
  static constexpr bool costly = true;
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_same_v<C, float>)
      return acosh_f32(x);
    else
      return std::acosh(x);
  }
  static array derivative(const UnaryChain& c);
};

struct ArcTanh {
  LOOM_EW_ENTRY(ArcTanh, inexact, input, true, "atanh({0})", false)
  static constexpr bool costly = true;
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_same_v<C, float>)
      return atanh_f32(x);
    else
      return std::atanh(x);
  }
  static array derivative(const UnaryChain& c);
};

struct Expm1 {
  LOOM_EW_ENTRY(Expm1, real, input, true, "expm1({0})", false)
  static constexpr bool costly = true;
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_same_v<C, float>)
      return expm1_f32(x);
    else
      return std::expm1(x);
  }
  static array derivative(const UnaryChain& c);
};

// Real inputs only: ops/ composes complex log1p from log.
struct Log1p {
  LOOM_EW_ENTRY(Log1p, real, input, true, "log1p({0})", false)
  static constexpr bool costly = true;
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_same_v<C, float>)
      return log1p_f32(x);
    else
      return std::log1p(x);
  }
  static array derivative(const UnaryChain& c);
};

// Not fused: its code form calls the double-precision routine (float32
// runs the vectorised erfinv_f32).
struct ErfInv {
  LOOM_EW_ENTRY(ErfInv, real, input, false, "loom::scalar::erfinv_f64({0})", true)
  static constexpr bool costly = true;
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_same_v<C, float>)
      return erfinv_f32(x);
    else
      return static_cast<C>(erfinv_f64(static_cast<double>(x)));
  }
  static array derivative(const UnaryChain& c);
};

// Complex log2/log10 scale the real and imaginary parts of log z separately:
// multiplying by a complex constant would turn log(inf) = inf + 0i into
// inf + nan i.
struct Log2 {
  LOOM_EW_ENTRY(Log2, inexact, input, true, "log2({0})", false)
  static constexpr bool costly = true;
  template <typename C>
  C operator()(C x) const {
    constexpr float kInvLn2 = 1.44269504088896341f;
    if constexpr (std::is_same_v<C, float>) {
      return log_f32(x) * kInvLn2;
    } else if constexpr (is_complex_v<C>) {
      C z = std::log(x);
      return C(z.real() * kInvLn2, z.imag() * kInvLn2);
    } else {
      return std::log2(x);
    }
  }
  static array derivative(const UnaryChain& c);
};

struct Log10 {
  LOOM_EW_ENTRY(Log10, inexact, input, true, "log10({0})", false)
  static constexpr bool costly = true;
  template <typename C>
  C operator()(C x) const {
    constexpr float kInvLn10 = 0.434294481903251828f;
    if constexpr (std::is_same_v<C, float>) {
      return log_f32(x) * kInvLn10;
    } else if constexpr (is_complex_v<C>) {
      C z = std::log(x);
      return C(z.real() * kInvLn10, z.imag() * kInvLn10);
    } else {
      return std::log10(x);
    }
  }
  static array derivative(const UnaryChain& c);
};

// The parts of a complex number (ops/ never builds these for real inputs).
struct Real {
  LOOM_EW_ENTRY(Real, inexact, real, false, "std::real({0})", false)
  template <typename C>
  auto operator()(C x) const {
    if constexpr (is_complex_v<C>)
      return x.real();
    else
      return x;
  }
  static array derivative(const UnaryChain& c);
};

struct Imag {
  LOOM_EW_ENTRY(Imag, inexact, real, false, "std::imag({0})", false)
  template <typename C>
  auto operator()(C x) const {
    if constexpr (is_complex_v<C>)
      return x.imag();
    else
      return C(0);
  }
  static array derivative(const UnaryChain& c);
};

// --- binary entries (both operands share one dtype after promotion) ---

struct Add {
  LOOM_EW_ENTRY(Add, all, input, true, "(({0}) + ({1}))", false)
  template <typename C>
  C operator()(C x, C y) const {
    if constexpr (is_bool_v<C>)
      return x || y;
    else if constexpr (is_int_v<C>)
      return wrap_add(x, y);
    else
      return x + y;
  }
  static array derivative(const BinaryChain& c);
};

struct Subtract {
  LOOM_EW_ENTRY(Subtract, all, input, true, "(({0}) - ({1}))", false)
  template <typename C>
  C operator()(C x, C y) const {
    if constexpr (is_bool_v<C>)
      return x != y;
    else if constexpr (is_int_v<C>)
      return wrap_sub(x, y);
    else
      return x - y;
  }
  static array derivative(const BinaryChain& c);
};

struct Multiply {
  LOOM_EW_ENTRY(Multiply, all, input, true, "(({0}) * ({1}))", false)
  template <typename C>
  C operator()(C x, C y) const {
    if constexpr (is_bool_v<C>)
      return x && y;
    else if constexpr (is_int_v<C>)
      return wrap_mul(x, y);
    else
      return x * y;
  }
  static array derivative(const BinaryChain& c);
};

struct Divide {
  LOOM_EW_ENTRY(Divide, inexact, input, true, "(({0}) / ({1}))", true)
  template <typename C>
  C operator()(C x, C y) const {
    return x / y;
  }
  static array derivative(const BinaryChain& c);
};

// Rounds towards negative infinity. Integer division by zero gives 0 (MLX's
// result); INT_MIN // -1 wraps instead of trapping.
struct FloorDivide {
  LOOM_EW_ENTRY(FloorDivide, not_complex, input, true, "floor(({0}) / ({1}))", false)
  template <typename C>
  C operator()(C x, C y) const {
    if constexpr (is_bool_v<C>) {
      return x && y;
    } else if constexpr (std::is_unsigned_v<C>) {
      return y == 0 ? C(0) : static_cast<C>(x / y);
    } else if constexpr (is_int_v<C>) {
      if (y == 0) return C(0);
      if (y == C(-1)) return wrap_neg(x);
      C q = static_cast<C>(x / y);
      if (static_cast<C>(x % y) != 0 && ((x < 0) != (y < 0))) q = static_cast<C>(q - 1);
      return q;
    } else {
      return std::floor(x / y);
    }
  }
  static array derivative(const BinaryChain& c);
};

// Takes the sign of the divisor (Python's %). Integer x % 0 gives x (MLX's
// result).
struct Remainder {
  LOOM_EW_ENTRY(Remainder, not_complex, input, true,
                "(fmod({0}, {1}) != 0 && ((fmod({0}, {1}) < 0) != ({1} < 0)) ? fmod({0}, {1}) + "
                "{1} : fmod({0}, {1}))",
                false)
  template <typename C>
  C operator()(C x, C y) const {
    if constexpr (is_bool_v<C>) {
      return x && !y;
    } else if constexpr (std::is_unsigned_v<C>) {
      return y == 0 ? x : static_cast<C>(x % y);
    } else if constexpr (is_int_v<C>) {
      if (y == 0) return x;
      if (y == C(-1)) return C(0);
      C r = static_cast<C>(x % y);
      if (r != 0 && ((r < 0) != (y < 0))) r = static_cast<C>(r + y);
      return r;
    } else {
      C r = std::fmod(x, y);
      if (r != 0 && ((r < 0) != (y < 0))) r += y;
      return r;
    }
  }
  static array derivative(const BinaryChain& c);
};

// Integer powers wrap around; a negative integer exponent gives 0 (MLX).
struct Power {
  LOOM_EW_ENTRY(Power, all, input, true, "pow({0}, {1})", true)
  template <typename C>
  C operator()(C x, C y) const {
    if constexpr (is_bool_v<C>) {
      return x || !y;
    } else if constexpr (is_int_v<C>) {
      if constexpr (std::is_signed_v<C>) {
        if (y < 0) return C(0);
      }
      using U = wide_unsigned_t<C>;
      U result = 1;
      U base = static_cast<U>(x);
      auto e = static_cast<std::make_unsigned_t<C>>(y);
      while (e != 0) {
        if (e & 1) result = static_cast<U>(result * base);
        base = static_cast<U>(base * base);
        e = static_cast<decltype(e)>(e >> 1);
      }
      return static_cast<C>(result);
    } else {
      return std::pow(x, y);
    }
  }
  static array derivative(const BinaryChain& c);
};

// NaN propagates from either side (for complex numbers, which compare
// lexicographically, only from the first, as in MLX).
struct Maximum {
  LOOM_EW_ENTRY(Maximum, all, input, true, "(({0} > {1} || {0} != {0}) ? {0} : {1})", false)
  template <typename C>
  C operator()(C x, C y) const {
    if constexpr (is_bool_v<C>)
      return x || y;
    else if constexpr (is_complex_v<C>)
      return (lex_less(y, x) || is_nan(x)) ? x : y;
    else if constexpr (is_real_v<C>)
      return (x > y || x != x) ? x : y;
    else
      return x > y ? x : y;
  }
  static array derivative(const BinaryChain& c);
};

struct Minimum {
  LOOM_EW_ENTRY(Minimum, all, input, true, "(({0} < {1} || {0} != {0}) ? {0} : {1})", false)
  template <typename C>
  C operator()(C x, C y) const {
    if constexpr (is_bool_v<C>)
      return x && y;
    else if constexpr (is_complex_v<C>)
      return (lex_less(x, y) || is_nan(x)) ? x : y;
    else if constexpr (is_real_v<C>)
      return (x < y || x != x) ? x : y;
    else
      return x < y ? x : y;
  }
  static array derivative(const BinaryChain& c);
};

struct Equal {
  LOOM_EW_ENTRY(Equal, all, boolean, true, "(({0}) == ({1}))", false)
  template <typename C>
  bool operator()(C x, C y) const {
    return x == y;
  }
  static array derivative(const BinaryChain& c);
};

struct NotEqual {
  LOOM_EW_ENTRY(NotEqual, all, boolean, true, "(({0}) != ({1}))", false)
  template <typename C>
  bool operator()(C x, C y) const {
    return x != y;
  }
  static array derivative(const BinaryChain& c);
};

struct Less {
  LOOM_EW_ENTRY(Less, all, boolean, true, "(({0}) < ({1}))", false)
  template <typename C>
  bool operator()(C x, C y) const {
    if constexpr (is_complex_v<C>)
      return lex_less(x, y);
    else
      return x < y;
  }
  static array derivative(const BinaryChain& c);
};

struct LessEqual {
  LOOM_EW_ENTRY(LessEqual, all, boolean, true, "(({0}) <= ({1}))", false)
  template <typename C>
  bool operator()(C x, C y) const {
    if constexpr (is_complex_v<C>)
      return lex_less_equal(x, y);
    else
      return x <= y;
  }
  static array derivative(const BinaryChain& c);
};

struct Greater {
  LOOM_EW_ENTRY(Greater, all, boolean, true, "(({0}) > ({1}))", false)
  template <typename C>
  bool operator()(C x, C y) const {
    if constexpr (is_complex_v<C>)
      return lex_less(y, x);
    else
      return x > y;
  }
  static array derivative(const BinaryChain& c);
};

struct GreaterEqual {
  LOOM_EW_ENTRY(GreaterEqual, all, boolean, true, "(({0}) >= ({1}))", false)
  template <typename C>
  bool operator()(C x, C y) const {
    if constexpr (is_complex_v<C>)
      return lex_less_equal(y, x);
    else
      return x >= y;
  }
  static array derivative(const BinaryChain& c);
};

struct LogicalAnd {
  LOOM_EW_ENTRY(LogicalAnd, all, boolean, true, "(({0}) != 0 && ({1}) != 0)", false)
  template <typename C>
  bool operator()(C x, C y) const {
    return x != C(0) && y != C(0);
  }
  static array derivative(const BinaryChain& c);
};

struct LogicalOr {
  LOOM_EW_ENTRY(LogicalOr, all, boolean, true, "(({0}) != 0 || ({1}) != 0)", false)
  template <typename C>
  bool operator()(C x, C y) const {
    return x != C(0) || y != C(0);
  }
  static array derivative(const BinaryChain& c);
};

struct BitwiseAnd {
  LOOM_EW_ENTRY(BitwiseAnd, integral, input, true, "(({0}) & ({1}))", false)
  template <typename C>
  C operator()(C x, C y) const {
    return static_cast<C>(x & y);
  }
  static array derivative(const BinaryChain& c);
};

struct BitwiseOr {
  LOOM_EW_ENTRY(BitwiseOr, integral, input, true, "(({0}) | ({1}))", false)
  template <typename C>
  C operator()(C x, C y) const {
    return static_cast<C>(x | y);
  }
  static array derivative(const BinaryChain& c);
};

struct BitwiseXor {
  LOOM_EW_ENTRY(BitwiseXor, integral, input, true, "(({0}) ^ ({1}))", false)
  template <typename C>
  C operator()(C x, C y) const {
    return static_cast<C>(x ^ y);
  }
  static array derivative(const BinaryChain& c);
};

struct LeftShift {
  LOOM_EW_ENTRY(LeftShift, integer, input, true,
                "({0} << ({1} & (8 * sizeof({0}) > 32 ? 63 : 31)))", false)
  template <typename C>
  C operator()(C x, C y) const {
    if constexpr (sizeof(C) < 4) {
      return static_cast<C>(static_cast<int32_t>(x) << (static_cast<int32_t>(y) & 31));
    } else {
      return static_cast<C>(x << (y & shift_mask<C>()));
    }
  }
  static array derivative(const BinaryChain& c);
};

struct RightShift {
  LOOM_EW_ENTRY(RightShift, integer, input, true,
                "({0} >> ({1} & (8 * sizeof({0}) > 32 ? 63 : 31)))", false)
  template <typename C>
  C operator()(C x, C y) const {
    if constexpr (sizeof(C) < 4) {
      return static_cast<C>(static_cast<int32_t>(x) >> (static_cast<int32_t>(y) & 31));
    } else {
      return static_cast<C>(x >> (y & shift_mask<C>()));
    }
  }
  static array derivative(const BinaryChain& c);
};

struct ArcTan2 {
  LOOM_EW_ENTRY(ArcTan2, real, input, true, "atan2({0}, {1})", false)
  template <typename C>
  C operator()(C y, C x) const {
    if constexpr (std::is_same_v<C, float>)
      return atan2_f32(y, x);
    else
      return std::atan2(y, x);
  }
  static array derivative(const BinaryChain& c);
};

// --- ternary entries ---

// where(condition, x, y); the condition is bool, x and y share one dtype.
struct Select {
  LOOM_EW_ENTRY(Select, all, input, true, "(({0}) ? ({1}) : ({2}))", false)
  template <typename C>
  C operator()(bool c, C x, C y) const {
    return c ? x : y;
  }
  static array derivative(const TernaryChain& c);
};

} // namespace ew

// The lists: one line per op, in enum order.
#define LOOM_UNARY_OPS(X) \
  X(Negative)             \
  X(Abs)                  \
  X(Sign)                 \
  X(Square)               \
  X(Sqrt)                 \
  X(Rsqrt)                \
  X(Reciprocal)           \
  X(Exp)                  \
  X(Log)                  \
  X(Sin)                  \
  X(Cos)                  \
  X(Tanh)                 \
  X(Erf)                  \
  X(Sigmoid)              \
  X(LogicalNot)           \
  X(BitwiseInvert)        \
  X(IsNan)                \
  X(IsInf)                \
  X(Floor)                \
  X(Ceil)                 \
  X(Conjugate)            \
  X(Sinh)                 \
  X(Cosh)                 \
  X(Tan)                  \
  X(ArcSin)               \
  X(ArcCos)               \
  X(ArcTan)               \
  X(ArcSinh)              \
  X(ArcCosh)              \
  X(ArcTanh)              \
  X(Expm1)                \
  X(ErfInv)               \
  X(Log2)                 \
  X(Log10)                \
  X(Real)                 \
  X(Imag)                 \
  X(Log1p)

#define LOOM_BINARY_OPS(X) \
  X(Add)                   \
  X(Subtract)              \
  X(Multiply)              \
  X(Divide)                \
  X(FloorDivide)           \
  X(Remainder)             \
  X(Power)                 \
  X(Maximum)               \
  X(Minimum)               \
  X(Equal)                 \
  X(NotEqual)              \
  X(Less)                  \
  X(LessEqual)             \
  X(Greater)               \
  X(GreaterEqual)          \
  X(LogicalAnd)            \
  X(LogicalOr)             \
  X(BitwiseAnd)            \
  X(BitwiseOr)             \
  X(BitwiseXor)            \
  X(LeftShift)             \
  X(RightShift)            \
  X(ArcTan2)

#define LOOM_TERNARY_OPS(X) X(Select)

#define LOOM_EW_ENUMERATOR(E) E,
enum class UnaryOp : uint8_t { LOOM_UNARY_OPS(LOOM_EW_ENUMERATOR) };
enum class BinaryOp : uint8_t { LOOM_BINARY_OPS(LOOM_EW_ENUMERATOR) };
enum class TernaryOp : uint8_t { LOOM_TERNARY_OPS(LOOM_EW_ENUMERATOR) };
#undef LOOM_EW_ENUMERATOR

namespace ew {

// An entry's data at run time, for code that holds an op value rather than
// an entry type (printing, compile's fusion and codegen, export).
struct OpInfo {
  const char* name;
  int arity;
  Accepts accepts;
  Yields yields;
  bool fusable;
  const char* code;
  bool derivative_reads_output;
};

#define LOOM_EW_INFO_1(E) \
  OpInfo{E::name, 1, E::accepts, E::yields, E::fusable, E::code, E::derivative_reads_output},
#define LOOM_EW_INFO_2(E) \
  OpInfo{E::name, 2, E::accepts, E::yields, E::fusable, E::code, E::derivative_reads_output},
#define LOOM_EW_INFO_3(E) \
  OpInfo{E::name, 3, E::accepts, E::yields, E::fusable, E::code, E::derivative_reads_output},
inline constexpr OpInfo kUnaryInfo[] = {LOOM_UNARY_OPS(LOOM_EW_INFO_1)};
inline constexpr OpInfo kBinaryInfo[] = {LOOM_BINARY_OPS(LOOM_EW_INFO_2)};
inline constexpr OpInfo kTernaryInfo[] = {LOOM_TERNARY_OPS(LOOM_EW_INFO_3)};
#undef LOOM_EW_INFO_1
#undef LOOM_EW_INFO_2
#undef LOOM_EW_INFO_3

constexpr const OpInfo& info(UnaryOp op) { return kUnaryInfo[static_cast<int>(op)]; }
constexpr const OpInfo& info(BinaryOp op) { return kBinaryInfo[static_cast<int>(op)]; }
constexpr const OpInfo& info(TernaryOp op) { return kTernaryInfo[static_cast<int>(op)]; }

// The entry's derivative for an op value (primitives/elementwise_table.cpp).
array derivative(UnaryOp op, const UnaryChain& c);
array derivative(BinaryOp op, const BinaryChain& c);

// Whether an entry is costly (see the top of this file).
template <typename Op>
constexpr bool is_costly() {
  if constexpr (requires { Op::costly; }) {
    return Op::costly;
  } else {
    return false;
  }
}

// Whether an entry has a float32 block form (see the top of this file).
template <typename Op>
concept has_block = requires(const float* x, float* y, size_t n) {
  Op::block(x, y, n);
};

// Calls f.template operator()<Entry>() with the entry type of `op` (kernels
// instantiate their loop per entry this way).
template <typename F>
decltype(auto) visit(UnaryOp op, F&& f) {
  switch (op) {
#define LOOM_EW_CASE(E) \
  case UnaryOp::E:      \
    return f.template operator()<E>();
    LOOM_UNARY_OPS(LOOM_EW_CASE)
#undef LOOM_EW_CASE
  }
  return f.template operator()<Negative>(); // unreachable: every enumerator has a case
}

template <typename F>
decltype(auto) visit(BinaryOp op, F&& f) {
  switch (op) {
#define LOOM_EW_CASE(E) \
  case BinaryOp::E:     \
    return f.template operator()<E>();
    LOOM_BINARY_OPS(LOOM_EW_CASE)
#undef LOOM_EW_CASE
  }
  return f.template operator()<Add>(); // unreachable
}

} // namespace ew
} // namespace loom
