// CPU kernels of QuantizedMatmul and GatherQMM.
//
// Few rows of x against w^T (a decode step's matrix-vector product) read the
// packed codes once and never materialise the float weight: for affine codes
// of 2 to 8 bits each run of eight codes is unpacked into vector lanes, multiplied
// with x and accumulated per group, and the group's scale and bias enter
// once, through  sum_j (s q_j + b) x_j = s (q . x) + b (sum_j x_j).  Rows of w
// are split over the intra-op pool. That reads 4.5 bits per weight instead of
// 32, the bandwidth a matrix-vector product is bound by.
// Other widths and modes unpack one row of w at a time into a float buffer
// that stays in L1 and take dot products with it. Many rows of x (prefill,
// training) dequantize w once per matrix and use the BLAS sgemm.
#if defined(__x86_64__)
#include <immintrin.h>
#endif

// GCC 12's AVX-512 headers trip -Wmaybe-uninitialized inside their own
// _mm512_undefined_* helpers once inlined (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <algorithm>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <vector>

#include "loom/allocator/allocator.h"
#include "loom/backend/cpu/copy.h"
#include "loom/backend/cpu/gemm.h"
#include "loom/backend/cpu/quantized.h"
#include "loom/backend/cpu/thread_pool.h"
#include "loom/types/dispatch.h"

