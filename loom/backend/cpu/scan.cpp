// CPU kernel of Scan. Along the last (contiguous) axis each row is a serial
// loop, rows in parallel, and one long row runs in two parallel passes (chunk
// scans, then each chunk offset by the totals before it); along an inner
// axis the loop runs over whole contiguous slabs, which vectorises.
#include "loom/primitives/scan.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include "loom/backend/cpu/copy.h"
#include "loom/backend/cpu/thread_pool.h"
#include "loom/primitives/elementwise_table.h"
#include "loom/types/dispatch.h"

#if defined(__AVX512F__) || defined(__SSE2__)
#include <immintrin.h>
#endif

namespace loom {

namespace {

inline void cpu_relax() {
#if defined(__SSE2__)
  _mm_pause();
#endif
}

// GCC 12 flags the undefined pass-through vector inside its own AVX-512
// intrinsics (alignr, permutexvar) as maybe-uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// Float32 running sums, vectorised: the prefix of each vector of lanes is
// built in registers (log2(lanes) shifted adds), then offset by the carry of
// everything before it, so the dependent chain is one add per vector rather
// than one per element. Rounding differs from a serial loop by the order of
// the adds within a vector only.
#if defined(__AVX512F__)
constexpr int64_t kLanes = 16;
inline __m512 prefix_in_vector(__m512 x) {
  const __m512i zero = _mm512_setzero_si512();
  auto shift_up = [&](__m512 v, auto k) {
    return _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(v), zero, 16 - k.value));
  };
  x = _mm512_add_ps(x, shift_up(x, std::integral_constant<int, 1>{}));
  x = _mm512_add_ps(x, shift_up(x, std::integral_constant<int, 2>{}));
  x = _mm512_add_ps(x, shift_up(x, std::integral_constant<int, 4>{}));
  return _mm512_add_ps(x, shift_up(x, std::integral_constant<int, 8>{}));
}
#elif defined(__AVX2__)
constexpr int64_t kLanes = 8;
inline __m256 prefix_in_vector(__m256 x) {
  // Within each 128-bit half, then the low half's total into the high half.
  x = _mm256_add_ps(x, _mm256_castsi256_ps(_mm256_slli_si256(_mm256_castps_si256(x), 4)));
  x = _mm256_add_ps(x, _mm256_castsi256_ps(_mm256_slli_si256(_mm256_castps_si256(x), 8)));
  __m256 t = _mm256_permute_ps(x, 0xFF);
  return _mm256_add_ps(x, _mm256_permute2f128_ps(t, t, 0x08));
}
#endif

// Scans x[0, n) into y (forward or reverse, inclusive or exclusive), starting
// from `carry`; returns the carry after the last element (the total plus the
// starting carry).
float scan_sum_f32(const float* x, float* y, int64_t n, bool reverse, bool inclusive, float carry) {
  int64_t done = 0;
#if defined(__AVX512F__)
  const __m512i rev = _mm512_set_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i last = _mm512_set1_epi32(15);
  const __m512 zero = _mm512_setzero_ps();
  __m512 c = _mm512_set1_ps(carry);
  for (; done + kLanes <= n; done += kLanes) {
    // Reverse scans read the vector that ends where the previous one began,
    // lanes reversed, so lane 0 is the element met first.
    const float* px = reverse ? x + n - done - kLanes : x + done;
    __m512 v = _mm512_loadu_ps(px);
    if (reverse) v = _mm512_permutexvar_ps(rev, v);
    __m512 p = prefix_in_vector(v);
    __m512 o = inclusive ? p
                         : _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(p),
                                                                   _mm512_castps_si512(zero), 15));
    o = _mm512_add_ps(o, c);
    c = _mm512_add_ps(c, _mm512_permutexvar_ps(last, p));
    if (reverse) o = _mm512_permutexvar_ps(rev, o);
    _mm512_storeu_ps(reverse ? y + n - done - kLanes : y + done, o);
  }
  carry = _mm512_cvtss_f32(c);
#elif defined(__AVX2__)
  const __m256i rev = _mm256_setr_epi32(7, 6, 5, 4, 3, 2, 1, 0);
  const __m256i up = _mm256_setr_epi32(0, 0, 1, 2, 3, 4, 5, 6);
  const __m256i last = _mm256_set1_epi32(7);
  const __m256 zero = _mm256_setzero_ps();
  __m256 c = _mm256_set1_ps(carry);
  for (; done + kLanes <= n; done += kLanes) {
    const float* px = reverse ? x + n - done - kLanes : x + done;
    __m256 v = _mm256_loadu_ps(px);
    if (reverse) v = _mm256_permutevar8x32_ps(v, rev);
    __m256 p = prefix_in_vector(v);
    __m256 o = inclusive ? p : _mm256_blend_ps(_mm256_permutevar8x32_ps(p, up), zero, 0x01);
    o = _mm256_add_ps(o, c);
    c = _mm256_add_ps(c, _mm256_permutevar8x32_ps(p, last));
    if (reverse) o = _mm256_permutevar8x32_ps(o, rev);
    _mm256_storeu_ps(reverse ? y + n - done - kLanes : y + done, o);
  }
  carry = _mm256_cvtss_f32(c);
