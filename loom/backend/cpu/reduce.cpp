// CPU kernels of Reduce and ArgReduce.
//
// A reduction is planned as a loop nest over the input's dimensions, each
// with an input stride and an output stride (0 for reduced dimensions),
// ordered by input stride so the innermost loop walks memory with the
// smallest step. The one or two innermost dimensions pick the kernel:
//   - a reduced run (row reduction): several independent accumulators, so
//     the loop vectorises and keeps several vector operations in flight;
//   - short rows, each into its own output: one tight loop over the rows;
//   - reduced rows over kept columns (column reduction): narrow rows are one
//     contiguous run reduced with periodic lanes; wider ones accumulate eight
//     rows per pass into a tile of outputs, vectorised across the columns;
//   - anything else: element by element along the run.
// Work is split across the thread pool over an outer kept dimension (chunks
// own disjoint outputs) or, when there are few outputs, over a reduced
// dimension into per-chunk partial results combined at the end.
#include "loom/primitives/reduce.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>
#include <memory>
#include <stdexcept>
#include <type_traits>

#if defined(__F16C__)
#include <immintrin.h>
#endif

#include "loom/backend/cpu/copy.h"
#include "loom/backend/cpu/reduce_extreme.h"
#include "loom/backend/cpu/strided.h"
#include "loom/backend/cpu/thread_pool.h"
#include "loom/primitives/elementwise_scalar.h"
#include "loom/types/dispatch.h"

namespace loom {

namespace {

constexpr int64_t kGrain = 1 << 16;
// Outputs of a column reduction processed together, so that they stay in L1
// while every reduced row is added into them.
constexpr int64_t kColumnTile = 4096;

template <typename T>
constexpr bool is_complex_v = std::is_same_v<T, std::complex<float>>;
template <typename T>
constexpr bool is_half_v = std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>;

// Half types accumulate (and compare) in float.
template <typename T>
using acc_of = std::conditional_t<is_half_v<T>, float, T>;

template <typename T>
inline bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    return v != v;
  } else if constexpr (is_complex_v<T>) {
    return v.real() != v.real() || v.imag() != v.imag();
  } else {
    return false;
  }
}

// Complex numbers order lexicographically (real part, then imaginary).
template <typename T>
inline bool greater(T a, T b) {
  if constexpr (is_complex_v<T>) {
    return a.real() > b.real() || (a.real() == b.real() && a.imag() > b.imag());
  } else {
    return a > b;
  }
}

template <typename T>
T lowest_value() {
  if constexpr (is_complex_v<T>) {
    float inf = std::numeric_limits<float>::infinity();
    return T(-inf, -inf);
  } else if constexpr (std::is_same_v<T, bool>) {
    return false;
  } else if constexpr (std::numeric_limits<T>::has_infinity) {
    return -std::numeric_limits<T>::infinity();
  } else {
    return std::numeric_limits<T>::lowest();
  }
}

template <typename T>
T highest_value() {
  if constexpr (is_complex_v<T>) {
    float inf = std::numeric_limits<float>::infinity();
    return T(inf, inf);
  } else if constexpr (std::is_same_v<T, bool>) {
    return true;
  } else if constexpr (std::numeric_limits<T>::has_infinity) {
    return std::numeric_limits<T>::infinity();
  } else {
    return std::numeric_limits<T>::max();
  }
}

// Reduction operators: the result type for an input type, the identity and
// the combining step. Max and Min propagate NaN.
struct SumOp {
  template <typename In>
  using out_t = std::conditional_t<
      std::is_same_v<In, bool> || std::is_same_v<In, int8_t> || std::is_same_v<In, int16_t>,
      int32_t,
      std::conditional_t<std::is_same_v<In, uint8_t> || std::is_same_v<In, uint16_t>, uint32_t,
                         In>>;
  template <typename A>
  static A identity() {
    return A(0);
  }
  template <typename A>
  static A apply(A a, A b) {
    // Integer sums wrap around, as MLX's and NumPy's (signed overflow is
    // undefined in C++).
    if constexpr (std::is_integral_v<A> && !std::is_same_v<A, bool>) {
      return scalar::wrap_add(a, b);
    } else {
      return a + b;
    }
  }
};

struct ProdOp {
  template <typename In>
  using out_t = SumOp::out_t<In>;
  template <typename A>
  static A identity() {
    return A(1);
  }
  template <typename A>
  static A apply(A a, A b) {
    if constexpr (std::is_integral_v<A> && !std::is_same_v<A, bool>) {
      return scalar::wrap_mul(a, b);
    } else {
      return a * b;
    }
  }
};

struct MaxOp {
  template <typename In>
  using out_t = In;
  template <typename A>
  static A identity() {
    return lowest_value<A>();
  }
  template <typename A>
  static A apply(A a, A b) {
    if constexpr (std::is_floating_point_v<A> || is_complex_v<A>) {
      return (greater(b, a) || is_nan(b)) ? b : a;
    } else {
      return b > a ? b : a;
    }
  }
};