namespace loom {

namespace {

using cpu::quant::dequantize_rows_f32;

// Rows of x up to which the fused kernels beat dequantize + sgemm.
constexpr int64_t kFusedRows = 8;

typedef float v8f __attribute__((vector_size(32)));
typedef uint32_t v8u __attribute__((vector_size(32)));

inline v8f load8(const float* p) {
  v8f v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

inline float hsum(v8f v) {
  float s = 0.0f;
  for (int i = 0; i < 8; ++i) s += v[i];
  return s;
}

// One matrix's operands, already in float32 where the kernels need it.
struct QmmProblem {
  int64_t M, N, K;
  int group_size, bits;
  QuantizationMode mode;
  bool transpose;
};

inline uint32_t load32(const unsigned char* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// Eight consecutive codes of a row of BITS-bit codes as float lanes: chunk c
// covers elements [8c, 8c + 8), i.e. bytes [BITS c, BITS (c + 1)) of the
// row's bit stream. Each lane shifts a 32-bit window holding its code: one
// window for widths up to 4 bits, two (at the chunk's first byte and at its
// last four) for 5 and 6. No load reaches past the chunk's bytes.
template <int BITS>
inline v8f chunk_codes(const uint32_t* w, int c) {
  constexpr uint32_t mask = (1u << BITS) - 1u;
  const auto* bytes = reinterpret_cast<const unsigned char*>(w) + BITS * c;
  v8u words, shifts;
  if constexpr (BITS == 4) {
    words = (v8u){} + w[c];
    shifts = v8u{0, 4, 8, 12, 16, 20, 24, 28};
  } else if constexpr (BITS == 8) {
    const uint32_t a = w[2 * c], b = w[2 * c + 1];
    words = v8u{a, a, a, a, b, b, b, b};
    shifts = v8u{0, 8, 16, 24, 0, 8, 16, 24};
  } else if constexpr (BITS == 2) {
    words = (v8u){} + w[c / 2];
    shifts = v8u{0, 2, 4, 6, 8, 10, 12, 14} + ((c & 1) ? 16u : 0u);
  } else if constexpr (BITS == 3) {
    words = (v8u){} + (uint32_t(bytes[0]) | (uint32_t(bytes[1]) << 8) | (uint32_t(bytes[2]) << 16));
    shifts = v8u{0, 3, 6, 9, 12, 15, 18, 21};
  } else if constexpr (BITS == 5) {
    const uint32_t lo = load32(bytes), hi = load32(bytes + 1);
    words = v8u{lo, lo, lo, lo, lo, lo, hi, hi};
    shifts = v8u{0, 5, 10, 15, 20, 25, 22, 27};
  } else { // 6
    const uint32_t lo = load32(bytes), hi = load32(bytes + 2);
    words = v8u{lo, lo, lo, lo, lo, hi, hi, hi};
    shifts = v8u{0, 6, 12, 18, 24, 14, 20, 26};
  }
  return __builtin_convertvector((words >> shifts) & mask, v8f);
}

// out[m, n] for n in [n0, n1): affine codes of 2 to 8 bits, float scales
// and biases. xsum[m * groups + g] holds the sum of x's elements in group g
// of row m.
template <int BITS>
void qmv_affine_rows(const float* x, const float* xsum, const uint32_t* w, const float* scales,
                     const float* biases, const QmmProblem& p, int64_t n0, int64_t n1, float* out) {
  const int64_t groups = p.K / p.group_size;
  const int64_t words = p.K * BITS / 32;
  const int chunks = p.group_size / 8; // 4, 8 or 16
  const int wpg = p.group_size * BITS / 32;
  for (int64_t n = n0; n < n1; ++n) {
    const uint32_t* wr = w + n * words;
    const float* sr = scales + n * groups;
    const float* br = biases + n * groups;
    for (int64_t m = 0; m < p.M; ++m) {
      const float* xr = x + m * p.K;
      const float* xs = xsum + m * groups;
      v8f total = {};
      float bias_total = 0.0f;
      for (int64_t g = 0; g < groups; ++g) {
        const uint32_t* wg = wr + g * wpg;
        const float* xg = xr + g * p.group_size;
        // Four independent chains: an fma's latency is four of its issue slots.
        v8f a0 = {}, a1 = {}, a2 = {}, a3 = {};
        for (int c = 0; c < chunks; c += 4) {
          a0 += chunk_codes<BITS>(wg, c) * load8(xg + 8 * c);
          a1 += chunk_codes<BITS>(wg, c + 1) * load8(xg + 8 * c + 8);
          a2 += chunk_codes<BITS>(wg, c + 2) * load8(xg + 8 * c + 16);
          a3 += chunk_codes<BITS>(wg, c + 3) * load8(xg + 8 * c + 24);
        }
        total += ((a0 + a1) + (a2 + a3)) * sr[g];
        bias_total += br[g] * xs[g];
      }
      out[m * p.N + n] = hsum(total) + bias_total;
    }
  }
}

#if defined(__x86_64__)
// 4-bit affine codes with AVX-512: 32 codes (16 bytes) per step, widened to
// 16 lanes of one byte each; the low nibbles are the even elements and the
// high nibbles the odd ones, so x is read from `xp`, each 32-element block
// of x stored as its 16 even then its 16 odd elements (x_pairs_split). That
// is a third of the instructions per weight of the generic 8-lane kernel.
// R rows of w (n, n + R) against row m of x: R independent accumulator
// chains, each x vector loaded once for all R.
template <int R>
__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl"))) inline void qmv4_avx512_block(
    const float* xr, const float* xs, const unsigned char* const* wr, const float* const* sr,
    const float* const* br, int64_t groups, int group_size, float* dst, int64_t dst_stride) {
  const __m512i low = _mm512_set1_epi32(0xF);
  const int blocks = group_size / 32;
  __m512 total[R];
  float bias_total[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    total[r] = _mm512_setzero_ps();
    bias_total[r] = 0.0f;
  }
  for (int64_t g = 0; g < groups; ++g) {
    __m512 acc[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
    for (int blk = 0; blk < blocks; ++blk) {
      const int64_t off = g * group_size + 32 * blk;
      const __m512 x_even = _mm512_loadu_ps(xr + off);
      const __m512 x_odd = _mm512_loadu_ps(xr + off + 16);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m512i codes = _mm512_cvtepu8_epi32(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(wr[r] + off / 2)));
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_and_si512(codes, low)), x_even, acc[r]);
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(codes, 4)), x_odd, acc[r]);
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      total[r] = _mm512_fmadd_ps(acc[r], _mm512_set1_ps(sr[r][g]), total[r]);
      bias_total[r] += br[r][g] * xs[g];
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, total[r]);
    float sum = 0.0f;
    for (float v : lanes) sum += v;
    dst[r * dst_stride] = sum + bias_total[r];
  }
}

