// CPU kernels of Sort/ArgSort/ArgPartition. Each row along the axis is
// copied into a contiguous scratch buffer (so the comparisons run on cached
// data), sorted there, and written out; rows run in parallel, and a single
// long row is sorted in parallel chunks that are then merged.
#include "loom/primitives/sort.h"

#include <algorithm>
#include <complex>
#include <cstring>
#include <memory>
#include <numeric>
#include <type_traits>
#include <vector>

#include "loom/backend/cpu/copy.h"
#include "loom/backend/cpu/thread_pool.h"
#include "loom/types/dispatch.h"

#if defined(__AVX__)
#include <immintrin.h>
#endif

namespace loom {

namespace {

// Ascending with NaN after everything (NumPy's and MLX's order); complex
// numbers compare by real part, then imaginary part.
template <typename T>
struct NanLast {
  bool operator()(const T& a, const T& b) const {
    if constexpr (std::is_same_v<T, std::complex<float>>) {
      if (a.real() != b.real()) return NanLast<float>()(a.real(), b.real());
      return NanLast<float>()(a.imag(), b.imag());
    } else if constexpr (std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>) {
      return NanLast<float>()(static_cast<float>(a), static_cast<float>(b));
    } else if constexpr (std::is_floating_point_v<T>) {
      return a < b || (b != b && a == a);
    } else {
      return a < b;
    }
  }
};

// Sorts [first, last) with `less` on the pool: chunks sorted in parallel,
// then merged pairwise, level by level.
template <typename T, typename Less>
void parallel_sort(T* first, size_t n, Less less, bool stable) {
  int threads = cpu::num_threads();
  if (n < (1 << 16) || threads < 2) {
    stable ? std::stable_sort(first, first + n, less) : std::sort(first, first + n, less);
    return;
  }
  size_t chunks = 1;
  while (chunks < static_cast<size_t>(threads)) chunks *= 2;
  std::vector<size_t> bounds(chunks + 1);
  for (size_t c = 0; c <= chunks; ++c) bounds[c] = n * c / chunks;
  cpu::parallel_for(chunks, 1, [&](size_t b, size_t e) {
    for (size_t c = b; c < e; ++c) {
      stable ? std::stable_sort(first + bounds[c], first + bounds[c + 1], less)
             : std::sort(first + bounds[c], first + bounds[c + 1], less);
    }
  });
  std::unique_ptr<T[]> scratch(new T[n]);
  T* src = first;
  T* dst = scratch.get();
  for (size_t width = 1; width < chunks; width *= 2) {
    size_t pairs = chunks / (2 * width);
    cpu::parallel_for(pairs, 1, [&](size_t b, size_t e) {
      for (size_t p = b; p < e; ++p) {
        size_t lo = bounds[2 * p * width], mid = bounds[(2 * p + 1) * width],
               hi = bounds[(2 * p + 2) * width];
        std::merge(src + lo, src + mid, src + mid, src + hi, dst + lo, less);
      }
    });
    std::swap(src, dst);
  }
  if (src != first) std::memcpy(first, src, n * sizeof(T));
}

// Order-preserving map of a 4-byte value to an unsigned key: ascending keys
// are ascending values, every NaN maps to the largest key (NaN last).
// With `equal_zeros`, -0.0 and 0.0 get one key (argsort keeps their input
// order, as a comparison sort does); the values sort keeps -0.0 first so the
// sign of each zero survives.
template <typename T>
uint32_t radix_key(T v, bool equal_zeros = false) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  if constexpr (std::is_same_v<T, float>) {
    if (v != v) return 0xffffffffu;
    if (equal_zeros && v == 0) return 0x80000000u;
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  } else if constexpr (std::is_signed_v<T>) {
    return u ^ 0x80000000u;
  } else {
    return u;
  }
}

template <typename T>
T radix_value(uint32_t k) {
  uint32_t u;
  if constexpr (std::is_same_v<T, float>) {
    u = (k & 0x80000000u) ? (k & 0x7fffffffu) : ~k;
  } else if constexpr (std::is_signed_v<T>) {
    u = k ^ 0x80000000u;
  } else {
    u = k;
  }
  T v;
  std::memcpy(&v, &u, 4);
  return v;
}

// Stable LSD radix sort of n keys (8-bit digits) carrying an optional
// payload, on the pool: per-chunk histograms, then each chunk scatters its
// elements in order, so equal keys keep their order (argsort's stability).
// A digit shared by every key is skipped.
void radix_sort(uint32_t* keys, uint32_t* payload, size_t n) {
  size_t chunks = std::max(1, cpu::num_threads());
  std::unique_ptr<uint32_t[]> kbuf(new uint32_t[n]);
  std::unique_ptr<uint32_t[]> pbuf(payload ? new uint32_t[n] : nullptr);
  uint32_t *ksrc = keys, *kdst = kbuf.get(), *psrc = payload, *pdst = pbuf.get();
  std::vector<size_t> hist(chunks * 256);
  auto lo = [&](size_t c) { return n * c / chunks; };
  for (int shift = 0; shift < 32; shift += 8) {
    std::fill(hist.begin(), hist.end(), 0);
    cpu::parallel_for(chunks, 1, [&](size_t b, size_t e) {
      for (size_t c = b; c < e; ++c) {
        size_t* h = &hist[c * 256];
        for (size_t i = lo(c); i < lo(c + 1); ++i) ++h[(ksrc[i] >> shift) & 0xff];
      }
    });
    // Skip a digit every key shares.
    std::vector<size_t> total(256, 0);
    for (size_t c = 0; c < chunks; ++c) {
      for (int d = 0; d < 256; ++d) total[d] += hist[c * 256 + d];
    }
    if (std::find(total.begin(), total.end(), n) != total.end()) continue;
    // Start of each (digit, chunk) run in the output.
    size_t run = 0;
    for (int d = 0; d < 256; ++d) {
      for (size_t c = 0; c < chunks; ++c) {
        size_t count = hist[c * 256 + d];
        hist[c * 256 + d] = run;
        run += count;
      }
    }
    cpu::parallel_for(chunks, 1, [&](size_t b, size_t e) {
      for (size_t c = b; c < e; ++c) {
        size_t* h = &hist[c * 256];
        for (size_t i = lo(c); i < lo(c + 1); ++i) {
          size_t pos = h[(ksrc[i] >> shift) & 0xff]++;
          kdst[pos] = ksrc[i];
          if (psrc) pdst[pos] = psrc[i];
        }
      }
    });
    std::swap(ksrc, kdst);
    std::swap(psrc, pdst);
  }
  if (ksrc != keys) {
    std::memcpy(keys, ksrc, n * 4);
    if (payload) std::memcpy(payload, psrc, n * 4);
  }
}

// A partition whose pivot is among the few largest (topk) or smallest
// elements: one pass with a heap of those few instead of nth_element over all
// the indices. The few go, sorted, to their side of the pivot; the rest keep
// their order on the other side. Returns false when the side is not small.
template <typename T, typename Less>
bool select_few(const T* row, int64_t n, int64_t kth, uint32_t* idx, Less less) {
  constexpr int64_t kFew = 64;
  int64_t top = n - kth; // elements from the pivot to the end
  bool high = top <= kFew;
  int64_t few = high ? top : kth + 1;
  if (few > kFew || few * 8 > n) return false;
  // high: keep the `few` largest (the heap's front is the smallest of them);
  // low: the `few` smallest (front is the largest).
  auto worse = [&](uint32_t x, uint32_t y) {
    return high ? less(row[y], row[x]) : less(row[x], row[y]);
  };
  std::vector<uint32_t> heap;
  heap.reserve(few);
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u = static_cast<uint32_t>(i);
    if (static_cast<int64_t>(heap.size()) < few) {
      heap.push_back(u);
      std::push_heap(heap.begin(), heap.end(), worse);
    } else if (high ? less(row[heap.front()], row[i]) : less(row[i], row[heap.front()])) {
      std::pop_heap(heap.begin(), heap.end(), worse);
      heap.back() = u;
      std::push_heap(heap.begin(), heap.end(), worse);
    }
  }
  std::vector<char> chosen(n, 0);
  for (uint32_t u : heap) chosen[u] = 1;
  std::sort(heap.begin(), heap.end(), [&](uint32_t x, uint32_t y) { return less(row[x], row[y]); });
  int64_t rest = high ? 0 : few;
  for (int64_t i = 0; i < n; ++i) {
    if (!chosen[i]) idx[rest++] = static_cast<uint32_t>(i);
  }
  std::copy(heap.begin(), heap.end(), idx + (high ? n - few : 0));
  return true;
}

