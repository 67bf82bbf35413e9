// CPU kernels of the creation family: Full, Arange, Linspace, Eye, and the
// copies AsType (element type conversion) and Copy.
#include "loom/primitives/creation.h"

#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <type_traits>

#include "loom/backend/cpu/copy.h"
#include "loom/backend/cpu/strided.h"
#include "loom/backend/cpu/thread_pool.h"
#include "loom/types/dispatch.h"

namespace loom {

namespace {

constexpr size_t kGrain = 1 << 16;

template <typename T>
constexpr bool is_half_v = std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>;

// Float to integer with C's truncation where the value fits. Where it does
// not (and for NaN) C leaves the result undefined; Loom pins it to what the
// x86 conversion instructions give, which is what MLX's CPU build returns:
// the "integer indefinite" minimum for 32- and 64-bit signed targets, the low
// bits of the 32-bit (narrow targets) or 64-bit (uint32) conversion otherwise.
template <typename To, typename F>
inline To float_to_integer(F v) {
  if constexpr (std::is_same_v<To, int64_t>) {
    constexpr F lo = static_cast<F>(-9223372036854775808.0);
    if (v >= lo && v < -lo) return static_cast<int64_t>(v);
    return std::numeric_limits<int64_t>::min();
  } else if constexpr (std::is_same_v<To, int32_t>) {
    if (v >= F(-2147483648.0) && v < F(2147483648.0)) return static_cast<int32_t>(v);
    return std::numeric_limits<int32_t>::min();
  } else if constexpr (std::is_same_v<To, uint32_t>) {
    return static_cast<uint32_t>(float_to_integer<int64_t>(v));
  } else if constexpr (std::is_same_v<To, uint64_t>) {
    constexpr F two63 = static_cast<F>(9223372036854775808.0);
    if (v >= two63) return v < two63 * F(2) ? static_cast<uint64_t>(v) : uint64_t{0};
    return static_cast<uint64_t>(float_to_integer<int64_t>(v));
  } else {
    // int8, int16, uint8, uint16: wrap the 32-bit result.
    return static_cast<To>(float_to_integer<int32_t>(v));
  }
}

template <typename To, typename From>
inline To cast_value(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<From, complex64_t>) {
    if constexpr (std::is_same_v<To, bool>)
      return v != complex64_t(0.0f);
    else
      return cast_value<To>(v.real());
  } else if constexpr (is_half_v<From>) {
    return cast_value<To>(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, complex64_t>) {
    return complex64_t(static_cast<float>(v), 0.0f);
  } else if constexpr (is_half_v<To>) {
    return To(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    return float_to_integer<To>(v);
  } else {
    return static_cast<To>(v); // integer wrap-around (C++20) or exact widening
  }
}

// out[i] = cast(in[i]) for a dense range; `out` may alias `in` exactly.
template <typename S, typename D>
void convert_dense(const S* in, D* out, size_t n) {
  cpu::parallel_for(n, kGrain, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) out[i] = cast_value<D>(in[i]);
  });
}

template <typename T>
void fill(T* out, size_t n, T value) {
  cpu::parallel_for(n, kGrain, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) out[i] = value;
  });
}

void fill_zero(void* out, size_t nbytes) {
  char* p = static_cast<char*>(out);
  cpu::parallel_for(nbytes, kGrain * 4, [&](size_t b, size_t e) { std::memset(p + b, 0, e - b); });
}

} // namespace

void Full::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& in = inputs[0];
  array& out = outputs[0];
  out.set_data(allocator::allocate(out.nbytes()));
  if (out.size() == 0) return;
  bool single = true;
  for (int d = 0; d < in.ndim(); ++d) single = single && (in.shape(d) == 1 || in.strides(d) == 0);
  if (!single) {
    cpu::copy_strided(in, out, out.strides(), 0);
    return;
  }
  dispatch(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    fill(out.data<T>(), out.size(), *in.data<T>());
  });
}

// start + i * step rounds twice (no fused multiply-add, whatever the build's
// target): the GPU kernel computes it the same way, bit for bit.
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
void Arange::eval_cpu(const std::vector<array>&, std::vector<array>& outputs) {
  array& out = outputs[0];
  out.set_data(allocator::allocate(out.nbytes()));
  const size_t n = out.size();
  dispatch(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* dst = out.data<T>();
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      // Two's-complement arithmetic in uint64, then wrapped into T.
      const Arange::IntegerProgression progression = integer_progression();
      const uint64_t base = progression.base, delta = progression.delta;
      cpu::parallel_for(n, kGrain, [&](size_t b, size_t e) {
        for (size_t i = b; i < e; ++i) dst[i] = static_cast<T>(base + i * delta);
      });
    } else {
      cpu::parallel_for(n, kGrain, [&](size_t b, size_t e) {
        for (size_t i = b; i < e; ++i) {
          // i == 0 separately: 0 * an infinite step is NaN.
          dst[i] = convert<T>(i == 0 ? start_ : start_ + static_cast<double>(i) * step_);
        }
      });
    }
  });
}
#pragma GCC pop_options

