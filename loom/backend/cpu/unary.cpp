// Unary element-wise kernels: one functor per op over the compute type of
// each dtype, run by a loop that picks the layout's fastest path.
#include <cmath>
#include <complex>
#include <stdexcept>
#include <string>

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
constexpr bool is_real_v = std::is_floating_point_v<C>; // float, double
template <typename C>
constexpr bool is_inexact_v = is_real_v<C> || is_complex_v<C>;

// --- the ops, on compute types (bool, integers, float, double, complex) ---

struct NegativeOp {
  template <typename C>
  static constexpr bool supports = !is_bool_v<C>;
  template <typename C>
  C operator()(C x) const {
    if constexpr (is_int_v<C>)
      return wrap_neg(x);
    else
      return -x;
  }
};

struct AbsOp {
  template <typename C>
  static constexpr bool supports = true;
  template <typename C>
  auto operator()(C x) const {
    if constexpr (is_bool_v<C> || std::is_unsigned_v<C>)
      return x;
    else if constexpr (is_int_v<C>)
      return x < 0 ? wrap_neg(x) : x; // abs(INT_MIN) wraps
    else
      return std::abs(x); // complex64 gives float
  }
};

struct SignOp {
  template <typename C>
  static constexpr bool supports = true;
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
};

struct SquareOp {
  template <typename C>
  static constexpr bool supports = true;
  template <typename C>
  C operator()(C x) const {
    if constexpr (is_bool_v<C>)
      return x;
    else if constexpr (is_int_v<C>)
      return wrap_mul(x, x);
    else
      return x * x;
  }
};

struct SqrtOp {
  template <typename C>
  static constexpr bool supports = is_inexact_v<C>;
  template <typename C>
  C operator()(C x) const {
    return std::sqrt(x);
  }
};

struct RsqrtOp {
  template <typename C>
  static constexpr bool supports = is_inexact_v<C>;
  template <typename C>
  C operator()(C x) const {
    return C(1) / std::sqrt(x);
  }
};

struct ReciprocalOp {
  template <typename C>
  static constexpr bool supports = is_inexact_v<C>;
  template <typename C>
  C operator()(C x) const {
    return C(1) / x;
  }
};

struct ExpOp {
  template <typename C>
  static constexpr bool supports = is_inexact_v<C>;
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_same_v<C, float>)
      return exp_f32(x);
    else
      return std::exp(x);
  }
};

struct LogOp {
  template <typename C>
  static constexpr bool supports = is_inexact_v<C>;
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_same_v<C, float>)
      return log_f32(x);
    else
      return std::log(x);
  }
};

struct SinOp {
  template <typename C>
  static constexpr bool supports = is_inexact_v<C>;
  template <typename C>
  C operator()(C x) const {
    return std::sin(x);
  }
};

struct CosOp {
  template <typename C>
  static constexpr bool supports = is_inexact_v<C>;
  template <typename C>
  C operator()(C x) const {
    return std::cos(x);
  }
};

struct TanhOp {
  template <typename C>
  static constexpr bool supports = is_inexact_v<C>;
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_same_v<C, float>)
      return tanh_f32(x);
    else
      return std::tanh(x);
  }
};

struct ErfOp {
  template <typename C>
  static constexpr bool supports = is_real_v<C>;
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_same_v<C, float>)
      return erf_f32(x);
    else
      return std::erf(x);
  }
};

struct SigmoidOp {
  template <typename C>
  static constexpr bool supports = is_real_v<C>;
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_same_v<C, float>)
      return 1.0f / (1.0f + exp_f32(-x));
    else
      return C(1) / (C(1) + std::exp(-x));
  }
};

struct LogicalNotOp {
  template <typename C>
  static constexpr bool supports = true;
  template <typename C>
  bool operator()(C x) const {
    return x == C(0);
  }
};

struct BitwiseInvertOp {
  template <typename C>
  static constexpr bool supports = std::is_integral_v<C>;
  template <typename C>
  C operator()(C x) const {
    if constexpr (is_bool_v<C>)
      return !x;
    else
      return static_cast<C>(~x);
  }
};

struct IsNanOp {
  template <typename C>
  static constexpr bool supports = true;
  template <typename C>
  bool operator()(C x) const {
    if constexpr (is_complex_v<C>)
      return x.real() != x.real() || x.imag() != x.imag();
    else if constexpr (is_real_v<C>)
      return x != x;
    else
      return false;
  }
};

struct IsInfOp {
  template <typename C>
  static constexpr bool supports = true;
  template <typename C>
  bool operator()(C x) const {
    if constexpr (is_complex_v<C>)
      return std::isinf(x.real()) || std::isinf(x.imag());
    else if constexpr (is_real_v<C>)
      return std::isinf(x);
    else
      return false;
  }
};

struct FloorOp {
  template <typename C>
  static constexpr bool supports = !is_complex_v<C>;
  template <typename C>
  C operator()(C x) const {
    if constexpr (is_real_v<C>)
      return std::floor(x);
    else
      return x;
  }
};