// topk's selection: the k largest of a row (k small against the row) in
// ascending order, exactly as select_few leaves them at the end of
// argpartition's permutation (the same heap steps on the same elements).
// Float32 rows are screened a vector at a time against the smallest kept
// value, which only grows, so most elements cost one vector compare; NaN
// lanes pass the screen and meet the exact test.
template <typename T, typename Less>
bool top_few(const T* row, int64_t n, int64_t k, uint32_t* out, Less less,
             std::vector<uint32_t>& heap) {
  constexpr int64_t kFew = 64;
  if (k > kFew || k * 8 > n) return false;
  auto worse = [&](uint32_t x, uint32_t y) { return less(row[y], row[x]); };
  heap.clear();
  int64_t i = 0;
  for (; i < n && static_cast<int64_t>(heap.size()) < k; ++i) {
    heap.push_back(static_cast<uint32_t>(i));
    std::push_heap(heap.begin(), heap.end(), worse);
  }
  auto offer = [&](int64_t j) {
    if (less(row[heap.front()], row[j])) {
      std::pop_heap(heap.begin(), heap.end(), worse);
      heap.back() = static_cast<uint32_t>(j);
      std::push_heap(heap.begin(), heap.end(), worse);
    }
  };
  if constexpr (std::is_same_v<T, float>) {
#if defined(__AVX512F__)
    for (; i + 16 <= n; i += 16) {
      __m512 thr = _mm512_set1_ps(row[heap.front()]);
      uint32_t m = _mm512_cmp_ps_mask(_mm512_loadu_ps(row + i), thr, _CMP_NLE_UQ);
      for (; m; m &= m - 1) offer(i + __builtin_ctz(m));
    }
#elif defined(__AVX__)
    for (; i + 8 <= n; i += 8) {
      __m256 thr = _mm256_set1_ps(row[heap.front()]);
      uint32_t m = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(row + i), thr, _CMP_NLE_UQ));
      for (; m; m &= m - 1) offer(i + __builtin_ctz(m));
    }