// 4-bit affine codes with AVX-512: 32 codes (16 bytes) per step, widened to
// 16 lanes of one byte each; the low nibbles are the even elements and the
// high nibbles the odd ones, so x is read from `xp`, each 32-element block
// of x stored as its 16 even then its 16 odd elements (x_pairs_split). Four
// rows of w run together so that each x vector is loaded once for them.
__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl"))) void qmv4_avx512_rows(
    const float* xp, const float* xsum, const uint32_t* w, const float* scales, const float* biases,
    const QmmProblem& p, int64_t n0, int64_t n1, float* out) {
  constexpr int R = 4;
  const int64_t groups = p.K / p.group_size;
  const int64_t bytes_per_row = p.K / 2;
  const auto* wb = reinterpret_cast<const unsigned char*>(w);
  int64_t n = n0;
  for (; n + R <= n1; n += R) {
    const unsigned char* wr[R];
    const float* sr[R];
    const float* br[R];
    for (int r = 0; r < R; ++r) {
      wr[r] = wb + (n + r) * bytes_per_row;
      sr[r] = scales + (n + r) * groups;
      br[r] = biases + (n + r) * groups;
    }
    for (int64_t m = 0; m < p.M; ++m) {
      qmv4_avx512_block<R>(xp + m * p.K, xsum + m * groups, wr, sr, br, groups, p.group_size,
                           out + m * p.N + n, 1);
    }
  }
  for (; n < n1; ++n) {
    const unsigned char* wr[1] = {wb + n * bytes_per_row};
    const float* sr[1] = {scales + n * groups};
    const float* br[1] = {biases + n * groups};
    for (int64_t m = 0; m < p.M; ++m) {
      qmv4_avx512_block<1>(xp + m * p.K, xsum + m * groups, wr, sr, br, groups, p.group_size,
                           out + m * p.N + n, 1);
    }
  }
}

bool has_avx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
}
#endif

// x (M rows of K) with each block of 32 elements stored as its 16 even then
// its 16 odd elements: the order qmv4_avx512_rows unpacks codes in.
std::vector<float> x_pairs_split(const float* x, int64_t M, int64_t K) {
  std::vector<float> xp(static_cast<size_t>(M * K));
  for (int64_t i = 0; i < M * K; i += 32) {
    for (int j = 0; j < 16; ++j) {
      xp[i + j] = x[i + 2 * j];
      xp[i + 16 + j] = x[i + 2 * j + 1];
    }
  }
  return xp;
}

// Any mode and width: row n of w unpacked into a float buffer, then dotted
// with each row of x.
template <typename S>
void qmv_generic_rows(const float* x, const uint32_t* w, const S* scales, const S* biases,
                      const float* global_scale, const QmmProblem& p, int64_t n0, int64_t n1,
                      float* out) {
  std::vector<float> row(static_cast<size_t>(p.K));
  const int64_t words = p.K * p.bits / 32;
  const int64_t groups = p.K / p.group_size;
  for (int64_t n = n0; n < n1; ++n) {
    dequantize_rows_f32<S>(w + n * words, scales + n * groups,
                           biases != nullptr ? biases + n * groups : nullptr, global_scale, 1, p.K,
                           words, p.group_size, p.bits, p.mode, row.data());
    for (int64_t m = 0; m < p.M; ++m) {
      const float* xr = x + m * p.K;
      v8f acc = {};
      int64_t k = 0;
      for (; k + 8 <= p.K; k += 8) acc += load8(xr + k) * load8(row.data() + k);
      float s = hsum(acc);
      for (; k < p.K; ++k) s += xr[k] * row[k];
      out[m * p.N + n] = s;
    }
  }
}