#endif
  for (; done < n; ++done) {
    int64_t i = reverse ? n - 1 - done : done;
    float v = x[i];
    y[i] = inclusive ? carry + v : carry;
    carry += v;
  }
  return carry;
}

#pragma GCC diagnostic pop

// The sum of x[0, n) with 64 partial sums (the order the chunked scan's
// running totals are defined by; the same bits whichever thread computes it).
float sum_f32(const float* x, int64_t n) {
  int64_t i = 0;
  float total = 0.0f;
#if defined(__AVX512F__)
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (; i + 64 <= n; i += 64) {
    a0 = _mm512_add_ps(a0, _mm512_loadu_ps(x + i));
    a1 = _mm512_add_ps(a1, _mm512_loadu_ps(x + i + 16));
    a2 = _mm512_add_ps(a2, _mm512_loadu_ps(x + i + 32));
    a3 = _mm512_add_ps(a3, _mm512_loadu_ps(x + i + 48));
  }
  total = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
#elif defined(__AVX__)
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_loadu_ps(x + i));
    a1 = _mm256_add_ps(a1, _mm256_loadu_ps(x + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_loadu_ps(x + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_loadu_ps(x + i + 24));
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  for (float v : lanes) total += v;
#endif
  for (; i < n; ++i) total += x[i];
  return total;
}

// One long float32 row on the pool, one pass over memory (decoupled
// look-back). Chunks are claimed in order; each sums its input (which brings
// it into L2) and publishes that total, then finds the running total before
// it and scans from there, re-reading its input from cache. The running total
// of chunk c is defined as that of chunk c - 1 plus c's own total, so its
// bits do not depend on which thread computes it: a chunk whose predecessor
// has not published its running total yet walks back to the last one that
// has and adds the totals after it, summing any chunk whose owner has not got
// that far itself. Nothing ever waits on a thread that the (loaded) machine
// has descheduled.
void scan_sum_f32_parallel(const float* x, float* y, int64_t n, bool reverse, bool inclusive) {
  constexpr int64_t kChunk = 1 << 16; // 256 KiB in, 256 KiB out: within L2
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  struct Slot {
    std::atomic<int> state{0}; // 0: nothing yet, 1: own total, 2: running total too
    float own = 0.0f;
    float running = 0.0f;
  };
  std::unique_ptr<Slot[]> slots(new Slot[chunks]);
  auto span = [&](int64_t c) {
    const int64_t k0 = c * kChunk, k1 = std::min(n, k0 + kChunk);
    // Forward chunk c covers [k0, k1); reverse chunk c the same span from the end.
    return std::pair<int64_t, int64_t>(reverse ? n - k1 : k0, k1 - k0);
  };
  std::atomic<int64_t> next{0};
  cpu::parallel_for(cpu::num_threads(), 1, [&](size_t, size_t) {
    for (;;) {
      const int64_t c = next.fetch_add(1);
      if (c >= chunks) return;
      const auto [lo, len] = span(c);
      const float own = sum_f32(x + lo, len);
      slots[c].own = own;
      slots[c].state.store(1, std::memory_order_release);
      float before = 0.0f;
      if (c > 0) {
        // The predecessor is usually a few microseconds from publishing.
        for (int spins = 0; spins < 2048; ++spins) {
          if (slots[c - 1].state.load(std::memory_order_acquire) == 2) break;
          cpu_relax();
        }
        int64_t j = c - 1;
        while (j >= 0 && slots[j].state.load(std::memory_order_acquire) != 2) --j;
        before = j >= 0 ? slots[j].running : 0.0f;
        for (int64_t k = j + 1; k < c; ++k) {
          if (slots[k].state.load(std::memory_order_acquire) >= 1) {
            before += slots[k].own;
          } else {
            const auto [klo, klen] = span(k);
            before += sum_f32(x + klo, klen);
          }
        }
      }
      slots[c].running = before + own;
      slots[c].state.store(2, std::memory_order_release);
      scan_sum_f32(x + lo, y + lo, len, reverse, inclusive, before);
    }
  });
}

#if defined(__AVX512F__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// Float32 running max/min of x[0, n) (forward or reverse, inclusive or
// exclusive), vectorised like scan_sum_f32: each vector's prefix in
// registers, then the carry. The operands are ordered so that ties keep the
// earlier element, as the serial loop does (max(+0, -0) is the one met
// first). A vector holding a NaN hands the rest of the row to the serial
// loop, whose running value then stays NaN.
template <bool kMax>
void scan_extreme_f32(const float* x, float* y, int64_t n, bool reverse, bool inclusive) {
  const float ident_v =
      kMax ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  const __m512 ident = _mm512_set1_ps(ident_v);
  const __m512i ident_i = _mm512_castps_si512(ident);
  const __m512i rev = _mm512_set_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i last = _mm512_set1_epi32(15);
  // later op earlier: the later value only where strictly beyond.
  auto pick = [](__m512 later, __m512 earlier) {
    return kMax ? _mm512_max_ps(later, earlier) : _mm512_min_ps(later, earlier);
  };
  auto shift_up = [&](__m512 v, auto k) {
    return _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(v), ident_i, 16 - k.value));
  };
  __m512 c = ident;
  int64_t done = 0;
  for (; done + kLanes <= n; done += kLanes) {
    const float* px = reverse ? x + n - done - kLanes : x + done;
    __m512 v = _mm512_loadu_ps(px);
    if (_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q)) break;
    if (reverse) v = _mm512_permutexvar_ps(rev, v);
    __m512 p = pick(v, shift_up(v, std::integral_constant<int, 1>{}));
    p = pick(p, shift_up(p, std::integral_constant<int, 2>{}));
    p = pick(p, shift_up(p, std::integral_constant<int, 4>{}));
    p = pick(p, shift_up(p, std::integral_constant<int, 8>{}));
    __m512 o = inclusive ? p : shift_up(p, std::integral_constant<int, 1>{});
    o = pick(o, c);
    c = pick(_mm512_permutexvar_ps(last, p), c);
    if (reverse) o = _mm512_permutexvar_ps(rev, o);
    _mm512_storeu_ps(reverse ? y + n - done - kLanes : y + done, o);
  }
  float carry = _mm512_cvtss_f32(c);
  for (; done < n; ++done) {
    int64_t i = reverse ? n - 1 - done : done;
    float v = x[i];
    if (!inclusive) y[i] = carry;
    bool take = kMax ? (v > carry || v != v) : (v < carry || v != v);
    carry = take ? v : carry;
    if (inclusive) y[i] = carry;
  }
}
#pragma GCC diagnostic pop
#endif

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
  if constexpr (R == Scan::ReduceType::sum && std::is_same_v<T, float>) {
    if (inner == 1) {
      if (outer == 1 && n >= (1 << 18) && cpu::num_threads() > 1) {
        scan_sum_f32_parallel(in, out, n, reverse, inclusive);
        return;
      }
      cpu::parallel_for(outer, std::max<int64_t>(1, (1 << 15) / std::max<int64_t>(n, 1)),
                        [&](size_t b, size_t e) {
                          for (size_t r = b; r < e; ++r)
                            scan_sum_f32(in + r * n, out + r * n, n, reverse, inclusive, 0.0f);
                        });
      return;
    }
  }
