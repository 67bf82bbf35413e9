// Binary element-wise kernels. Both inputs share the output's shape and one
// dtype (ops/ broadcast and promoted them); they may still be strided views,
// broadcasts (stride 0) or scalars, and each layout gets its own loop.
#include <cmath>
#include <complex>
#include <stdexcept>
#include <string>
#include <utility>

#include "loom/backend/cpu/elementwise.h"
#include "loom/backend/cpu/strided.h"
#include "loom/backend/cpu/thread_pool.h"
#include "loom/types/dispatch.h"

namespace loom::cpu {

namespace {

using namespace elementwise;

template <typename C>
constexpr bool is_bool_v = std::is_same_v<C, bool>;
template <typename C>
constexpr bool is_int_v = std::is_integral_v<C> && !is_bool_v<C>;
template <typename C>
constexpr bool is_real_v = std::is_floating_point_v<C>;
template <typename C>
constexpr bool is_inexact_v = is_real_v<C> || is_complex_v<C>;

// Complex numbers order lexicographically (real part, then imaginary), as in MLX.
inline bool lex_less(complex64_t x, complex64_t y) {
  return x.real() < y.real() || (x.real() == y.real() && x.imag() < y.imag());
}
inline bool is_nan(complex64_t x) { return x.real() != x.real() || x.imag() != x.imag(); }
inline bool lex_less_equal(complex64_t x, complex64_t y) {
  return x.real() < y.real() || (x.real() == y.real() && x.imag() <= y.imag());
}

// --- arithmetic ---

struct AddOp {
  template <typename C>
  static constexpr bool supports = true;
  template <typename C>
  C operator()(C x, C y) const {
    if constexpr (is_bool_v<C>)
      return x || y;
    else if constexpr (is_int_v<C>)
      return wrap_add(x, y);
    else
      return x + y;
  }
};

struct SubtractOp {
  template <typename C>
  static constexpr bool supports = true;
  template <typename C>
  C operator()(C x, C y) const {
    if constexpr (is_bool_v<C>)
      return x != y;
    else if constexpr (is_int_v<C>)
      return wrap_sub(x, y);
    else
      return x - y;
  }
};

struct MultiplyOp {
  template <typename C>
  static constexpr bool supports = true;
  template <typename C>
  C operator()(C x, C y) const {
    if constexpr (is_bool_v<C>)
      return x && y;
    else if constexpr (is_int_v<C>)
      return wrap_mul(x, y);
    else
      return x * y;
  }
};

struct DivideOp {
  template <typename C>
  static constexpr bool supports = is_inexact_v<C>;
  template <typename C>
  C operator()(C x, C y) const {
    return x / y;
  }
};

// Rounds towards negative infinity. Integer division by zero gives 0 (MLX's
// result); INT_MIN // -1 wraps instead of trapping.
struct FloorDivideOp {
  template <typename C>
  static constexpr bool supports = !is_complex_v<C>;
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
};

// Takes the sign of the divisor (Python's %). Integer x % 0 gives x (MLX's
// result).
struct RemainderOp {
  template <typename C>
  static constexpr bool supports = !is_complex_v<C>;
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
};

// Integer powers wrap around; a negative integer exponent gives 0 (MLX).
struct PowerOp {
  template <typename C>
  static constexpr bool supports = true;
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
};

// NaN propagates from either side (for complex numbers, which compare
// lexicographically, only from the first, as in MLX).
struct MaximumOp {
  template <typename C>
  static constexpr bool supports = true;
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
};

struct MinimumOp {
  template <typename C>
  static constexpr bool supports = true;
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
};

// --- comparisons and logic (bool results) ---

struct EqualOp {
  template <typename C>
  static constexpr bool supports = true;
  template <typename C>
  bool operator()(C x, C y) const {
    return x == y;
  }
};

struct NotEqualOp {
  template <typename C>
  static constexpr bool supports = true;
  template <typename C>
  bool operator()(C x, C y) const {
    return x != y;
  }
};

struct LessOp {
  template <typename C>
  static constexpr bool supports = true;
  template <typename C>
  bool operator()(C x, C y) const {
    if constexpr (is_complex_v<C>)
      return lex_less(x, y);
    else
      return x < y;
  }
};

struct LessEqualOp {
  template <typename C>
  static constexpr bool supports = true;
  template <typename C>
  bool operator()(C x, C y) const {
    if constexpr (is_complex_v<C>)
      return lex_less_equal(x, y);
    else
      return x <= y;
  }
};

struct GreaterOp {
  template <typename C>
  static constexpr bool supports = true;
  template <typename C>
  bool operator()(C x, C y) const {
    if constexpr (is_complex_v<C>)
      return lex_less(y, x);
    else
      return x > y;
  }
};

struct GreaterEqualOp {
  template <typename C>
  static constexpr bool supports = true;
  template <typename C>
  bool operator()(C x, C y) const {
    if constexpr (is_complex_v<C>)
      return lex_less_equal(y, x);
    else
      return x >= y;
  }
};

struct LogicalAndOp {
  template <typename C>
  static constexpr bool supports = true;
  template <typename C>
  bool operator()(C x, C y) const {
    return x != C(0) && y != C(0);
  }
};

struct LogicalOrOp {
  template <typename C>
  static constexpr bool supports = true;
  template <typename C>
  bool operator()(C x, C y) const {
    return x != C(0) || y != C(0);
  }
};

// --- bitwise (integers and bool) ---

struct BitwiseAndOp {
  template <typename C>
  static constexpr bool supports = std::is_integral_v<C>;
  template <typename C>
  C operator()(C x, C y) const {
    return static_cast<C>(x & y);
  }
};

struct BitwiseOrOp {
  template <typename C>
  static constexpr bool supports = std::is_integral_v<C>;
  template <typename C>
  C operator()(C x, C y) const {
    return static_cast<C>(x | y);
  }
};

struct BitwiseXorOp {
  template <typename C>
  static constexpr bool supports = std::is_integral_v<C>;
  template <typename C>
  C operator()(C x, C y) const {
    return static_cast<C>(x ^ y);
  }
};

// Shift counts are taken modulo the width of the (promoted) register, which
// is what a scalar x86 shift does and what MLX returns; the explicit mask
// keeps vectorised shifts (which saturate instead) giving the same answer.
template <typename C>
constexpr int shift_mask() {
  return sizeof(C) <= 4 ? 31 : 63;
}

struct LeftShiftOp {
  template <typename C>
  static constexpr bool supports = is_int_v<C>;
  template <typename C>
  C operator()(C x, C y) const {
    if constexpr (sizeof(C) < 4) {
      return static_cast<C>(static_cast<int32_t>(x) << (static_cast<int32_t>(y) & 31));
    } else {
      return static_cast<C>(x << (y & shift_mask<C>()));
    }
  }
};

struct RightShiftOp {
  template <typename C>
  static constexpr bool supports = is_int_v<C>;
  template <typename C>
  C operator()(C x, C y) const {
    if constexpr (sizeof(C) < 4) {
      return static_cast<C>(static_cast<int32_t>(x) >> (static_cast<int32_t>(y) & 31));
    } else {
      return static_cast<C>(x >> (y & shift_mask<C>()));
    }
  }
};

// --- the loop ---

template <typename T, typename Out, typename F>
void binary_loop(const array& a, const array& b, array& out, F f) {
  if (out.size() == 0) {
    out.set_data(allocator::allocate(0));
    return;
  }
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  const bool dense_a = is_dense(a);
  const bool dense_b = is_dense(b);
  const bool scalar_a = is_scalar_like(a);
  const bool scalar_b = is_scalar_like(b);

  // Flat loops: the output mirrors the layout of the dense operand(s).
  if (dense_a && dense_b && same_dense_layout(a, b)) {
    alloc_like(out, a, {&a, &b});
    Out* po = out.data<Out>();
    parallel_for(a.data_size(), kGrain, [&](size_t s, size_t e) {
      // Local copies: a byte-sized output could otherwise alias the
      // captured pointers, and the loop would not vectorise.
      const T* x = pa;
      const T* y = pb;
      Out* o = po;
      for (size_t i = s; i < e; ++i) o[i] = f(x[i], y[i]);
    });
    return;
  }
  if (scalar_a && dense_b) {
    alloc_like(out, b, {&b});
    Out* po = out.data<Out>();
    parallel_for(b.data_size(), kGrain, [&](size_t s, size_t e) {
      const T x = pa[0];
      const T* y = pb;
      Out* o = po;
      for (size_t i = s; i < e; ++i) o[i] = f(x, y[i]);
    });
    return;
  }
  if (dense_a && scalar_b) {
    alloc_like(out, a, {&a});
    Out* po = out.data<Out>();
    parallel_for(a.data_size(), kGrain, [&](size_t s, size_t e) {
      const T* x = pa;
      const T y = pb[0];
      Out* o = po;
      for (size_t i = s; i < e; ++i) o[i] = f(x[i], y);
    });
    return;
  }
  if (scalar_a && scalar_b) {
    alloc_scalar_like(out);
    out.data<Out>()[0] = f(pa[0], pb[0]);
    return;
  }

  // Strided and broadcast operands: a row-major output, walked in runs
  // along the collapsed last dimension.
  out.set_data(allocator::allocate(out.nbytes()));
  Out* po = out.data<Out>();
  const Shape& shape = out.shape();
  auto layout =
      collapse<3>(shape, {broadcast_strides(a, shape), broadcast_strides(b, shape), out.strides()});
  parallel_for(out.size(), kGrain, [&](size_t s, size_t e) {
    for_each_run<3>(layout, s, e, [&](const auto& off, int64_t n, const auto& st) {
      const T* x = pa + off[0];
      const T* y = pb + off[1];
      Out* o = po + off[2];
      if (st[0] == 1 && st[1] == 1) {
        for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[i]);
      } else if (st[0] == 0 && st[1] == 1) {
        const T xv = *x;
        for (int64_t i = 0; i < n; ++i) o[i] = f(xv, y[i]);
      } else if (st[0] == 1 && st[1] == 0) {
        const T yv = *y;
        for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], yv);
      } else {
        for (int64_t i = 0; i < n; ++i) o[i] = f(x[i * st[0]], y[i * st[1]]);
      }
    });
  });
}

