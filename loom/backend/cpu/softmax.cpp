// CPU kernel of Softmax: per row of the last axis, a pass for the maximum,
// one writing exp(x - max), one summing it and one scaling, the last three
// over a row still in cache. Half-precision rows compute in float32 and round
// once.
#include "loom/primitives/softmax.h"

#include <cmath>
#include <cstdint>
#include <limits>
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
      // Independent lanes for the two row reductions, so the loops
      // vectorise (a single accumulator is a serial dependency chain).
      constexpr size_t L = 16;
      const size_t full = n - n % L;
      // NaN propagates as in max(); it is tracked apart so that the max
      // itself is a plain select, which vectorises.
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
      if (any_nan) m = std::numeric_limits<C>::quiet_NaN();
      // Separate simple loops (the row is in cache): each vectorises.
      for (size_t j = 0; j < n; ++j) e[j] = exp_of<C>(static_cast<C>(x[j]) - m);
      for (size_t l = 0; l < L; ++l) lanes[l] = 0;
      for (size_t j = 0; j < full; j += L) {
        for (size_t l = 0; l < L; ++l) lanes[l] += e[j + l];
      }
      C total = 0;
      for (size_t j = full; j < n; ++j) total += e[j];
      for (size_t l = 0; l < L; ++l) total += lanes[l];
      for (size_t j = 0; j < n; ++j) y[j] = static_cast<T>(e[j] / total);
    }
  });
}

} // namespace

void Softmax::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array in = cpu::ensure_row_contiguous(inputs[0]);
  array& out = outputs[0];
  out.set_data(allocator::allocate(out.nbytes()));
  if (out.size() == 0) return;
  const size_t n = static_cast<size_t>(in.shape(-1));
  const size_t rows = in.size() / n;
  switch (out.dtype().val) {
    case Dtype::Val::float32:
      softmax_rows(in.data<float>(), out.data<float>(), rows, n);
      break;
    case Dtype::Val::float64:
      softmax_rows(in.data<double>(), out.data<double>(), rows, n);
      break;
    case Dtype::Val::float16:
      softmax_rows(in.data<float16_t>(), out.data<float16_t>(), rows, n);
      break;
    case Dtype::Val::bfloat16:
      softmax_rows(in.data<bfloat16_t>(), out.data<bfloat16_t>(), rows, n);
      break;
    default:
      throw std::invalid_argument("[softmax] Unsupported dtype " + dtype_name(out.dtype()) + ".");
  }
}

} // namespace loom
