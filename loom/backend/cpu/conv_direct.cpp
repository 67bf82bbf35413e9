// Direct float32 convolution kernels (see conv_direct.h), AVX-512 or AVX2
// chosen at run time: the forward (also the input gradient, a forward of the
// cotangent against the turned-around kernel) and the weight gradient.
#include "loom/backend/cpu/conv_direct.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <vector>

#include "loom/backend/cpu/thread_pool.h"

#if defined(__x86_64__)
#define LOOM_CONV_X86 1
#endif

namespace loom::cpu {

bool conv_direct_suits(const ConvGeometry& g) {
  // Below 16 output channels per group a tile is one partly used vector; below
  // 4 input channels the per-tile pointer set-up outweighs the products.
  return g.Og >= 16 && g.Cg >= 4 && g.kc > 0;
}

namespace {

// Slices of rows the weight gradient accumulates separately.
int64_t wgrad_slices() { return 4 * static_cast<int64_t>(num_threads()); }

} // namespace

bool conv_wgrad_direct_suits(const ConvGeometry& g, int64_t O) {
  // The tile spans 8 input channels at most and needs them all. Each slice
  // of rows accumulates into a whole weight-sized buffer: a weight so large
  // that those buffers would pass 256 MiB takes the im2col path (one buffer).
  const double buffers = static_cast<double>(g.C) * g.taps * (O + 15) * 4 * wgrad_slices();
  return O >= 16 && g.C >= 8 && g.G == 1 && buffers <= 256.0 * (1 << 20);
}

#if defined(LOOM_CONV_X86)

namespace {

std::atomic<int> isa_cap{2};

// Which kernels run: 0 none, 1 AVX2 + FMA, 2 AVX-512F (what the CPU has,
// within the cap tests set).
int isa_level() {
  static const int level = __builtin_cpu_supports("avx512f")                                 ? 2
                           : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 1
                                                                                             : 0;
  return std::min(level, isa_cap.load(std::memory_order_relaxed));
}

} // namespace

bool conv_direct_available() { return isa_level() > 0; }

int conv_direct_cap_isa(int level) { return isa_cap.exchange(level); }

namespace {

// The tiles are written once over GCC's portable vectors and compiled
// twice, inlined into an AVX-512 entry point (16-float vectors: one zmm
// register each) and an AVX2 one (8-float vectors, one ymm: GCC lowers a
// 16-float vector without AVX-512 through memory).
using f32x16 = float __attribute__((vector_size(64)));
using f32x8 = float __attribute__((vector_size(32)));

template <typename Vec>
constexpr int64_t lanes_of = sizeof(Vec) / sizeof(float);

constexpr int64_t kLanes = 16;
// Output channels per register tile: four 16-float vectors.
constexpr int64_t kBlock = 64;
// Rows a forward job covers: a multiple of every tile height (6 and 8), and
// ~80 µs of work on the ResNet-stage shape, so that a thread descheduled on a
// loaded machine leaves only a small job for the others to wait on.
constexpr int64_t kForwardJobRows = 96;
// Weight gradient: rows per pass over the taps (their cotangent rows, 96 x
// 64 floats, stay in L1 across the taps and channel tiles).
constexpr int64_t kWgradPassRows = 96;

// Pixels (forward) or input channels (weight gradient) per tile for V
// 16-float vectors of output channels. AVX-512: R x V accumulators, V weight
// vectors and a broadcast within the 32 registers, and the forward's R input
// pointers within the general registers. AVX2 (16 registers) runs 16
// channels at a time: 6 x 2 ymm accumulators.
constexpr int tile_rows(int level, int V) { return level == 1 || V == 4 ? 6 : 8; }

template <typename Vec>
__attribute__((always_inline)) inline Vec load_vec(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <typename Vec>
__attribute__((always_inline)) inline void store_vec(float* p, const Vec& v) {
  std::memcpy(p, &v, sizeof v);
}

// out[r][col, col + width) = sum over taps t and channels c of
// px[t][r][c] * pw[t][c][col, col + width), for V vectors of columns
// (width <= V lanes; the weight rows are padded to whole vectors).
template <typename Vec, int R, int V>
__attribute__((always_inline)) inline void forward_tile(const float* const* px,
                                                        const float* const* pw, int64_t ntaps,
                                                        int64_t C, int64_t ldw, float* const* out,
                                                        int64_t col, int64_t width) {
  constexpr int64_t L = lanes_of<Vec>;
  Vec acc[R][V];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) acc[r][v] = Vec{};
  }
  for (int64_t t = 0; t < ntaps; ++t) {
    const float* p[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) p[r] = px[t * R + r];
    const float* w = pw[t] + col;
    for (int64_t c = 0; c < C; ++c, w += ldw) {
      Vec wv[V];
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) wv[v] = load_vec<Vec>(w + v * L);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const float b = p[r][c];
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v) acc[r][v] += wv[v] * b;
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    float* o = out[r] + col;
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      const int64_t n = width - v * L;
      if (n >= L) {
        store_vec(o + v * L, acc[r][v]);
      } else if (n > 0) {
        std::memcpy(o + v * L, &acc[r][v], sizeof(float) * n);
      }
    }
  }
}

