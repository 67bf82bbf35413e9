// CPU kernel of RandomBits: Threefry words turned into bits, uniform or
// normal samples in one pass, split across the thread pool by counter range.
#include "loom/primitives/random.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "loom/backend/cpu/copy.h"
#include "loom/backend/cpu/thread_pool.h"
#include "loom/types/dispatch.h"

namespace loom {

namespace {

constexpr size_t kGrain = 1 << 14; // hash blocks per task (each ~100 operations)

constexpr size_t kLanes = 64; // counters hashed together (one vectorised loop)

// Hashes the counters (c0 + i, c1 + i), i < n, into x0[i], x1[i]. A plain
// loop over independent lanes so the compiler vectorises the rounds.
void hash_lanes(uint32_t k0, uint32_t k1, uint32_t c0, uint32_t c1, size_t n, uint32_t* x0,
                uint32_t* x1) {
  for (size_t i = 0; i < n; ++i) {
    auto [a, b] =
        threefry::hash(k0, k1, c0 + static_cast<uint32_t>(i), c1 + static_cast<uint32_t>(i));
    x0[i] = a;
    x1[i] = b;
  }
}

// Produces the n_words words of every key in the layout documented in
// primitives/random.h, handing them to put(key, first_word, words, count) in
// runs of consecutive words.
template <typename Put>
void threefry_words(const uint32_t* keys, size_t num_keys, size_t n_words, const Put& put) {
  if (n_words == 0 || num_keys == 0) return;
  const size_t half = n_words / 2;
  const size_t odd = n_words % 2;
  const size_t blocks = half + odd;
  cpu::parallel_for(num_keys * blocks, kGrain, [&](size_t begin, size_t end) {
    alignas(64) uint32_t x0[kLanes];
    alignas(64) uint32_t x1[kLanes];
    size_t idx = begin;
    while (idx < end) {
      const size_t key = idx / blocks;
      const size_t first = idx % blocks;
      const size_t stop = std::min(blocks, first + (end - idx));
      const uint32_t k0 = keys[2 * key];
      const uint32_t k1 = keys[2 * key + 1];
      const size_t pair_stop = std::min(stop, half);
      for (size_t j = first; j < pair_stop; j += kLanes) {
        const size_t n = std::min(kLanes, pair_stop - j);
        hash_lanes(k0, k1, static_cast<uint32_t>(j), static_cast<uint32_t>(j + half + odd), n, x0,
                   x1);
        put(key, j, x0, n);
        put(key, j + half + odd, x1, n);
      }
      if (odd && stop == blocks) {
        x0[0] = threefry::hash(k0, k1, static_cast<uint32_t>(half), 0).first;
        put(key, half, x0, 1);
      }
      idx += stop - first;
    }
  });
}

// [0, 1): float32(w) / float32(2^32 - 1) (that float is 2^32, so the division
// is exact), clamped below 1.
inline float word_to_uniform(uint32_t w) {
  return std::min(static_cast<float>(w) * 0x1p-32f, 0x1.fffffep-1f);
}

// Inverse error function, single precision: a degree-8/9 polynomial in
// log(1 - x^2) on two ranges (coefficients from N. Juffa's published
// minimax fit), about 2 ulp.
inline float erfinv_poly(float a, float t) {
  float tail = 3.03697567e-10f;
  tail = std::fma(tail, t, 2.93243101e-8f);
  tail = std::fma(tail, t, 1.22150334e-6f);
  tail = std::fma(tail, t, 2.84108955e-5f);
  tail = std::fma(tail, t, 3.93552968e-4f);
  tail = std::fma(tail, t, 3.02698812e-3f);
  tail = std::fma(tail, t, 4.83185798e-3f);
  tail = std::fma(tail, t, -2.64646143e-1f);
  tail = std::fma(tail, t, 8.40016484e-1f);
  float center = 5.43877832e-9f;
  center = std::fma(center, t, 1.43285448e-7f);
  center = std::fma(center, t, 1.22774793e-6f);
  center = std::fma(center, t, 1.12963626e-7f);
  center = std::fma(center, t, -5.61530760e-5f);
  center = std::fma(center, t, -1.47697632e-4f);
  center = std::fma(center, t, 2.31468678e-3f);
  center = std::fma(center, t, 1.15392581e-2f);
  center = std::fma(center, t, -2.32015476e-1f);
  center = std::fma(center, t, 8.86226892e-1f);
  return a * (std::fabs(t) > 6.125f ? tail : center);
}

inline float erfinv_f32(float a) { return erfinv_poly(a, std::log(std::fma(a, -a, 1.0f))); }

// The uniform variate mapped into (-1, 1) the way MLX does:
// (1 - (1 - 2^-24)) * u + (-(1 - 2^-24)), where the range rounds to 2.
inline float word_to_symmetric(uint32_t w) { return 2.0f * word_to_uniform(w) - 0x1.fffffep-1f; }

// sqrt(2) * erfinv(symmetric(w)) * scale over a run of at most kLanes words.
// Separate loops: GCC vectorises each (the logarithm, glibc's logf for values
// identical to MLX's, stays scalar) but not their fusion.
template <typename T>
void words_to_normal(const uint32_t* w, size_t n, T* out, float scale = 1.0f) {
  alignas(64) float s[kLanes];
  alignas(64) float t[kLanes];
  for (size_t i = 0; i < n; ++i) s[i] = word_to_symmetric(w[i]);
  for (size_t i = 0; i < n; ++i) t[i] = std::fma(s[i], -s[i], 1.0f);
  for (size_t i = 0; i < n; ++i) t[i] = std::log(t[i]);
  for (size_t i = 0; i < n; ++i)
    s[i] = static_cast<float>(M_SQRT2) * erfinv_poly(s[i], t[i]) * scale;
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<T>(s[i]);
}

// Double precision: two Newton steps on erf from the float estimate.
inline double word_to_normal_f64(uint32_t w) {
  const double y = word_to_symmetric(w);
  double x = erfinv_f32(static_cast<float>(y));
  if (std::isfinite(x)) {
    for (int i = 0; i < 2; ++i) {
      x -= (std::erf(x) - y) / (M_2_SQRTPI * std::exp(-x * x));
    }
  }
  return M_SQRT2 * x;
}

// The largest value below one in T (uniform samples stay in [0, 1)).
template <typename T>
T below_one() {
  if constexpr (std::is_same_v<T, float16_t>) {
    return T(0.99951171875f);
  } else if constexpr (std::is_same_v<T, bfloat16_t>) {
    return T(0.99609375f);
  } else {
    return std::nextafter(T(1), T(0));
  }
}

} // namespace

void RandomBits::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array keys = cpu::ensure_row_contiguous(inputs[0]);
  array& out = outputs[0];
  out.set_data(allocator::allocate(out.nbytes()));
  const size_t num_keys = keys.size() / 2;
  if (num_keys == 0 || out.size() == 0) return;
  const size_t per_key = out.size() / num_keys; // elements per key
  const uint32_t* key_data = keys.data<uint32_t>();

