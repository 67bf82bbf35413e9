// CPU kernel of Softmax: per row of the last axis, a pass for the maximum,
// one writing exp(x - max), one summing it and one scaling, the last three
// over a row still in cache. Half-precision rows compute in float32 and round
// once.
#include "loom/primitives/softmax.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "loom/backend/cpu/copy.h"
#include "loom/backend/cpu/elementwise.h"
#include "loom/backend/cpu/thread_pool.h"
#include "loom/types/dispatch.h"

namespace loom {

namespace {

// Compute type: float for float16/bfloat16/float32, double for float64.
template <typename T>
using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename C>
C exp_of(C v) {
  if constexpr (std::is_same_v<C, float>) {
    return cpu::elementwise::exp_f32(v);
  } else {
    return std::exp(v);
  }
}

// The maximum of a row, NaN if any element is NaN. NaN is tracked apart so
// that the max itself is a plain select, which vectorises over the lanes.
template <typename T, typename C>
C row_max(const T* __restrict__ x, size_t n) {
  constexpr size_t L = 16;
  const size_t full = n - n % L;
  C lanes[L];
  int32_t nan_lanes[L] = {};
  for (size_t l = 0; l < L; ++l) lanes[l] = -std::numeric_limits<C>::infinity();
  for (size_t j = 0; j < full; j += L) {
    for (size_t l = 0; l < L; ++l) {
      C v = static_cast<C>(x[j + l]);
      lanes[l] = v > lanes[l] ? v : lanes[l];
      nan_lanes[l] |= v != v;
    }
  }
  C m = -std::numeric_limits<C>::infinity();
  bool any_nan = false;
  for (size_t j = full; j < n; ++j) {
    C v = static_cast<C>(x[j]);
    m = v > m ? v : m;
    any_nan |= v != v;
  }
  for (size_t l = 0; l < L; ++l) {
    m = lanes[l] > m ? lanes[l] : m;
    any_nan |= nan_lanes[l] != 0;
  }
  return any_nan ? std::numeric_limits<C>::quiet_NaN() : m;
}

// Sum of a row with independent lanes (a single accumulator is a serial chain).
template <typename C>
C row_sum(const C* __restrict__ e, size_t n) {
  constexpr size_t L = 16;
  const size_t full = n - n % L;
  C lanes[L] = {};
  for (size_t j = 0; j < full; j += L) {
    for (size_t l = 0; l < L; ++l) lanes[l] += e[j + l];
  }
  C total = 0;
  for (size_t j = full; j < n; ++j) total += e[j];
  for (size_t l = 0; l < L; ++l) total += lanes[l];
  return total;
}

template <typename T>
void logsumexp_rows(const T* in, T* out, size_t rows, size_t n) {
  using C = Acc<T>;
  const size_t grain = std::max<size_t>(1, (size_t{1} << 15) / std::max<size_t>(n, 1));
  cpu::parallel_for(rows, grain, [&](size_t begin, size_t end) {
    std::vector<C> e(n);
    for (size_t r = begin; r < end; ++r) {
      const T* __restrict__ x = in + r * n;
      C m = row_max<T, C>(x, n);
      // An infinite maximum shifts by zero (inf - inf would be NaN).
      C shift = std::isinf(m) ? C(0) : m;
      C result;
      if (std::isinf(m) || m != m) {
        for (size_t j = 0; j < n; ++j) e[j] = exp_of<C>(static_cast<C>(x[j]) - shift);
        result = std::log(row_sum(e.data(), n)) + shift;
      } else {
        // exp(0) of each maximum is exactly 1: leave those 1s out of the sum
        // and add back all but one as an exact count, then log1p the rest.
        for (size_t j = 0; j < n; ++j) {
          C v = static_cast<C>(x[j]);
          e[j] = exp_of<C>(v - m) - (v == m ? C(1) : C(0));
        }
        // The count in integer lanes (a float accumulator would not vectorise).
        constexpr size_t L = 16;
        int32_t lanes[L] = {};
        const size_t full = n - n % L;
        for (size_t j = 0; j < full; j += L) {
          for (size_t l = 0; l < L; ++l) lanes[l] += static_cast<C>(x[j + l]) == m;
        }
        int64_t count = 0;
        for (size_t j = full; j < n; ++j) count += static_cast<C>(x[j]) == m;
        for (size_t l = 0; l < L; ++l) count += lanes[l];
        result = std::log1p(row_sum(e.data(), n) + static_cast<C>(count - 1)) + m;
      }
      out[r] = static_cast<T>(result);
    }
  });
}

template <typename T>
void softmax_rows(const T* in, T* out, size_t rows, size_t n) {
  using C = Acc<T>;
  constexpr bool same = std::is_same_v<T, C>;
  const size_t grain = std::max<size_t>(1, (size_t{1} << 15) / std::max<size_t>(n, 1));
  cpu::parallel_for(rows, grain, [&](size_t begin, size_t end) {
    std::vector<C> buffer(same ? 0 : n);
    for (size_t r = begin; r < end; ++r) {
      const T* __restrict__ x = in + r * n;
      T* y = out + r * n;
      C* __restrict__ e = same ? reinterpret_cast<C*>(y) : buffer.data();
      C m = row_max<T, C>(x, n);
      for (size_t j = 0; j < n; ++j) e[j] = exp_of<C>(static_cast<C>(x[j]) - m);
      C total = row_sum(e, n);
      for (size_t j = 0; j < n; ++j) y[j] = static_cast<T>(e[j] / total);
    }
  });
}

} // namespace

void LogSumExp::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array in = cpu::ensure_row_contiguous(inputs[0]);
  array& out = outputs[0];
  out.set_data(allocator::allocate(out.nbytes()));
  if (out.size() == 0) return;
  const size_t n = static_cast<size_t>(in.shape(-1));
  dispatch_floating(out.dtype(), "logsumexp", [&](auto tag) {
    using T = decltype(tag);
    logsumexp_rows(in.data<T>(), out.data<T>(), out.size(), n);
  });
}

void Softmax::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array in = cpu::ensure_row_contiguous(inputs[0]);
  array& out = outputs[0];
  out.set_data(allocator::allocate(out.nbytes()));
  if (out.size() == 0) return;
  const size_t n = static_cast<size_t>(in.shape(-1));
  const size_t rows = in.size() / n;
  dispatch_floating(out.dtype(), "softmax", [&](auto tag) {
    using T = decltype(tag);
    softmax_rows(in.data<T>(), out.data<T>(), rows, n);
  });
}

} // namespace loom