// acc[r][0, V lanes) += sum over i of xs[i][c0 + r] * cs[i][col, col + V
// lanes) for r >= r_begin (the rows below belong to the previous tile: the
// last tile of a channel range is shifted back to stay inside it). cs rows
// and acc rows are padded to whole vectors.
template <typename Vec, int R, int V>
__attribute__((always_inline)) inline void wgrad_tile(const float* const* xs,
                                                      const float* const* cs, int64_t n, int64_t c0,
                                                      int64_t col, float* acc, int64_t ld,
                                                      int r_begin) {
  constexpr int64_t L = lanes_of<Vec>;
  Vec a[R][V];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) a[r][v] = r < r_begin ? Vec{} : load_vec<Vec>(acc + r * ld + v * L);
  }
  for (int64_t i = 0; i < n; ++i) {
    const float* x = xs[i] + c0;
    const float* c = cs[i] + col;
    Vec wv[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) wv[v] = load_vec<Vec>(c + v * L);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const float b = x[r];
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) a[r][v] += wv[v] * b;
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    if (r < r_begin) continue;
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) store_vec(acc + r * ld + v * L, a[r][v]);
  }
}

// The entry points: V 16-float vectors of output channels from column 0 of
// the block; the forward stores `width` of them.
using ForwardTile = void (*)(const float* const*, const float* const*, int64_t, int64_t, int64_t,
                             float* const*, int64_t);
using WgradTile = void (*)(const float* const*, const float* const*, int64_t, int64_t, int64_t,
                           float*, int64_t, int);

template <int V>
__attribute__((target("avx512f"))) void forward_avx512(const float* const* px,
                                                       const float* const* pw, int64_t ntaps,
                                                       int64_t C, int64_t ldw, float* const* out,
                                                       int64_t width) {
  forward_tile<f32x16, tile_rows(2, V), V>(px, pw, ntaps, C, ldw, out, 0, width);
}

template <int V>
__attribute__((target("avx2,fma"))) void forward_avx2(const float* const* px,
                                                      const float* const* pw, int64_t ntaps,
                                                      int64_t C, int64_t ldw, float* const* out,
                                                      int64_t width) {
  for (int v = 0; v < V; ++v) {
    forward_tile<f32x8, tile_rows(1, V), 2>(px, pw, ntaps, C, ldw, out, v * kLanes,
                                            width - v * kLanes);
  }
}

template <int V>
__attribute__((target("avx512f"))) void wgrad_avx512(const float* const* xs, const float* const* cs,
                                                     int64_t n, int64_t c0, int64_t o0, float* acc,
                                                     int64_t ld, int r_begin) {
  wgrad_tile<f32x16, tile_rows(2, V), V>(xs, cs, n, c0, o0, acc, ld, r_begin);
}

template <int V>
__attribute__((target("avx2,fma"))) void wgrad_avx2(const float* const* xs, const float* const* cs,
                                                    int64_t n, int64_t c0, int64_t o0, float* acc,
                                                    int64_t ld, int r_begin) {
  for (int v = 0; v < V; ++v) {
    wgrad_tile<f32x8, tile_rows(1, V), 2>(xs, cs, n, c0, o0 + v * kLanes, acc + v * kLanes, ld,
                                          r_begin);
  }
}

ForwardTile forward_tile_for(int level, int V) {
  if (level == 1) {
    switch (V) {
      case 1:
        return forward_avx2<1>;
      case 2:
        return forward_avx2<2>;
      case 3:
        return forward_avx2<3>;
      default:
        return forward_avx2<4>;
    }
  }
  switch (V) {
    case 1:
      return forward_avx512<1>;
    case 2:
      return forward_avx512<2>;
    case 3:
      return forward_avx512<3>;
    default:
      return forward_avx512<4>;
  }
}