// One product: x (M, K) float32 row-major, w one packed matrix, out (M, N).
template <typename S>
void qmm_one(const float* x, const uint32_t* w, const S* scales, const S* biases,
             const float* global_scale, const QmmProblem& p, float* out) {
  const bool fused = p.transpose && p.mode == QuantizationMode::affine && p.bits >= 2 &&
                     p.group_size % 32 == 0 && std::is_same_v<S, float>;
  if (p.M <= kFusedRows && p.transpose) {
    const size_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(p.K * p.M, 1));
    if constexpr (std::is_same_v<S, float>) {
      if (fused) {
        const int64_t groups = p.K / p.group_size;
        std::vector<float> xsum(static_cast<size_t>(p.M * groups));
        for (int64_t m = 0; m < p.M; ++m) {
          for (int64_t g = 0; g < groups; ++g) {
            float s = 0.0f;
            for (int j = 0; j < p.group_size; ++j) s += x[m * p.K + g * p.group_size + j];
            xsum[m * groups + g] = s;
          }
        }
#if defined(__x86_64__)
        static const bool avx512 = has_avx512();
        if (p.bits == 4 && avx512) {
          const std::vector<float> xp = x_pairs_split(x, p.M, p.K);
          // Four chunks per thread, taken as threads come free: a thread
          // that is descheduled (a loaded machine) holds up one small chunk.
          const int64_t threads = cpu::num_threads();
          const int64_t chunks = std::max<int64_t>(
              1, std::min<int64_t>(4 * threads, p.N / std::max<int64_t>(4, grain)));
          const int64_t width = ((p.N + chunks - 1) / chunks + 3) / 4 * 4;
          cpu::parallel_chunks(static_cast<size_t>((p.N + width - 1) / width), [&](size_t c) {
            const int64_t b = static_cast<int64_t>(c) * width;
            qmv4_avx512_rows(xp.data(), xsum.data(), w, scales, biases, p, b,
                             std::min<int64_t>(p.N, b + width), out);
          });
          return;
        }
#endif
        cpu::parallel_for(p.N, grain, [&](size_t b, size_t e) {
          switch (p.bits) {
            case 2:
              qmv_affine_rows<2>(x, xsum.data(), w, scales, biases, p, b, e, out);
              break;
            case 3:
              qmv_affine_rows<3>(x, xsum.data(), w, scales, biases, p, b, e, out);
              break;
            case 4:
              qmv_affine_rows<4>(x, xsum.data(), w, scales, biases, p, b, e, out);
              break;
            case 5:
              qmv_affine_rows<5>(x, xsum.data(), w, scales, biases, p, b, e, out);
              break;
            case 6:
              qmv_affine_rows<6>(x, xsum.data(), w, scales, biases, p, b, e, out);
              break;
            default:
              qmv_affine_rows<8>(x, xsum.data(), w, scales, biases, p, b, e, out);
              break;
          }
        });
        return;
      }
    }
    cpu::parallel_for(p.N, grain, [&](size_t b, size_t e) {
      qmv_generic_rows<S>(x, w, scales, biases, global_scale, p, b, e, out);
    });
    return;
  }
  // Dequantize the whole matrix once, then one sgemm.
  const int64_t rows = p.transpose ? p.N : p.K;
  const int64_t cols = p.transpose ? p.K : p.N;
  const int64_t words = cols * p.bits / 32;
  const int64_t groups = cols / p.group_size;
  std::vector<float> dense(static_cast<size_t>(rows * cols));
  cpu::parallel_for(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(cols, 1)),
                    [&](size_t b, size_t e) {
                      dequantize_rows_f32<S>(w + b * words, scales + b * groups,
                                             biases != nullptr ? biases + b * groups : nullptr,
                                             global_scale, e - b, cols, words, p.group_size, p.bits,
                                             p.mode, dense.data() + b * cols);
                    });
  cpu::gemm<float>(false, p.transpose, p.M, p.N, p.K, 1.0f, x, p.K, dense.data(),
                   p.transpose ? p.K : p.N, 0.0f, out, p.N);
}

// x as a float32 row-major buffer (a view when it already is one).
const float* x_as_f32(const array& x, std::vector<float>& storage) {
  if (x.dtype() == float32) return x.data<float>();
  storage.resize(x.size());
  dispatch(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>) {
      const T* src = x.data<T>();
      for (size_t i = 0; i < x.size(); ++i) storage[i] = static_cast<float>(src[i]);
    } else {
      throw std::invalid_argument("[quantized_matmul] unsupported input dtype.");
    }
  });
  return storage.data();
}

// Scales and biases as float32 (the fused kernels read float), or as stored
// for fp modes (uint8).
std::vector<float> as_f32_vector(const array& a) {
  std::vector<float> v(a.size());
  dispatch(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t> ||
                  std::is_same_v<T, float>) {
      const T* src = a.data<T>();
      for (size_t i = 0; i < a.size(); ++i) v[i] = static_cast<float>(src[i]);
    } else {
      throw std::invalid_argument("[quantized_matmul] unsupported scale dtype.");
    }
  });
  return v;
}

void write_out(const std::vector<float>& acc, array& out) {
  out.set_data(allocator::allocate(out.nbytes()));
  dispatch(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, float>) {
      std::memcpy(out.data<float>(), acc.data(), acc.size() * sizeof(float));
    } else if constexpr (std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>) {
      T* o = out.data<T>();
      for (size_t i = 0; i < acc.size(); ++i) o[i] = T(acc[i]);
    } else {
      throw std::invalid_argument("[quantized_matmul] unsupported output dtype.");
    }
  });
}