#if defined(__AVX512F__)
  if constexpr ((R == Scan::ReduceType::max || R == Scan::ReduceType::min) &&
                std::is_same_v<T, float>) {
    if (inner == 1) {
      cpu::parallel_for(outer, std::max<int64_t>(1, (1 << 15) / std::max<int64_t>(n, 1)),
                        [&](size_t b, size_t e) {
                          for (size_t r = b; r < e; ++r)
                            scan_extreme_f32<R == Scan::ReduceType::max>(in + r * n, out + r * n, n,
                                                                         reverse, inclusive);
                        });
      return;
    }
  }
#endif
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
    std::unique_ptr<A[]> acc(new A[grain_inner]);
    for (size_t job = b; job < e; ++job) {
      int64_t o = job / jobs_per_outer;
      int64_t j0 = (job % jobs_per_outer) * grain_inner;
      int64_t j1 = std::min(inner, j0 + grain_inner);
      std::fill(acc.get(), acc.get() + (j1 - j0), O::identity());
      for (int64_t k = 0; k < n; ++k) {
        int64_t i = reverse ? n - 1 - k : k;
        const T* x = in + (o * n + i) * inner;
        T* y = out + (o * n + i) * inner;
        // Two loops rather than a test per element, so each vectorises.
        A* a = acc.get();
        if (inclusive) {
          for (int64_t j = j0; j < j1; ++j) {
            a[j - j0] = O::apply(a[j - j0], static_cast<A>(x[j]));
            y[j] = static_cast<T>(a[j - j0]);
          }
        } else {
          for (int64_t j = j0; j < j1; ++j) {
            y[j] = static_cast<T>(a[j - j0]);
            a[j - j0] = O::apply(a[j - j0], static_cast<A>(x[j]));
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