struct MinOp {
  template <typename In>
  using out_t = In;
  template <typename A>
  static A identity() {
    return highest_value<A>();
  }
  template <typename A>
  static A apply(A a, A b) {
    if constexpr (std::is_floating_point_v<A> || is_complex_v<A>) {
      return (greater(a, b) || is_nan(b)) ? b : a;
    } else {
      return b < a ? b : a;
    }
  }
};

struct AndOp {
  template <typename In>
  using out_t = bool;
  template <typename A>
  static A identity() {
    return true;
  }
  template <typename A>
  static A apply(A a, A b) {
    return a && b;
  }
};

struct OrOp {
  template <typename In>
  using out_t = bool;
  template <typename A>
  static A identity() {
    return false;
  }
  template <typename A>
  static A apply(A a, A b) {
    return a || b;
  }
};

template <typename Op>
constexpr bool is_extreme_v = std::is_same_v<Op, MaxOp> || std::is_same_v<Op, MinOp>;

#if defined(__AVX512F__)
// GCC 12 flags the undefined pass-through vector inside its own AVX-512
// intrinsics (the _mm512_reduce_* helpers) as maybe-uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// Float32 max/min of n contiguous values, NaN propagating. The vector
// max/min instructions return their second operand when either is NaN, so a
// NaN met in the data would be lost in the accumulator: NaNs are tracked in
// a mask of their own. A short row is one masked load.
template <typename Op>
float extreme_f32(const float* x, int64_t n) {
  constexpr bool kMax = std::is_same_v<Op, MaxOp>;
  const __m512 ident = _mm512_set1_ps(kMax ? -std::numeric_limits<float>::infinity()
                                           : std::numeric_limits<float>::infinity());
  __m512 a0 = ident, a1 = ident, a2 = ident, a3 = ident;
  __mmask16 nan = 0;
  auto step = [&](__m512& a, __m512 v) {
    a = kMax ? _mm512_max_ps(a, v) : _mm512_min_ps(a, v);
    nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  };
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    step(a0, _mm512_loadu_ps(x + i));
    step(a1, _mm512_loadu_ps(x + i + 16));
    step(a2, _mm512_loadu_ps(x + i + 32));
    step(a3, _mm512_loadu_ps(x + i + 48));
  }
  for (; i + 16 <= n; i += 16) step(a0, _mm512_loadu_ps(x + i));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    step(a0, _mm512_mask_loadu_ps(ident, m, x + i));
  }
  if (nan) return std::numeric_limits<float>::quiet_NaN();
  if constexpr (kMax) {
    return _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(a0, a1), _mm512_max_ps(a2, a3)));
  } else {
    return _mm512_reduce_min_ps(_mm512_min_ps(_mm512_min_ps(a0, a1), _mm512_min_ps(a2, a3)));
  }
}
#pragma GCC diagnostic pop
#endif

// Elements converted per block when the input type does not vectorise as is.
constexpr int64_t kConvertBlock = 1024;

// Converts n contiguous elements to the accumulation type. float16 uses the
// F16C instructions where the target has them (GCC does not vectorise
// _Float16 conversions without AVX512-FP16).
template <typename Acc, typename In>
void convert_block(const In* __restrict x, Acc* __restrict out, int64_t n) {
  int64_t i = 0;
#if defined(__F16C__)
  if constexpr (std::is_same_v<In, float16_t> && std::is_same_v<Acc, float>) {
    for (; i + 8 <= n; i += 8) {
      __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i));
      _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
    }
  }
#endif
  for (; i < n; ++i) out[i] = convert<Acc>(x[i]);
}