// MLX computes linspace with separate float32 multiplies and an add; keep the
// compiler from fusing them (in the parallel body too) so the values match.
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
static void linspace_f32(float* dst, size_t n, float start, float stop) {
  if (n == 1) {
    dst[0] = start;
    return;
  }
  const float denom = static_cast<float>(n - 1);
  cpu::parallel_for(n, kGrain, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) {
      float t = static_cast<float>(i) / denom;
      dst[i] = (1.0f - t) * start + t * stop;
    }
  });
}
// float64 output is computed in double, the same way.
static void linspace_f64(double* dst, size_t n, double start, double stop) {
  if (n == 1) {
    dst[0] = start;
    return;
  }
  const double denom = static_cast<double>(n - 1);
  cpu::parallel_for(n, kGrain, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) {
      double t = static_cast<double>(i) / denom;
      dst[i] = (1.0 - t) * start + t * stop;
    }
  });
}
#pragma GCC pop_options

void Linspace::eval_cpu(const std::vector<array>&, std::vector<array>& outputs) {
  array& out = outputs[0];
  out.set_data(allocator::allocate(out.nbytes()));
  const size_t n = out.size();
  if (n == 0) return;
  if (out.dtype() == float64) {
    linspace_f64(out.data<double>(), n, start_, stop_);
    return;
  }
  const float start = static_cast<float>(start_);
  const float stop = static_cast<float>(stop_);
  if (out.dtype() == float32) {
    linspace_f32(out.data<float>(), n, start, stop);
    return;
  }
  std::vector<float> values(n);
  linspace_f32(values.data(), n, start, stop);
  cpu::convert_buffer(values.data(), float32, out.data<char>(), out.dtype(), n);
}

void Eye::eval_cpu(const std::vector<array>&, std::vector<array>& outputs) {
  array& out = outputs[0];
  out.set_data(allocator::allocate(out.nbytes()));
  if (out.size() == 0) return;
  fill_zero(out.data<char>(), out.nbytes());
  dispatch(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* dst = out.data<T>();
    const T one = convert<T>(1);
    for (int64_t i = std::max(0, -k_); i < n_ && i + k_ < m_; ++i) {
      dst[i * m_ + i + k_] = one;
    }
  });
}

// Copies ------------------------------------------------------------------------

void AsType::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& in = inputs[0];
  array& out = outputs[0];
  if (in.dtype() == out.dtype()) {
    out.copy_shared_buffer(in);
    return;
  }
  dispatch(in.dtype(), [&](auto stag) {
    using S = typename decltype(stag)::type;
    dispatch(out.dtype(), [&](auto dtag) {
      using D = typename decltype(dtag)::type;
      if (in.flags().contiguous) {
        // Dense input: convert its block in order and keep its layout.
        if (in.is_donatable() && in.itemsize() == out.itemsize() && !out.is_tracer()) {
          out.copy_shared_buffer(in);
        } else {
          out.set_data(allocator::allocate(in.data_size() * out.itemsize()), in.data_size(),
                       in.strides(), in.flags());
        }
        convert_dense(in.data<S>(), out.data<D>(), in.data_size());
        return;
      }
      out.set_data(allocator::allocate(out.nbytes()));
      auto layout = cpu::collapse<2>(
          in.shape(), {cpu::broadcast_strides(in, in.shape()), row_major_strides(in.shape())});
      const S* src = in.data<S>();
      D* dst = out.data<D>();
      cpu::parallel_for(in.size(), kGrain, [&](size_t b, size_t e) {
        cpu::for_each_run<2>(layout, b, e, [&](auto off, int64_t n, auto st) {
          const S* s = src + off[0];
          D* d = dst + off[1];
          for (int64_t i = 0; i < n; ++i) d[i * st[1]] = cast_value<D>(s[i * st[0]]);
        });
      });
    });
  });
}

void Copy::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  cpu::copy_contiguous(inputs[0], outputs[0]);
}

} // namespace loom