// Runs the products out[b] = x[xi(b)] w[wi(b)] for every output matrix b.
// Affine scales and biases are rounded to the output's type by the op; the
// kernels read them as float32 (exact for every such type).
template <typename Index>
void run_qmm(const std::vector<array>& inputs, array& out, int group_size, int bits,
             QuantizationMode mode, bool transpose, int64_t batches, Index&& index) {
  const array x = cpu::ensure_row_contiguous(inputs[0]);
  const array w = cpu::ensure_row_contiguous(inputs[1]);
  const array scales = cpu::ensure_row_contiguous(inputs[2]);
  const bool affine = mode == QuantizationMode::affine;
  std::optional<array> biases;
  if (affine) biases = cpu::ensure_row_contiguous(inputs[3]);
  QmmProblem p{x.shape(-2), out.shape(-1), x.shape(-1), group_size, bits, mode, transpose};
  std::vector<float> x_storage;
  const float* xp = x_as_f32(x, x_storage);
  std::vector<float> acc(out.size());
  const int64_t w_words = int64_t{w.shape(-2)} * w.shape(-1);
  const int64_t s_count = int64_t{scales.shape(-2)} * scales.shape(-1);
  // float32 scales and biases are read in place (a copy of them took a
  // quarter of a 4096² 4-bit matrix-vector product).
  std::vector<float> sf, bf;
  const float* sp = nullptr;
  const float* bp = nullptr;
  if (affine) {
    if (scales.dtype() == float32) {
      sp = scales.data<float>();
    } else {
      sf = as_f32_vector(scales);
      sp = sf.data();
    }
    if (biases->dtype() == float32) {
      bp = biases->data<float>();
    } else {
      bf = as_f32_vector(*biases);
      bp = bf.data();
    }
  }
  for (int64_t b = 0; b < batches; ++b) {
    auto [xi, wi] = index(b);
    const float* xb = xp + xi * p.M * p.K;
    const uint32_t* wb = w.data<uint32_t>() + wi * w_words;
    float* ob = acc.data() + b * p.M * p.N;
    if (affine) {
      qmm_one<float>(xb, wb, sp + wi * s_count, bp + wi * s_count, nullptr, p, ob);
    } else {
      qmm_one<uint8_t>(xb, wb, scales.data<uint8_t>() + wi * s_count, nullptr, nullptr, p, ob);
    }
  }
  write_out(acc, out);
}

// Linear index into an input's batch (right-aligned, size-1 axes broadcast)
// for output batch index b.
int64_t batch_index(int64_t b, const Shape& out_batch, const Shape& in_shape) {
  const int in_batch = static_cast<int>(in_shape.size()) - 2;
  const int off = static_cast<int>(out_batch.size()) - in_batch;
  int64_t idx = 0, stride = 1;
  for (int i = static_cast<int>(out_batch.size()) - 1; i >= 0; --i) {
    const int64_t coord = b % out_batch[i];
    b /= out_batch[i];
    const int j = i - off;
    if (j < 0) continue;
    const int64_t dim = in_shape[j];
    if (dim != 1) idx += coord * stride;
    stride *= dim;
  }
  return idx;
}

} // namespace

void QuantizedMatmul::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array& out = outputs[0];
  const Shape out_batch(out.shape().begin(), out.shape().end() - 2);
  int64_t batches = 1;
  for (auto d : out_batch) batches *= d;
  const Shape xs = inputs[0].shape(), ws = inputs[1].shape();
  run_qmm(inputs, out, group_size_, bits_, mode_, transpose_, batches, [&](int64_t b) {
    return std::pair<int64_t, int64_t>{batch_index(b, out_batch, xs),
                                       batch_index(b, out_batch, ws)};
  });
}

void GatherQMM::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const size_t n = inputs.size();
  const array lhs = cpu::ensure_row_contiguous(inputs[n - 2]);
  const array rhs = cpu::ensure_row_contiguous(inputs[n - 1]);
  const int64_t x_batches = inputs[0].shape(0), w_batches = inputs[1].shape(0);
  const uint32_t* li = lhs.data<uint32_t>();
  const uint32_t* ri = rhs.data<uint32_t>();
  const int64_t P = lhs.shape(0);
  for (int64_t p = 0; p < P; ++p) {
    if (li[p] >= x_batches || ri[p] >= w_batches) {
      throw std::out_of_range("[gather_qmm] Index out of range: lhs index " +
                              std::to_string(li[p]) + " for " + std::to_string(x_batches) +
                              " matrices of x, rhs index " + std::to_string(ri[p]) + " for " +
                              std::to_string(w_batches) + " matrices of w.");
    }
  }
  std::vector<array> in(inputs.begin(), inputs.end() - 2);
  run_qmm(in, outputs[0], group_size_, bits_, mode_, transpose_, P, [&](int64_t b) {
    return std::pair<int64_t, int64_t>{li[b], ri[b]};
  });
}

} // namespace loom