WgradTile wgrad_tile_for(int level, int V) {
  if (level == 1) {
    switch (V) {
      case 1:
        return wgrad_avx2<1>;
      case 2:
        return wgrad_avx2<2>;
      case 3:
        return wgrad_avx2<3>;
      default:
        return wgrad_avx2<4>;
    }
  }
  switch (V) {
    case 1:
      return wgrad_avx512<1>;
    case 2:
      return wgrad_avx512<2>;
    case 3:
      return wgrad_avx512<3>;
    default:
      return wgrad_avx512<4>;
  }
}

// Float buffers aligned to a cache line (the packed weight's rows are read
// as whole vectors).
struct AlignedDelete {
  void operator()(float* p) const { ::operator delete[](p, std::align_val_t{64}); }
};
using AlignedFloats = std::unique_ptr<float[], AlignedDelete>;

AlignedFloats aligned_floats(int64_t n) {
  return AlignedFloats(
      new (std::align_val_t{64}) float[static_cast<size_t>(std::max<int64_t>(n, 1))]);
}

// A tap's position along each padded axis.
struct Tap {
  int64_t j0, j1, j2;
};

std::vector<Tap> taps_of(const ConvGeometry& g) {
  std::vector<Tap> taps(static_cast<size_t>(g.taps));
  for (int64_t t = 0; t < g.taps; ++t) {
    taps[t] = {t / (g.k[1] * g.k[2]), (t / g.k[2]) % g.k[1], t % g.k[2]};
  }
  return taps;
}

// The output row after `ri`.
inline void next_row(const ConvGeometry& g, ConvRow& ri) {
  if (++ri.o2 < g.out[2]) return;
  ri.o2 = 0;
  if (++ri.o1 < g.out[1]) return;
  ri.o1 = 0;
  if (++ri.o0 < g.out[0]) return;
  ri.o0 = 0;
  ++ri.n;
}

// Offset of the input pixel output row `ri` reads at tap `tp` (channel 0),
// or -1 where that tap falls on padding.
inline int64_t source_offset(const ConvGeometry& g, const ConvRow& ri, const Tap& tp) {
  const int64_t s0 = g.src[0][ri.o0 * g.k[0] + tp.j0];
  const int64_t s1 = g.src[1][ri.o1 * g.k[1] + tp.j1];
  const int64_t s2 = g.src[2][ri.o2 * g.k[2] + tp.j2];
  if (s0 < 0 || s1 < 0 || s2 < 0) return -1;
  return (((ri.n * g.in[0] + s0) * g.in[1] + s1) * g.in[2] + s2) * g.C;
}

} // namespace