// Reduces n elements `stride` apart into one value.
template <typename Op, typename Acc, typename In>
Acc reduce_run(const In* x, int64_t n, int64_t stride) {
  Acc result = Op::template identity<Acc>();
#if defined(__AVX512F__)
  if constexpr (is_extreme_v<Op> && std::is_same_v<Acc, float> && std::is_same_v<In, float>) {
    if (stride == 1) return extreme_f32<Op>(x, n);
  }
#else
  if constexpr (is_extreme_v<Op> && std::is_same_v<Acc, float> && std::is_same_v<In, float>) {
    if (stride == 1 && n > 0 && cpu::has_avx2())
      return cpu::extreme_f32_avx2(x, n, std::is_same_v<Op, MaxOp>);
  }
#endif
  if constexpr (is_half_v<In>) {
    if (stride == 1) {
      Acc buf[kConvertBlock];
      for (int64_t b = 0; b < n; b += kConvertBlock) {
        const int64_t len = std::min(kConvertBlock, n - b);
        convert_block(x + b, buf, len);
        result = Op::apply(result, reduce_run<Op, Acc, Acc>(buf, len, 1));
      }
      return result;
    }
  }
#if defined(__AVX__)
  if constexpr (std::is_same_v<Op, SumOp> && std::is_same_v<Acc, float> &&
                std::is_same_v<In, float>) {
    if (stride == 1 && n >= 32) {
      // The lane array below stays in memory for float sums (GCC keeps it on
      // the stack), which halves the streaming rate; four registers do not.
      __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
      int64_t i = 0;
      for (; i + 32 <= n; i += 32) {
        a0 = _mm256_add_ps(a0, _mm256_loadu_ps(x + i));
        a1 = _mm256_add_ps(a1, _mm256_loadu_ps(x + i + 8));
        a2 = _mm256_add_ps(a2, _mm256_loadu_ps(x + i + 16));
        a3 = _mm256_add_ps(a3, _mm256_loadu_ps(x + i + 24));
      }
      alignas(32) float lanes[8];
      _mm256_store_ps(lanes, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
      for (float v : lanes) result += v;
      for (; i < n; ++i) result += x[i];
      return result;
    }
  }
#endif
  if (stride == 1) {
    // Independent accumulators break the dependency chain so the loop
    // vectorises and several vector operations are in flight at once.
    constexpr int kLanes = std::max<int>(1, 256 / sizeof(Acc));
    if (n >= 2 * kLanes) {
      Acc acc[kLanes];
      for (int k = 0; k < kLanes; ++k) acc[k] = Op::template identity<Acc>();
      int64_t i = 0;
      for (; i + kLanes <= n; i += kLanes) {
        for (int k = 0; k < kLanes; ++k) acc[k] = Op::apply(acc[k], convert<Acc>(x[i + k]));
      }
      for (int k = 0; k < kLanes; ++k) result = Op::apply(result, acc[k]);
      x += i;
      n -= i;
    }
    for (int64_t i = 0; i < n; ++i) result = Op::apply(result, convert<Acc>(x[i]));
  } else {
    for (int64_t i = 0; i < n; ++i) result = Op::apply(result, convert<Acc>(x[i * stride]));
  }
  return result;
}

// out[i * os] = op(out[i * os], x[i * is]) for i < n.
template <typename Op, typename Acc, typename In>
void accumulate_run(Acc* __restrict out, int64_t os, const In* __restrict x, int64_t is,
                    int64_t n) {
  if constexpr (is_half_v<In>) {
    if (os == 1 && is == 1) {
      Acc buf[kConvertBlock];
      for (int64_t b = 0; b < n; b += kConvertBlock) {
        const int64_t len = std::min(kConvertBlock, n - b);
        convert_block(x + b, buf, len);
        accumulate_run<Op, Acc, Acc>(out + b, 1, buf, 1, len);
      }
      return;
    }
  }
  if (os == 1 && is == 1) {
    for (int64_t i = 0; i < n; ++i) out[i] = Op::apply(out[i], convert<Acc>(x[i]));
  } else {
    for (int64_t i = 0; i < n; ++i) out[i * os] = Op::apply(out[i * os], convert<Acc>(x[i * is]));
  }
}

// A load from the same address modulo 4 KiB as a store in flight waits for
// it (4K aliasing), which stalls a column sweep whose accumulators and input
// rows are both page-aligned. Returns the place in `buf` (which has room for
// 4 KiB more than needed) that sits 2 KiB away from `x` modulo 4 KiB.
template <typename T>
T* away_from(T* buf, const void* x) {
  const uintptr_t b = reinterpret_cast<uintptr_t>(buf);
  const uintptr_t p = reinterpret_cast<uintptr_t>(x);
  const uintptr_t shift = (p - b - 2048) & 4095;
  return buf + shift / sizeof(T);
}

// Column block: `rows` rows `row_stride` apart, each accumulated into the same
// n outputs, in a local tile of accumulators. Eight rows go per pass: an
// eighth of the accumulator loads and stores (whose reloads would otherwise
// wait on store forwarding when rows are short) and eight input streams in
// flight.
template <typename Op, typename Acc, typename In>
void accumulate_rows(Acc* __restrict out, int64_t os, const In* __restrict x, int64_t is, int64_t n,
                     int64_t rows, int64_t row_stride) {
  if (os != 1 || is != 1) {
    for (int64_t r = 0; r < rows; ++r) accumulate_run<Op, Acc>(out, os, x + r * row_stride, is, n);
    return;
  }
  alignas(64) Acc local[kColumnTile + 4096 / sizeof(Acc)];
  for (int64_t c = 0; c < n; c += kColumnTile) {
    const int64_t len = std::min(kColumnTile, n - c);
    Acc* acc = away_from(local, x + c);
    std::copy(out + c, out + c + len, acc);
    int64_t r = 0;
    if constexpr (!is_half_v<In>) {
      for (; r + 8 <= rows; r += 8) {
        const In* x0 = x + c + r * row_stride;
        const In* x1 = x0 + row_stride;
        const In* x2 = x1 + row_stride;
        const In* x3 = x2 + row_stride;
        const In* x4 = x3 + row_stride;
        const In* x5 = x4 + row_stride;
        const In* x6 = x5 + row_stride;
        const In* x7 = x6 + row_stride;
        for (int64_t i = 0; i < len; ++i) {
          Acc a = Op::apply(convert<Acc>(x0[i]), convert<Acc>(x1[i]));
          Acc b = Op::apply(convert<Acc>(x2[i]), convert<Acc>(x3[i]));
          Acc d = Op::apply(convert<Acc>(x4[i]), convert<Acc>(x5[i]));
          Acc e = Op::apply(convert<Acc>(x6[i]), convert<Acc>(x7[i]));
          acc[i] = Op::apply(acc[i], Op::apply(Op::apply(a, b), Op::apply(d, e)));
        }
      }
    }
    for (; r < rows; ++r) accumulate_run<Op, Acc>(acc, 1, x + c + r * row_stride, 1, len);
    std::copy(acc, acc + len, out + c);
  }
}

// Row block: `rows` short contiguous rows `row_stride` apart, each reduced
// into its own output; one tight loop instead of a loop-nest step per row.
template <int N, typename Op, typename Acc, typename In>
void reduce_fixed_rows(Acc* __restrict out, int64_t os, const In* __restrict x, int64_t rows) {
  for (int64_t j = 0; j < rows; ++j) {
    const In* p = x + j * N;
    Acc r = convert<Acc>(p[0]);
    for (int k = 1; k < N; ++k) r = Op::apply(r, convert<Acc>(p[k]));
    out[j * os] = Op::apply(out[j * os], r);
  }
}

template <typename Op, typename Acc, typename In>
void reduce_short_rows(Acc* out, int64_t os, const In* x, int64_t n, int64_t rows,
                       int64_t row_stride) {
#if defined(__AVX512F__)
  // A compare-and-select chain per row branches on the data; a masked
  // vector load per row does not.
  if constexpr (is_extreme_v<Op> && std::is_same_v<Acc, float> && std::is_same_v<In, float>) {
    for (int64_t j = 0; j < rows; ++j) {
      out[j * os] = Op::apply(out[j * os], extreme_f32<Op>(x + j * row_stride, n));
    }
    return;
  }
#else
  if constexpr (is_extreme_v<Op> && std::is_same_v<Acc, float> && std::is_same_v<In, float>) {
    if (n > 0 && cpu::has_avx2()) {
      for (int64_t j = 0; j < rows; ++j) {
        out[j * os] = Op::apply(
            out[j * os], cpu::extreme_f32_avx2(x + j * row_stride, n, std::is_same_v<Op, MaxOp>));
      }
      return;
    }
  }
#endif
  // Common small widths get a fixed-width loop the compiler can vectorise.
  if (row_stride == n && os == 1) {
    switch (n) {
      case 2:
        return reduce_fixed_rows<2, Op, Acc>(out, 1, x, rows);
      case 3:
        return reduce_fixed_rows<3, Op, Acc>(out, 1, x, rows);
      case 4:
        return reduce_fixed_rows<4, Op, Acc>(out, 1, x, rows);
      case 8:
        return reduce_fixed_rows<8, Op, Acc>(out, 1, x, rows);
      default:
        break;
    }
  }
  for (int64_t j = 0; j < rows; ++j) {
    const In* p = x + j * row_stride;
    Acc r = convert<Acc>(p[0]);
    for (int64_t k = 1; k < n; ++k) r = Op::apply(r, convert<Acc>(p[k]));
    out[j * os] = Op::apply(out[j * os], r);
  }
}

// Lanes of the periodic kernel below.
template <typename Acc>
constexpr int64_t kPeriodicLanes = std::max<int64_t>(1, 256 / sizeof(Acc));

// Column block of contiguous rows narrower than a few vectors: the block is
// one contiguous run whose element i belongs to output i % period, reduced
// with a multiple of `period` independent lanes.
template <typename Op, typename Acc, typename In>
void reduce_periodic(Acc* out, int64_t os, const In* x, int64_t period, int64_t rows) {
  constexpr int64_t kMax = kPeriodicLanes<Acc>;
  const int64_t lanes = period * (kMax / period);
  const int64_t total = period * rows;
  Acc acc[kMax];
  for (int64_t k = 0; k < kMax; ++k) acc[k] = Op::template identity<Acc>();
  int64_t i = 0;
  if constexpr (!is_half_v<In>) {
    if (lanes == kMax) {
      for (; i + kMax <= total; i += kMax) {
        for (int64_t k = 0; k < kMax; ++k) acc[k] = Op::apply(acc[k], convert<Acc>(x[i + k]));
      }
    } else {
      for (; i + lanes <= total; i += lanes) {
        for (int64_t k = 0; k < lanes; ++k) acc[k] = Op::apply(acc[k], convert<Acc>(x[i + k]));
      }
    }
  }
  for (int64_t k = 0; i < total; ++i, ++k) {
    if (k == lanes) k = 0;
    acc[k] = Op::apply(acc[k], convert<Acc>(x[i]));
  }
  for (int64_t k = 0; k < lanes; ++k) {
    Acc& o = out[(k % period) * os];
    o = Op::apply(o, acc[k]);
  }
}

struct LoopDim {
  int64_t size;
  int64_t in_stride;
  int64_t out_stride; // 0 for a reduced dimension
  bool reduced;
};

// The loop nest of a reduction of `in` over `axes`, innermost last.
std::vector<LoopDim> plan_loops(const array& in, const std::vector<int>& axes) {
  const int nd = in.ndim();
  std::vector<bool> reduced(nd, false);
  for (int ax : axes) reduced[ax] = true;
  std::vector<int64_t> out_strides(nd, 0);
  int64_t step = 1;
  for (int d = nd - 1; d >= 0; --d) {
    if (!reduced[d]) {
      out_strides[d] = step;
      step *= in.shape(d);
    }
  }
  std::vector<LoopDim> dims;
  for (int d = 0; d < nd; ++d) {
    if (in.shape(d) == 1) continue;
    dims.push_back({in.shape(d), in.strides()[d], out_strides[d], reduced[d]});
  }
  // Larger input steps outside; broadcast dimensions (step 0) outermost.
  auto key = [](const LoopDim& d) {
    return d.in_stride == 0 ? std::numeric_limits<int64_t>::max() : std::abs(d.in_stride);
  };
  std::stable_sort(dims.begin(), dims.end(),
                   [&](const LoopDim& a, const LoopDim& b) { return key(a) > key(b); });
  std::vector<LoopDim> merged;
  for (const LoopDim& d : dims) {
    if (!merged.empty()) {
      LoopDim& p = merged.back();
      if (p.reduced == d.reduced && p.in_stride == d.in_stride * d.size &&
          p.out_stride == d.out_stride * d.size) {
        p.size *= d.size;
        p.in_stride = d.in_stride;
        p.out_stride = d.out_stride;
        continue;
      }
    }
    merged.push_back(d);
  }
  if (merged.empty()) merged.push_back({1, 0, 0, true});
  return merged;
}

// Runs the whole loop nest sequentially. The innermost dimension, or the two
// innermost when they form a column block (reduced rows over kept columns),
// go to one of the run kernels above.
template <typename Op, typename Acc, typename In>
void run_loops(const std::vector<LoopDim>& dims, const In* in, Acc* out) {
  const int n = static_cast<int>(dims.size());
  const LoopDim& inner = dims.back();
  const bool block = n >= 2 && !inner.reduced && dims[n - 2].reduced;
  const LoopDim& rows = dims[n >= 2 ? n - 2 : 0];
  const bool periodic = block && inner.in_stride == 1 && rows.in_stride == inner.size &&
                        inner.size <= kPeriodicLanes<Acc>;
  // Short contiguous rows, each reduced into its own output.
  const bool short_rows =
      n >= 2 && inner.reduced && !dims[n - 2].reduced && inner.in_stride == 1 && inner.size <= 64;
  auto process = [&](const In* x, Acc* o) {
    if (short_rows) {
      reduce_short_rows<Op, Acc>(o, rows.out_stride, x, inner.size, rows.size, rows.in_stride);
    } else if (periodic) {
      reduce_periodic<Op, Acc>(o, inner.out_stride, x, inner.size, rows.size);
    } else if (block) {
      accumulate_rows<Op, Acc>(o, inner.out_stride, x, inner.in_stride, inner.size, rows.size,
                               rows.in_stride);
    } else if (inner.reduced) {
      *o = Op::apply(*o, reduce_run<Op, Acc>(x, inner.size, inner.in_stride));
    } else {
      accumulate_run<Op, Acc>(o, inner.out_stride, x, inner.in_stride, inner.size);
    }
  };
  const int outer = n - (block || short_rows ? 2 : 1);
  if (outer == 0) {
    process(in, out);
    return;
  }
  std::vector<int64_t> idx(outer, 0);
  int64_t in_off = 0;
  int64_t out_off = 0;
  for (;;) {
    process(in + in_off, out + out_off);
    int d = outer - 1;
    for (; d >= 0; --d) {
      in_off += dims[d].in_stride;
      out_off += dims[d].out_stride;
      if (++idx[d] < dims[d].size) break;
      in_off -= dims[d].in_stride * dims[d].size;
      out_off -= dims[d].out_stride * dims[d].size;
      idx[d] = 0;
    }
    if (d < 0) break;
  }
}

// Column reductions sweep the reduced rows tile by tile of outputs.
template <typename Op, typename Acc, typename In>
void run_tiled(std::vector<LoopDim> dims, const In* in, Acc* out) {
  LoopDim& inner = dims.back();
  if (inner.reduced || dims.size() == 1 || inner.size <= kColumnTile) {
    run_loops<Op>(dims, in, out);
    return;
  }
  const LoopDim whole = inner;
  for (int64_t t = 0; t < whole.size; t += kColumnTile) {
    inner.size = std::min(kColumnTile, whole.size - t);
    run_loops<Op>(dims, in + t * whole.in_stride, out + t * whole.out_stride);
  }
}

template <typename Acc>
std::unique_ptr<Acc[]> filled(int64_t n, Acc value) {
  std::unique_ptr<Acc[]> buf(new Acc[std::max<int64_t>(n, 1)]);
  std::fill(buf.get(), buf.get() + n, value);
  return buf;
}

// Reduces `in` into `out` (out_size accumulators, already holding the identity).
template <typename Op, typename Acc, typename In>
void reduce_into(const std::vector<LoopDim>& dims, const In* in, Acc* out, int64_t out_size,
                 int64_t total) {
  if (total == 0) return;
  const int64_t threads = cpu::num_threads();
  if (threads == 1 || total < 2 * kGrain) {
    run_tiled<Op>(dims, in, out);
    return;
  }
  // Split an outer kept dimension when it gives every thread a few slices.
  // The innermost one is not split while partial results are cheap: chunks
  // of whole contiguous rows stream better than slices of every row.
  int split = -1;
  for (size_t d = 0; d + 1 < dims.size(); ++d) {
    if (!dims[d].reduced && dims[d].size >= 4 * threads) {
      split = static_cast<int>(d);
      break;
    }
  }
  if (split < 0 && out_size <= kGrain) {
    // Few outputs: every chunk reduces part of the largest reduced dimension
    // into its own partial result.
    int r = -1;
    for (size_t d = 0; d < dims.size(); ++d) {
      if (dims[d].reduced && (r < 0 || dims[d].size > dims[r].size)) r = static_cast<int>(d);
    }
    const int64_t len = dims[r].size;
    const int64_t chunks = std::min(threads, len);
    if (chunks > 1) {
      // Each chunk's partial result starts on its own cache line.
      constexpr int64_t kLine = std::max<int64_t>(1, 64 / sizeof(Acc));
      const int64_t pitch = (out_size + kLine - 1) / kLine * kLine;
      auto partial = filled<Acc>(chunks * pitch, Op::template identity<Acc>());
      cpu::parallel_for(chunks, 1, [&](size_t cb, size_t ce) {
        for (size_t c = cb; c < ce; ++c) {
          int64_t begin = len * static_cast<int64_t>(c) / chunks;
          int64_t end = len * static_cast<int64_t>(c + 1) / chunks;
          std::vector<LoopDim> sub = dims;
          sub[r].size = end - begin;
          run_tiled<Op>(sub, in + begin * dims[r].in_stride, partial.get() + c * pitch);
        }
      });
      for (int64_t c = 0; c < chunks; ++c) {
        const Acc* p = partial.get() + c * pitch;
        for (int64_t i = 0; i < out_size; ++i) out[i] = Op::apply(out[i], p[i]);
      }
      return;
    }
  }
  if (split < 0) {
    for (size_t d = 0; d < dims.size(); ++d) {
      if (!dims[d].reduced && (split < 0 || dims[d].size > dims[split].size)) {
        split = static_cast<int>(d);
      }
    }
  }
  if (split < 0) {
    run_tiled<Op>(dims, in, out);
    return;
  }
  const LoopDim s = dims[split];
  const size_t grain = std::max<int64_t>(1, kGrain / std::max<int64_t>(1, total / s.size));
  cpu::parallel_for(s.size, grain, [&](size_t b, size_t e) {
    std::vector<LoopDim> sub = dims;
    sub[split].size = static_cast<int64_t>(e - b);
    run_tiled<Op>(sub, in + static_cast<int64_t>(b) * s.in_stride,
                  out + static_cast<int64_t>(b) * s.out_stride);
  });
}

template <typename Op, typename In>
void reduce_dispatch(const array& in, array& out, const std::vector<int>& axes) {
  using Out = typename Op::template out_t<In>;
  using Acc = acc_of<Out>;
  if (out.itemsize() != sizeof(Out)) {
    throw std::logic_error("[reduce] Unexpected output dtype for this reduction.");
  }
  out.set_data(allocator::allocate(out.nbytes()));
  const int64_t out_size = static_cast<int64_t>(out.size());
  if (out_size == 0) return;
  auto dims = plan_loops(in, axes);
  Out* out_ptr = out.data<Out>();
  const In* in_ptr = in.data<In>();
  if constexpr (std::is_same_v<Acc, Out>) {
    std::fill(out_ptr, out_ptr + out_size, Op::template identity<Acc>());
    reduce_into<Op>(dims, in_ptr, out_ptr, out_size, static_cast<int64_t>(in.size()));
  } else {
    auto acc = filled<Acc>(out_size, Op::template identity<Acc>());
    reduce_into<Op>(dims, in_ptr, acc.get(), out_size, static_cast<int64_t>(in.size()));
    for (int64_t i = 0; i < out_size; ++i) out_ptr[i] = convert<Out>(acc[i]);
  }
}

template <typename Op>
void reduce(const array& in, array& out, const std::vector<int>& axes) {
  dispatch(in.dtype(), [&](auto tag) {
    using In = typename decltype(tag)::type;
    reduce_dispatch<Op, In>(in, out, axes);
  });
}

// --- ArgReduce ---------------------------------------------------------------

// True when x should replace the current best: strictly more extreme, or the
// first NaN (which then stays, as in NumPy and MLX). Branch-free for the
// vectorised column scan.
template <bool IsMax, typename C>
inline bool better(C x, C best) {
  bool more = IsMax ? greater(x, best) : greater(best, x);
  if constexpr (std::is_floating_point_v<C> || is_complex_v<C>) {
    return (more & !is_nan(best)) | (is_nan(x) & !is_nan(best));
  } else {
    return more;
  }
}

// First index in [begin, end) of an element equal to v (known to exist).
template <typename C>
int64_t find_equal(const C* x, int64_t begin, int64_t end, C v) {
  constexpr int64_t kChunk = 64;
  int64_t i = begin;
  for (; i + kChunk <= end; i += kChunk) {
    int hits = 0; // an integer sum vectorises, a bool "or" does not
    for (int64_t k = 0; k < kChunk; ++k) hits += x[i + k] == v;
    if (hits != 0) break;
  }
  for (; i < end; ++i) {
    if (x[i] == v) return i;
  }
  return end;
}

// Index of the extreme of n contiguous elements (n > 0), and the extreme.
template <bool IsMax, typename C>
std::pair<C, int64_t> arg_contiguous_acc(const C* x, int64_t n) {
  C best = x[0];
  int64_t best_i = 0;
  if (is_nan(best)) return {best, 0};
  if constexpr (std::is_arithmetic_v<C>) {
    // Block by block (in L1): a vectorised pass finds the block's extreme and
    // whether it holds a NaN; a better extreme is then located by a search
    // for its first occurrence. Only a block with a NaN is scanned serially.
    constexpr int kLanes = std::max<int>(1, 128 / sizeof(C));
    constexpr int64_t kBlock = 4096 / sizeof(C) * 4;
    using Flag = std::conditional_t<sizeof(C) == 8, int64_t,
                                    std::conditional_t<sizeof(C) == 4, int32_t, int8_t>>;
    for (int64_t b0 = 0; b0 < n; b0 += kBlock) {
      const int64_t e = std::min(n, b0 + kBlock);
      C m[kLanes];
      Flag nan[kLanes];
      for (int k = 0; k < kLanes; ++k) {
        m[k] = x[b0];
        nan[k] = 0;
      }
      int64_t i = b0;
      for (; i + kLanes <= e; i += kLanes) {
        for (int k = 0; k < kLanes; ++k) {
          C v = x[i + k];
          m[k] = IsMax ? (v > m[k] ? v : m[k]) : (v < m[k] ? v : m[k]);
          if constexpr (std::is_floating_point_v<C>) nan[k] |= static_cast<Flag>(v != v);
        }
      }
      C mb = m[0];
      bool has_nan = false;
      for (int k = 0; k < kLanes; ++k) {
        mb = IsMax ? (m[k] > mb ? m[k] : mb) : (m[k] < mb ? m[k] : mb);
        has_nan |= nan[k] != 0;
      }
      for (; i < e; ++i) {
        C v = x[i];
        mb = IsMax ? (v > mb ? v : mb) : (v < mb ? v : mb);
        has_nan |= is_nan(v);
      }
      if (has_nan) {
        for (int64_t j = b0; j < e; ++j) {
          if (is_nan(x[j])) return {x[j], j};
        }
      }
      if (better<IsMax>(mb, best)) {
        best = mb;
        best_i = find_equal(x, b0, e, mb);
      }
    }
  } else {
    for (int64_t i = 1; i < n; ++i) {
      if (better<IsMax>(x[i], best)) {
        best = x[i];
        best_i = i;
      }
    }
  }
  return {best, best_i};
}

// As above for any element type (half types through float blocks).
template <bool IsMax, typename T>
std::pair<acc_of<T>, int64_t> arg_contiguous(const T* x, int64_t n) {
  using C = acc_of<T>;
  if constexpr (std::is_same_v<C, T>) {
    return arg_contiguous_acc<IsMax>(x, n);
  } else {
    C buf[kConvertBlock];
    std::pair<C, int64_t> best{C(0), -1};
    for (int64_t b = 0; b < n; b += kConvertBlock) {
      const int64_t len = std::min(kConvertBlock, n - b);
      convert_block(x + b, buf, len);
      auto [v, i] = arg_contiguous_acc<IsMax>(buf, len);
      if (best.second < 0 || better<IsMax>(v, best.first)) best = {v, b + i};
      if (is_nan(best.first)) break;
    }
    return best;
  }
}

template <bool IsMax, typename T>
uint32_t arg_strided(const T* x, int64_t n, int64_t stride) {
  if (stride == 1) return static_cast<uint32_t>(arg_contiguous<IsMax>(x, n).second);
  using C = acc_of<T>;
  C best = static_cast<C>(x[0]);
  int64_t best_i = 0;
  for (int64_t i = 1; i < n; ++i) {
    C v = static_cast<C>(x[i * stride]);
    if (better<IsMax>(v, best)) {
      best = v;
      best_i = i;
    }
  }
  return static_cast<uint32_t>(best_i);
}

// `count` neighbouring outputs whose inputs are adjacent in memory: scan the
// reduced axis once, comparing whole rows (vectorised across the run).
template <bool IsMax, typename T>
void arg_columns(const T* x, int64_t n, int64_t axis_stride, int64_t count, uint32_t* out,
                 int64_t out_stride) {
  using C = acc_of<T>;
  constexpr int64_t kTile = 4096;
  C best[kTile];
  uint32_t idx[kTile];
  C row_buf[kTile];
  for (int64_t t = 0; t < count; t += kTile) {
    const int64_t m = std::min(kTile, count - t);
    const T* base = x + t;
    convert_block(base, best, m);
    for (int64_t j = 0; j < m; ++j) idx[j] = 0;
    for (int64_t i = 1; i < n; ++i) {
      const C* row;
      if constexpr (std::is_same_v<C, T>) {
        row = base + i * axis_stride;
      } else {
        convert_block(base + i * axis_stride, row_buf, m);
        row = row_buf;
      }
      const uint32_t ui = static_cast<uint32_t>(i);
      for (int64_t j = 0; j < m; ++j) {
        C v = row[j];
        bool take = better<IsMax>(v, best[j]);
        best[j] = take ? v : best[j];
        idx[j] = take ? ui : idx[j];
      }
    }
    for (int64_t j = 0; j < m; ++j) out[(t + j) * out_stride] = idx[j];
  }
}

// The whole array in row-major order: chunks in parallel, then the earliest
// best chunk wins (ties and NaN keep the first index).
template <bool IsMax, typename T>
uint32_t arg_flat(const T* x, int64_t n) {
  using C = acc_of<T>;
  const int64_t chunks = std::min<int64_t>(cpu::num_threads(), (n + kGrain - 1) / kGrain);
  if (chunks <= 1) return static_cast<uint32_t>(arg_contiguous<IsMax>(x, n).second);
  std::vector<std::pair<C, int64_t>> results(chunks);
  cpu::parallel_for(chunks, 1, [&](size_t cb, size_t ce) {
    for (size_t c = cb; c < ce; ++c) {
      const int64_t begin = n * static_cast<int64_t>(c) / chunks;
      const int64_t end = n * static_cast<int64_t>(c + 1) / chunks;
      auto r = arg_contiguous<IsMax>(x + begin, end - begin);
      results[c] = {r.first, begin + r.second};
    }
  });
  auto best = results[0];
  for (int64_t c = 1; c < chunks; ++c) {
    if (better<IsMax>(results[c].first, best.first)) best = results[c];
  }
  return static_cast<uint32_t>(best.second);
}

template <bool IsMax, typename T>
void arg_reduce(const array& in, array& out, int axis) {
  uint32_t* o = out.data<uint32_t>();
  if (axis == ArgReduce::kAllAxes) {
    array flat = cpu::ensure_row_contiguous(in);
    o[0] = arg_flat<IsMax>(flat.data<T>(), static_cast<int64_t>(flat.size()));
    return;
  }
  const int64_t n = in.shape(axis);
  const int64_t axis_stride = in.strides()[axis];
  // The other dimensions, with input strides and row-major output strides.
  Shape outer_shape;
  Strides in_strides;
  Strides out_strides;
  for (int d = 0; d < in.ndim(); ++d) {
    if (d == axis) continue;
    outer_shape.push_back(in.shape(d));
    in_strides.push_back(in.strides()[d]);
  }
  out_strides = row_major_strides(outer_shape);
  auto layout = cpu::collapse<2>(outer_shape, {in_strides, out_strides});
  const T* x = in.data<T>();
  const size_t outer = shape_size(outer_shape);
  const size_t grain = std::max<int64_t>(1, kGrain / std::max<int64_t>(1, n));
  cpu::parallel_for(outer, grain, [&](size_t b, size_t e) {
    cpu::for_each_run<2>(layout, b, e, [&](auto off, int64_t count, auto st) {
      if (count > 1 && st[0] == 1 && axis_stride != 1) {
        arg_columns<IsMax>(x + off[0], n, axis_stride, count, o + off[1], st[1]);
      } else {
        for (int64_t j = 0; j < count; ++j) {
          o[off[1] + j * st[1]] = arg_strided<IsMax>(x + off[0] + j * st[0], n, axis_stride);
        }
      }
    });
  });
}

} // namespace

void Reduce::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& in = inputs[0];
  array& out = outputs[0];
  switch (type_) {
    case And:
      reduce<AndOp>(in, out, axes_);
      break;
    case Or:
      reduce<OrOp>(in, out, axes_);
      break;
    case Sum:
      reduce<SumOp>(in, out, axes_);
      break;
    case Prod:
      reduce<ProdOp>(in, out, axes_);
      break;
    case Min:
      reduce<MinOp>(in, out, axes_);
      break;
    case Max:
      reduce<MaxOp>(in, out, axes_);
      break;
  }
}

void ArgReduce::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& in = inputs[0];
  array& out = outputs[0];
  out.set_data(allocator::allocate(out.nbytes()));
  if (out.size() == 0) return;
  if (in.size() == 0) {
    throw std::invalid_argument(std::string("[") + (type_ == ArgMax ? "argmax" : "argmin") +
                                "] Cannot " + (type_ == ArgMax ? "argmax" : "argmin") +
                                " reduce zero size array.");
  }
  dispatch(in.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (type_ == ArgMax) {
      arg_reduce<true, T>(in, out, axis_);
    } else {
      arg_reduce<false, T>(in, out, axis_);
    }
  });
}

} // namespace loom
