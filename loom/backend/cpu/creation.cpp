// CPU kernels of Full, Arange, Linspace and Eye.
#include "loom/primitives/creation.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "loom/backend/cpu/copy.h"
#include "loom/backend/cpu/thread_pool.h"
#include "loom/types/dispatch.h"

namespace loom {

namespace {

constexpr size_t kGrain = 1 << 16;

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

// Truncation toward zero, saturating instead of overflowing (arange bounds
// are finite but may exceed the integer range).
int64_t truncate_to_int64(double v) {
  if (v >= 9223372036854775807.0) return std::numeric_limits<int64_t>::max();
  if (v <= -9223372036854775808.0) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
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

void Arange::eval_cpu(const std::vector<array>&, std::vector<array>& outputs) {
  array& out = outputs[0];
  out.set_data(allocator::allocate(out.nbytes()));
  const size_t n = out.size();
  dispatch(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* dst = out.data<T>();
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      // Two's-complement arithmetic in uint64, then wrapped into T.
      const T first = static_cast<T>(truncate_to_int64(start_));
      const T second = static_cast<T>(truncate_to_int64(start_ + step_));
      const uint64_t base = static_cast<uint64_t>(static_cast<int64_t>(first));
      const uint64_t delta =
          static_cast<uint64_t>(static_cast<int64_t>(static_cast<T>(second - first)));
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

} // namespace loom