struct CeilOp {
  template <typename C>
  static constexpr bool supports = !is_complex_v<C>;
  template <typename C>
  C operator()(C x) const {
    if constexpr (is_real_v<C>)
      return std::ceil(x);
    else
      return x;
  }
};

struct ConjugateOp {
  template <typename C>
  static constexpr bool supports = true;
  template <typename C>
  C operator()(C x) const {
    if constexpr (is_complex_v<C>)
      return std::conj(x);
    else
      return x;
  }
};

// --- the loop ---

template <typename T, typename Out, typename F>
void unary_loop(const array& in, array& out, F f) {
  if (out.size() == 0) {
    out.set_data(allocator::allocate(0));
    return;
  }
  const bool dense = is_dense(in);
  if (dense || is_scalar_like(in)) {
    // The output mirrors the input's layout, so any dense input (row-major,
    // column-major, transposed) and any broadcast scalar runs as a flat loop.
    size_t n = 1;
    if (dense) {
      alloc_like(out, in, {&in});
      n = in.data_size();
    } else {
      alloc_scalar_like(out);
    }
    const T* src = in.data<T>();
    Out* dst = out.data<Out>();
    parallel_for(n, kGrain, [&](size_t b, size_t e) {
      // Local copies: a byte-sized output could otherwise alias the
      // captured pointers, and the loop would not vectorise.
      const T* x = src;
      Out* o = dst;
      for (size_t i = b; i < e; ++i) o[i] = f(x[i]);
    });
    return;
  }
  out.set_data(allocator::allocate(out.nbytes()));
  auto layout = collapse<2>(in.shape(), {broadcast_strides(in, in.shape()), out.strides()});
  const T* src = in.data<T>();
  Out* dst = out.data<Out>();
  parallel_for(out.size(), kGrain, [&](size_t b, size_t e) {
    for_each_run<2>(layout, b, e, [&](const auto& off, int64_t n, const auto& st) {
      const T* s = src + off[0];
      Out* d = dst + off[1];
      if (st[0] == 1) {
        for (int64_t i = 0; i < n; ++i) d[i] = f(s[i]);
      } else {
        for (int64_t i = 0; i < n; ++i) d[i] = f(s[i * st[0]]);
      }
    });
  });
}

template <typename Op>
void run(UnaryOp op, const array& in, array& out) {
  dispatch(in.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    if constexpr (Op::template supports<C>) {
      using R = decltype(Op{}(std::declval<C>()));
      using Out = std::conditional_t<std::is_same_v<R, C>, T, R>;
      if (out.itemsize() != sizeof(Out)) {
        throw std::logic_error(std::string("[") + unary_op_name(op) + "] Output dtype " +
                               dtype_name(out.dtype()) + " does not match the kernel.");
      }
      using S = storage_t<T>;
      using SO = storage_t<Out>;
      unary_loop<S, SO>(in, out,
                        [](S x) { return static_cast<SO>(store<Out>(Op{}(load_storage<T>(x)))); });
    } else {
      throw std::invalid_argument(std::string("[") + unary_op_name(op) + "] Not supported for " +
                                  dtype_name(in.dtype()) + ".");
    }
  });
}

} // namespace

void unary(UnaryOp op, const array& in, array& out) {
  switch (op) {
    case UnaryOp::Negative:
      return run<NegativeOp>(op, in, out);
    case UnaryOp::Abs:
      return run<AbsOp>(op, in, out);
    case UnaryOp::Sign:
      return run<SignOp>(op, in, out);
    case UnaryOp::Square:
      return run<SquareOp>(op, in, out);
    case UnaryOp::Sqrt:
      return run<SqrtOp>(op, in, out);
    case UnaryOp::Rsqrt:
      return run<RsqrtOp>(op, in, out);
    case UnaryOp::Reciprocal:
      return run<ReciprocalOp>(op, in, out);
    case UnaryOp::Exp:
      return run<ExpOp>(op, in, out);
    case UnaryOp::Log:
      return run<LogOp>(op, in, out);
    case UnaryOp::Sin:
      return run<SinOp>(op, in, out);
    case UnaryOp::Cos:
      return run<CosOp>(op, in, out);
    case UnaryOp::Tanh:
      return run<TanhOp>(op, in, out);
    case UnaryOp::Erf:
      return run<ErfOp>(op, in, out);
    case UnaryOp::Sigmoid:
      return run<SigmoidOp>(op, in, out);
    case UnaryOp::LogicalNot:
      return run<LogicalNotOp>(op, in, out);
    case UnaryOp::BitwiseInvert:
      return run<BitwiseInvertOp>(op, in, out);
    case UnaryOp::IsNan:
      return run<IsNanOp>(op, in, out);
    case UnaryOp::IsInf:
      return run<IsInfOp>(op, in, out);
    case UnaryOp::Floor:
      return run<FloorOp>(op, in, out);
    case UnaryOp::Ceil:
      return run<CeilOp>(op, in, out);
    case UnaryOp::Conjugate:
      return run<ConjugateOp>(op, in, out);
  }
  throw std::logic_error("[unary] Unknown op.");
}

} // namespace loom::cpu