void conv_direct_f32(const ConvGeometry& g, const float* x, const float* w, float* out) {
  // The weight packed per (group, block of 64 output channels) as
  // [tap][c][block width rounded up to whole vectors], zero-filled past the
  // last channel so that full-vector loads are harmless.
  const int64_t blocks = (g.Og + kBlock - 1) / kBlock;
  std::vector<int64_t> block_offset(static_cast<size_t>(g.G * blocks + 1), 0);
  for (int64_t grp = 0, i = 0; grp < g.G; ++grp) {
    for (int64_t b = 0; b < blocks; ++b, ++i) {
      const int64_t width = std::min(kBlock, g.Og - b * kBlock);
      const int64_t padded = (width + kLanes - 1) / kLanes * kLanes;
      block_offset[i + 1] = block_offset[i] + g.taps * g.Cg * padded;
    }
  }
  AlignedFloats packed = aligned_floats(block_offset.back());
  parallel_for(static_cast<size_t>(g.G * blocks), 1, [&](size_t b0, size_t b1) {
    for (size_t i = b0; i < b1; ++i) {
      const int64_t grp = static_cast<int64_t>(i) / blocks, b = static_cast<int64_t>(i) % blocks;
      const int64_t o0 = grp * g.Og + b * kBlock;
      const int64_t width = std::min(kBlock, g.Og - b * kBlock);
      const int64_t ld = (width + kLanes - 1) / kLanes * kLanes;
      float* dst = packed.get() + block_offset[i];
      for (int64_t t = 0; t < g.taps; ++t) {
        for (int64_t c = 0; c < g.Cg; ++c) {
          float* row = dst + (t * g.Cg + c) * ld;
          for (int64_t o = 0; o < width; ++o) row[o] = w[((o0 + o) * g.taps + t) * g.Cg + c];
          std::fill(row + width, row + ld, 0.0f);
        }
      }
    }
  });

  const std::vector<float> zeros(static_cast<size_t>(g.Cg), 0.0f);
  const int64_t row_jobs = (g.rows + kForwardJobRows - 1) / kForwardJobRows;
  parallel_chunks(static_cast<size_t>(g.G * blocks * row_jobs), [&](size_t job) {
    // Consecutive jobs share their rows and differ in output block, so the
    // input rows one job reads are still in cache for the next (several
    // blocks: 1x1 64 -> 256, forward CPU 47 -> 44 ms, loaded).
    const int64_t i = static_cast<int64_t>(job) % (g.G * blocks);
    const int64_t grp = i / blocks, b = i % blocks;
    const int64_t width = std::min(kBlock, g.Og - b * kBlock);
    const int V = static_cast<int>((width + kLanes - 1) / kLanes);
    const int level = isa_level();
    const int R = tile_rows(level, V);
    const int64_t ld = V * kLanes;
    const ForwardTile tile = forward_tile_for(level, V);

    const float* wb = packed.get() + block_offset[i];
    const float* xg = x + grp * g.Cg;
    const int64_t col = grp * g.Og + b * kBlock;
    const int64_t r_start = static_cast<int64_t>(job) / (g.G * blocks) * kForwardJobRows;
    const int64_t r_end = std::min(g.rows, r_start + kForwardJobRows);
    float scratch[kBlock];
    const float* px[27 * 8];
    std::vector<const float*> px_heap;
    const float** pxs = px;
    if (g.taps > 27) {
      px_heap.resize(static_cast<size_t>(g.taps * R));
      pxs = px_heap.data();
    }
    std::vector<const float*> pw(static_cast<size_t>(g.taps));
    float* outs[8];
    ConvRow ri[8];
    bool valid[8];
    // Rows advance one output position at a time (no division per pixel),
    // and a pixel's offset is split into the part the first two kernel axes
    // fix and the last axis's position: the set-up was 7% of the ResNet
    // forward with an offset computed whole per (pixel, tap).
    ConvRow cur = conv_row(g, r_start);
    int64_t base[8];
    for (int64_t r0 = r_start; r0 < r_end; r0 += R) {
      for (int r = 0; r < R; ++r) {
        valid[r] = r0 + r < r_end;
        outs[r] = valid[r] ? out + (r0 + r) * g.O + col : scratch;
        ri[r] = cur;
        next_row(g, cur);
      }
      int64_t active = 0;
      for (int64_t j0 = 0, t = 0; j0 < g.k[0]; ++j0) {
        for (int64_t j1 = 0; j1 < g.k[1]; ++j1) {
          for (int r = 0; r < R; ++r) {
            const int64_t s0 = g.src[0][ri[r].o0 * g.k[0] + j0];
            const int64_t s1 = g.src[1][ri[r].o1 * g.k[1] + j1];
            base[r] = !valid[r] || s0 < 0 || s1 < 0
                          ? -1
                          : ((ri[r].n * g.in[0] + s0) * g.in[1] + s1) * g.in[2];
          }
          for (int64_t j2 = 0; j2 < g.k[2]; ++j2, ++t) {
            bool any = false;
            const float** p = pxs + active * R;
            for (int r = 0; r < R; ++r) {
              const int64_t s2 = base[r] < 0 ? -1 : g.src[2][ri[r].o2 * g.k[2] + j2];
              p[r] = s2 < 0 ? zeros.data() : xg + (base[r] + s2) * g.C;
              any |= s2 >= 0;
            }
            if (any) pw[active++] = wb + t * g.Cg * ld;
          }
        }
      }
      if (active == 0) {
        for (int r = 0; r < R; ++r) {
          if (valid[r]) std::fill(outs[r], outs[r] + width, 0.0f);
        }
        continue;
      }
      tile(pxs, pw.data(), active, g.Cg, ld, outs, width);
    }
  });
}