  if (dist_ == RandomDistribution::bits) {
    const size_t bytes = per_key * out.itemsize();
    if (bytes % 4 == 0) {
      uint32_t* dst = out.data<uint32_t>();
      const size_t words = bytes / 4;
      threefry_words(key_data, num_keys, words,
                     [=](size_t k, size_t j, const uint32_t* w, size_t n) {
                       std::memcpy(dst + k * words + j, w, n * 4);
                     });
    } else {
      // Byte-sized elements: the key's bytes are the first `bytes` bytes of
      // its words.
      char* dst = out.data<char>();
      threefry_words(key_data, num_keys, (bytes + 3) / 4,
                     [=](size_t k, size_t j, const uint32_t* w, size_t n) {
                       const size_t at = 4 * j;
                       std::memcpy(dst + k * bytes + at, w, std::min(4 * n, bytes - at));
                     });
    }
    return;
  }

  if (dist_ == RandomDistribution::normal && out.dtype() == complex64) {
    float* dst = reinterpret_cast<float*>(out.data<complex64_t>());
    const size_t words = 2 * per_key;
    const float scale = static_cast<float>(M_SQRT1_2);
    threefry_words(key_data, num_keys, words, [=](size_t k, size_t j, const uint32_t* w, size_t n) {
      words_to_normal(w, n, dst + k * words + j, scale);
    });
    return;
  }

  dispatch(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, float16_t> ||
                  std::is_same_v<T, bfloat16_t>) {
      T* dst = out.data<T>();
      if (dist_ == RandomDistribution::uniform) {
        const T top = below_one<T>();
        threefry_words(key_data, num_keys, per_key,
                       [=](size_t k, size_t j, const uint32_t* w, size_t n) {
                         T* o = dst + k * per_key + j;
                         if constexpr (std::is_same_v<T, float>) {
                           for (size_t i = 0; i < n; ++i) o[i] = word_to_uniform(w[i]);
                         } else {
                           for (size_t i = 0; i < n; ++i) {
                             T u = static_cast<T>(word_to_uniform(w[i]));
                             o[i] = static_cast<float>(u) < 1.0f ? u : top;
                           }
                         }
                       });
      } else if constexpr (std::is_same_v<T, double>) {
        threefry_words(key_data, num_keys, per_key,
                       [=](size_t k, size_t j, const uint32_t* w, size_t n) {
                         double* o = dst + k * per_key + j;
                         for (size_t i = 0; i < n; ++i) o[i] = word_to_normal_f64(w[i]);
                       });
      } else {
        threefry_words(key_data, num_keys, per_key,
                       [=](size_t k, size_t j, const uint32_t* w, size_t n) {
                         words_to_normal(w, n, dst + k * per_key + j);
                       });
      }
    } else {
      throw std::invalid_argument(std::string("[") + name() + "] Unsupported output type.");
    }
  });
}

} // namespace loom
