// CPU kernel of Scan. Along the last (contiguous) axis each row is a serial
// loop, rows in parallel, and one long row runs in two parallel passes (chunk
// scans, then each chunk offset by the totals before it); along an inner
// axis the loop runs over whole contiguous slabs, which vectorises.
#include "loom/primitives/scan.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "loom/backend/cpu/copy.h"
#include "loom/backend/cpu/thread_pool.h"
#include "loom/primitives/elementwise_table.h"
#include "loom/types/dispatch.h"

namespace loom {

namespace {

template <typename T>
struct Acc {
  // Accumulate half types in float.
  using type =
      std::conditional_t<std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>, float, T>;
};

template <typename A>
A lowest() {
  if constexpr (std::is_floating_point_v<A>)
    return -std::numeric_limits<A>::infinity();
  else
    return std::numeric_limits<A>::lowest();
}
template <typename A>
A highest() {
  if constexpr (std::is_floating_point_v<A>)
    return std::numeric_limits<A>::infinity();
  else
    return std::numeric_limits<A>::max();
}

template <typename A>
bool is_nan(const A& v) {
  if constexpr (std::is_floating_point_v<A>)
    return v != v;
  else
    return false;
}

// The combining operation and its identity for each ReduceType and
// accumulator type.
template <Scan::ReduceType R, typename A>
struct Op {
  static A identity() {
    if constexpr (R == Scan::ReduceType::sum)
      return A(0);
    else if constexpr (R == Scan::ReduceType::prod)
      return A(1);
    else if constexpr (R == Scan::ReduceType::max)
      return lowest<A>();
    else if constexpr (R == Scan::ReduceType::min)
      return highest<A>();
    else
      return -std::numeric_limits<A>::infinity();
  }
  static A apply(A acc, A v) {
    if constexpr (std::is_same_v<A, bool>) {
      if constexpr (R == Scan::ReduceType::max || R == Scan::ReduceType::sum)
        return acc || v;
      else
        return acc && v;
    } else if constexpr (R == Scan::ReduceType::sum) {
      return ew::Add{}(acc, v); // integers wrap around
    } else if constexpr (R == Scan::ReduceType::prod) {
      return ew::Multiply{}(acc, v);
    } else if constexpr (R == Scan::ReduceType::max) {
      return (v > acc || is_nan(v)) ? v : acc; // NaN sticks, as in maximum
    } else if constexpr (R == Scan::ReduceType::min) {
      return (v < acc || is_nan(v)) ? v : acc;
    } else {
      if constexpr (std::is_floating_point_v<A>) {
        A hi = std::max(acc, v), lo = std::min(acc, v);
        if (is_nan(acc) || is_nan(v)) return std::numeric_limits<A>::quiet_NaN();
        if (hi == -std::numeric_limits<A>::infinity()) return hi;
        return hi + std::log1p(std::exp(lo - hi));
      } else {
        return acc;
      }
    }
  }
};

template <Scan::ReduceType R, typename T>
void scan_typed(const T* in, T* out, int64_t outer, int64_t n, int64_t inner, bool reverse,
                bool inclusive) {
  using A = typename Acc<T>::type;
  using O = Op<R, A>;
  if (inner == 1) {
    auto row = [&](int64_t r) {
      const T* x = in + r * n;
      T* y = out + r * n;
      A acc = O::identity();
      for (int64_t k = 0; k < n; ++k) {
        int64_t i = reverse ? n - 1 - k : k;
        if (inclusive) {
          acc = O::apply(acc, static_cast<A>(x[i]));
          y[i] = static_cast<T>(acc);
        } else {
          y[i] = static_cast<T>(acc);
          acc = O::apply(acc, static_cast<A>(x[i]));
        }
      }
    };
    if (outer == 1 && n >= (1 << 20) && R == Scan::ReduceType::sum && cpu::num_threads() > 1 &&
        std::is_floating_point_v<A>) {
      // One long row: each chunk's total first (a read-only pass), then
      // each chunk scanned from the totals before it (one read-write pass).
      int64_t chunks = cpu::num_threads() * 4;
      std::vector<A> totals(chunks, A(0));
      auto bound = [&](int64_t c) { return n * c / chunks; };
      cpu::parallel_for(chunks, 1, [&](size_t b, size_t e) {
        for (size_t c = b; c < e; ++c) {
          // Eight partial sums: independent chains the compiler can vectorise.
          A part[8] = {};
          int64_t k = bound(c), end = bound(c + 1);
          const T* x = reverse ? in + n - end : in + k;
          int64_t m = end - k, q = 0;
          for (; q + 8 <= m; q += 8) {
            for (int l = 0; l < 8; ++l) part[l] = ew::Add{}(part[l], static_cast<A>(x[q + l]));
          }
          for (; q < m; ++q) part[0] = ew::Add{}(part[0], static_cast<A>(x[q]));
          A acc = A(0);
          for (int l = 0; l < 8; ++l) acc = ew::Add{}(acc, part[l]);
          totals[c] = acc;
        }
      });
      std::vector<A> prefix(chunks, A(0));
      for (int64_t c = 1; c < chunks; ++c)
        prefix[c] = ew::Add{}(A(prefix[c - 1]), A(totals[c - 1]));
      cpu::parallel_for(chunks, 1, [&](size_t b, size_t e) {
        for (size_t c = b; c < e; ++c) {
          A acc = prefix[c];
          for (int64_t k = bound(c); k < bound(c + 1); ++k) {
            int64_t i = reverse ? n - 1 - k : k;
            if (inclusive) {
              acc = ew::Add{}(acc, static_cast<A>(in[i]));
              out[i] = static_cast<T>(acc);
            } else {
              out[i] = static_cast<T>(acc);
              acc = ew::Add{}(acc, static_cast<A>(in[i]));
            }
          }
        }
      });
      return;
    }
    cpu::parallel_for(outer, std::max<int64_t>(1, (1 << 15) / std::max<int64_t>(n, 1)),
                      [&](size_t b, size_t e) {
                        for (size_t r = b; r < e; ++r) row(r);
                      });
    return;
  }
  // Inner axis: carry a slab of `inner` accumulators along the axis.
  int64_t grain_inner = std::max<int64_t>(1, inner / std::max(1, cpu::num_threads()));
  int64_t jobs_per_outer = (inner + grain_inner - 1) / grain_inner;
  cpu::parallel_for(outer * jobs_per_outer, 1, [&](size_t b, size_t e) {
    std::vector<A> acc;
    for (size_t job = b; job < e; ++job) {
      int64_t o = job / jobs_per_outer;
      int64_t j0 = (job % jobs_per_outer) * grain_inner;
      int64_t j1 = std::min(inner, j0 + grain_inner);
      acc.assign(j1 - j0, O::identity());
      for (int64_t k = 0; k < n; ++k) {
        int64_t i = reverse ? n - 1 - k : k;
        const T* x = in + (o * n + i) * inner;
        T* y = out + (o * n + i) * inner;
        for (int64_t j = j0; j < j1; ++j) {
          if (inclusive) {
            acc[j - j0] = O::apply(acc[j - j0], static_cast<A>(x[j]));
            y[j] = static_cast<T>(acc[j - j0]);
          } else {
            y[j] = static_cast<T>(acc[j - j0]);
            acc[j - j0] = O::apply(acc[j - j0], static_cast<A>(x[j]));
          }
        }
      }
    }
  });
}

} // namespace

void Scan::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array in = cpu::ensure_row_contiguous(inputs[0]);
  array& out = outputs[0];
  out.set_data(allocator::allocate(out.nbytes()));
  if (out.size() == 0) return;
  int64_t n = in.shape(axis_);
  int64_t inner = 1;
  for (int d = axis_ + 1; d < in.ndim(); ++d) inner *= in.shape(d);
  int64_t outer = static_cast<int64_t>(in.size()) / (n * inner);
  dispatch(in.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = in.data<T>();
    T* y = out.data<T>();
    if constexpr (std::is_same_v<T, std::complex<float>>) {
      if (type_ == ReduceType::sum) {
        scan_typed<ReduceType::sum>(x, y, outer, n, inner, reverse_, inclusive_);
      } else if (type_ == ReduceType::prod) {
        scan_typed<ReduceType::prod>(x, y, outer, n, inner, reverse_, inclusive_);
      } else {
        throw std::invalid_argument(std::string("[") + name() + "] Not supported for complex64.");
      }
    } else {
      switch (type_) {
        case ReduceType::sum:
          scan_typed<ReduceType::sum>(x, y, outer, n, inner, reverse_, inclusive_);
          break;
        case ReduceType::prod:
          scan_typed<ReduceType::prod>(x, y, outer, n, inner, reverse_, inclusive_);
          break;
        case ReduceType::max:
          scan_typed<ReduceType::max>(x, y, outer, n, inner, reverse_, inclusive_);
          break;
        case ReduceType::min:
          scan_typed<ReduceType::min>(x, y, outer, n, inner, reverse_, inclusive_);
          break;
        case ReduceType::logaddexp:
          if constexpr (std::is_floating_point_v<typename Acc<T>::type>) {
            scan_typed<ReduceType::logaddexp>(x, y, outer, n, inner, reverse_, inclusive_);
          } else {
            throw std::invalid_argument("[logcumsumexp] Needs a floating point input.");
          }
          break;
      }
    }
  });
}

} // namespace loom