template <typename Op>
void run(BinaryOp op, const array& a, const array& b, array& out) {
  dispatch(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    if constexpr (Op::template supports<C>) {
      using R = decltype(Op{}(std::declval<C>(), std::declval<C>()));
      using Out = std::conditional_t<std::is_same_v<R, C>, T, R>;
      if (out.itemsize() != sizeof(Out) || b.dtype() != a.dtype()) {
        throw std::logic_error(std::string("[") + binary_op_name(op) +
                               "] Input or output dtypes do not match the kernel.");
      }
      using S = storage_t<T>;
      using SO = storage_t<Out>;
      binary_loop<S, SO>(a, b, out, [](S x, S y) {
        return static_cast<SO>(store<Out>(Op{}(load_storage<T>(x), load_storage<T>(y))));
      });
    } else {
      throw std::invalid_argument(std::string("[") + binary_op_name(op) + "] Not supported for " +
                                  dtype_name(a.dtype()) + ".");
    }
  });
}

} // namespace

void binary(BinaryOp op, const array& a, const array& b, array& out) {
  switch (op) {
    case BinaryOp::Add:
      return run<AddOp>(op, a, b, out);
    case BinaryOp::Subtract:
      return run<SubtractOp>(op, a, b, out);
    case BinaryOp::Multiply:
      return run<MultiplyOp>(op, a, b, out);
    case BinaryOp::Divide:
      return run<DivideOp>(op, a, b, out);
    case BinaryOp::FloorDivide:
      return run<FloorDivideOp>(op, a, b, out);
    case BinaryOp::Remainder:
      return run<RemainderOp>(op, a, b, out);
    case BinaryOp::Power:
      return run<PowerOp>(op, a, b, out);
    case BinaryOp::Maximum:
      return run<MaximumOp>(op, a, b, out);
    case BinaryOp::Minimum:
      return run<MinimumOp>(op, a, b, out);
    case BinaryOp::Equal:
      return run<EqualOp>(op, a, b, out);
    case BinaryOp::NotEqual:
      return run<NotEqualOp>(op, a, b, out);
    case BinaryOp::Less:
      return run<LessOp>(op, a, b, out);
    case BinaryOp::LessEqual:
      return run<LessEqualOp>(op, a, b, out);
    case BinaryOp::Greater:
      return run<GreaterOp>(op, a, b, out);
    case BinaryOp::GreaterEqual:
      return run<GreaterEqualOp>(op, a, b, out);
    case BinaryOp::LogicalAnd:
      return run<LogicalAndOp>(op, a, b, out);
    case BinaryOp::LogicalOr:
      return run<LogicalOrOp>(op, a, b, out);
    case BinaryOp::BitwiseAnd:
      return run<BitwiseAndOp>(op, a, b, out);
    case BinaryOp::BitwiseOr:
      return run<BitwiseOrOp>(op, a, b, out);
    case BinaryOp::BitwiseXor:
      return run<BitwiseXorOp>(op, a, b, out);
    case BinaryOp::LeftShift:
      return run<LeftShiftOp>(op, a, b, out);
    case BinaryOp::RightShift:
      return run<RightShiftOp>(op, a, b, out);
  }
  throw std::logic_error("[binary] Unknown op.");
}

} // namespace loom::cpu