void conv_wgrad_direct_f32(const ConvGeometry& g, const float* x, const float* cot, int64_t O,
                           float* out) {
  const int64_t C = g.C, Q = g.taps;
  // Accumulators and cotangent rows padded to whole vectors (the tiles load
  // and store only whole vectors): a pass copies its rows when O is ragged.
  const int64_t Op = (O + kLanes - 1) / kLanes * kLanes;
  const int64_t size = C * Q * Op;
  const int level = isa_level();
  // The rows are cut into a fixed set of slices, each accumulated in order
  // into its own buffer and the buffers summed in order, so that the result
  // does not depend on which thread ran what (per-thread buffers taken as
  // jobs came would sum in a different order each call). Slices of whole
  // passes, four per thread so that a descheduled thread holds up little.
  const std::vector<Tap> taps = taps_of(g);
  const int64_t passes = (g.rows + kWgradPassRows - 1) / kWgradPassRows;
  const int64_t slices = std::min<int64_t>(passes, wgrad_slices());
  const int64_t job_rows = (passes + slices - 1) / slices * kWgradPassRows;
  const int64_t jobs = (g.rows + job_rows - 1) / job_rows;
  std::vector<AlignedFloats> buffers(static_cast<size_t>(jobs));
  parallel_chunks(static_cast<size_t>(jobs), [&](size_t job) {
    buffers[job] = aligned_floats(size);
    float* acc = buffers[job].get();
    std::fill(acc, acc + size, 0.0f);
    const int64_t j0 = static_cast<int64_t>(job) * job_rows;
    const int64_t j1 = std::min(g.rows, j0 + job_rows);
    std::vector<const float*> xs(static_cast<size_t>(kWgradPassRows));
    std::vector<const float*> cs(static_cast<size_t>(kWgradPassRows));
    std::vector<ConvRow> ri(static_cast<size_t>(kWgradPassRows));
    std::vector<float> padded(Op == O ? 0 : static_cast<size_t>(kWgradPassRows * Op), 0.0f);
    for (int64_t p0 = j0; p0 < j1; p0 += kWgradPassRows) {
      const int64_t p1 = std::min(j1, p0 + kWgradPassRows);
      for (int64_t r = p0; r < p1; ++r) {
        ri[r - p0] = conv_row(g, r);
        if (Op != O) std::copy_n(cot + r * O, O, padded.data() + (r - p0) * Op);
      }
      for (int64_t q = 0; q < Q; ++q) {
        // The rows whose tap q reads the input (the others add nothing).
        int64_t n = 0;
        for (int64_t r = p0; r < p1; ++r) {
          const int64_t off = source_offset(g, ri[r - p0], taps[q]);
          if (off < 0) continue;
          xs[n] = x + off;
          cs[n] = Op == O ? cot + r * O : padded.data() + (r - p0) * Op;
          ++n;
        }
        if (n == 0) continue;
        for (int64_t o0 = 0; o0 < O; o0 += kBlock) {
          const int V = static_cast<int>((std::min(kBlock, O - o0) + kLanes - 1) / kLanes);
          const int R = tile_rows(level, V);
          const WgradTile tile = wgrad_tile_for(level, V);
          for (int64_t c0 = 0; c0 < C; c0 += R) {
            const int64_t start = std::min(c0, C - R);
            tile(xs.data(), cs.data(), n, start, o0, acc + (start * Q + q) * Op + o0, Q * Op,
                 static_cast<int>(c0 - start));
          }
        }
      }
    }
  });
  const size_t grain = static_cast<size_t>(std::max<int64_t>(1, 16384 / (Op * jobs)));
  parallel_for(static_cast<size_t>(C * Q), grain, [&](size_t i0, size_t i1) {
    for (size_t i = i0; i < i1; ++i) {
      float* dst = out + i * O;
      std::fill(dst, dst + O, 0.0f);
      for (const auto& acc : buffers) {
        const float* a = acc.get() + i * Op;
        for (int64_t o = 0; o < O; ++o) dst[o] += a[o];
      }
    }
  });
}

#else

bool conv_direct_available() { return false; }

int conv_direct_cap_isa(int) { return 0; }

void conv_direct_f32(const ConvGeometry&, const float*, const float*, float*) {
  throw std::logic_error("[conv_direct_f32] Called on a CPU without AVX2 or AVX-512.");
}

void conv_wgrad_direct_f32(const ConvGeometry&, const float*, const float*, int64_t, float*) {
  throw std::logic_error("[conv_wgrad_direct_f32] Called on a CPU without AVX2 or AVX-512.");
}

#endif

} // namespace loom::cpu