#endif
  }
  for (; i < n; ++i) offer(i);
  std::sort(heap.begin(), heap.end(), [&](uint32_t x, uint32_t y) { return less(row[x], row[y]); });
  std::copy(heap.begin(), heap.end(), out);
  return true;
}

template <typename T>
constexpr bool radix_sortable =
    std::is_same_v<T, float> || std::is_same_v<T, int32_t> || std::is_same_v<T, uint32_t>;

} // namespace

void Sort::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array in = cpu::ensure_row_contiguous(inputs[0]);
  array& out = outputs[0];
  out.set_data(allocator::allocate(out.nbytes()));
  if (out.size() == 0) return;
  const int64_t n = in.shape(axis_);
  int64_t inner = 1;
  for (int d = axis_ + 1; d < in.ndim(); ++d) inner *= in.shape(d);
  const int64_t rows = static_cast<int64_t>(in.size()) / n;
  dispatch(in.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* src = in.data<T>();
    NanLast<T> less;
    auto row_base = [&](int64_t r) { return (r / inner) * n * inner + r % inner; };
    if (kind_ == Kind::values) {
      T* dst = out.data<T>();
      if (rows == 1) {
        if constexpr (radix_sortable<T>) {
          if (n >= (1 << 16)) {
            std::unique_ptr<uint32_t[]> keys(new uint32_t[n]);
            cpu::parallel_for(n, 1 << 16, [&](size_t b, size_t e) {
              for (size_t i = b; i < e; ++i) keys[i] = radix_key(src[i]);
            });
            radix_sort(keys.get(), nullptr, n);
            cpu::parallel_for(n, 1 << 16, [&](size_t b, size_t e) {
              for (size_t i = b; i < e; ++i) dst[i] = radix_value<T>(keys[i]);
            });
            return;
          }
        }
        std::memcpy(dst, src, n * sizeof(T));
        parallel_sort(dst, n, less, false);
        return;
      }
      size_t grain = std::max<int64_t>(1, (1 << 14) / n);
      cpu::parallel_for(rows, grain, [&](size_t b, size_t e) {
        std::unique_ptr<T[]> row(new T[n]);
        for (size_t r = b; r < e; ++r) {
          int64_t base = row_base(r);
          for (int64_t i = 0; i < n; ++i) row[i] = src[base + i * inner];
          std::sort(row.get(), row.get() + n, less);
          for (int64_t i = 0; i < n; ++i) dst[base + i * inner] = row[i];
        }
      });
      return;
    }
    uint32_t* dst = out.data<uint32_t>();
    auto by_value = [&](const T* row) {
      return [row, less](uint32_t x, uint32_t y) { return less(row[x], row[y]); };
    };
    if (kind_ == Kind::top_indices) {
      // Only the k indices of each row are written; a row that top_few
      // does not take gets argpartition's permutation and keeps its tail.
      const int64_t k = std::min<int64_t>(kth_, n);
      cpu::parallel_for(rows, std::max<int64_t>(1, (1 << 14) / n), [&](size_t b, size_t e) {
        std::unique_ptr<T[]> copy(inner == 1 ? nullptr : new T[n]);
        std::vector<uint32_t> heap, idx, top(k);
        for (size_t r = b; r < e; ++r) {
          int64_t base = row_base(r);
          const T* row = src + base;
          if (inner != 1) {
            for (int64_t i = 0; i < n; ++i) copy[i] = src[base + i * inner];
            row = copy.get();
          }
          if (!top_few(row, n, k, top.data(), less, heap)) {
            idx.resize(n);
            std::iota(idx.begin(), idx.end(), 0u);
            if (!select_few(row, n, n - k, idx.data(), less)) {
              std::nth_element(idx.begin(), idx.begin() + (n - k), idx.end(), by_value(row));
            }
            std::copy(idx.end() - k, idx.end(), top.begin());
          }
          int64_t out_base = (r / inner) * k * inner + r % inner;
          for (int64_t j = 0; j < k; ++j) dst[out_base + j * inner] = top[j];
        }
      });
      return;
    }
    if (rows == 1 && kind_ == Kind::indices) {
      std::iota(dst, dst + n, 0u);
      if constexpr (radix_sortable<T>) {
        if (n >= (1 << 16)) {
          std::unique_ptr<uint32_t[]> keys(new uint32_t[n]);
          cpu::parallel_for(n, 1 << 16, [&](size_t b, size_t e) {
            for (size_t i = b; i < e; ++i) keys[i] = radix_key(src[i], true);
          });
          radix_sort(keys.get(), dst, n);
          return;
        }
      }
      parallel_sort(dst, n, by_value(src), true);
      return;
    }
    size_t grain = std::max<int64_t>(1, (1 << 13) / n);
    cpu::parallel_for(rows, grain, [&](size_t b, size_t e) {
      std::unique_ptr<T[]> row(new T[n]);
      std::vector<uint32_t> idx(n);
      for (size_t r = b; r < e; ++r) {
        int64_t base = row_base(r);
        for (int64_t i = 0; i < n; ++i) row[i] = src[base + i * inner];
        std::iota(idx.begin(), idx.end(), 0u);
        if (kind_ == Kind::indices) {
          std::stable_sort(idx.begin(), idx.end(), by_value(row.get()));
        } else if (!select_few(row.get(), n, kth_, idx.data(), less)) {
          std::nth_element(idx.begin(), idx.begin() + kth_, idx.end(), by_value(row.get()));
        }
        for (int64_t i = 0; i < n; ++i) dst[base + i * inner] = idx[i];
      }
    });
  });
}

void SearchSorted::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array seq = cpu::ensure_row_contiguous(inputs[0]);
  array vals = cpu::ensure_row_contiguous(inputs[1]);
  array& out = outputs[0];
  out.set_data(allocator::allocate(out.nbytes()));
  if (out.size() == 0) return;
  dispatch(seq.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* s = seq.data<T>();
    const T* v = vals.data<T>();
    uint32_t* dst = out.data<uint32_t>();
    size_t n = seq.size();
    NanLast<T> less;
    cpu::parallel_for(out.size(), 1 << 12, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) {
        const T* pos = right_ ? std::upper_bound(s, s + n, v[i], less)
                              : std::lower_bound(s, s + n, v[i], less);
        dst[i] = static_cast<uint32_t>(pos - s);
      }
    });
  });
}

} // namespace loom
