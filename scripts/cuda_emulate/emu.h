// A host emulation of the CUDA features the tensor-core attention kernels use
// (attention.cpp), to check their indexing without a GPU: every thread of a
// block is a std::thread, blocks run one after another, __shared__ arrays are
// function statics, and the warp-wide operations (shuffles, ldmatrix,
// mma.sync) exchange their lanes' operands through per-warp slots between
// barriers. Slow, but exact in the fragments' layouts. Used by
// attention_emulate.py; not part of the library.
#pragma once

#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
};
struct uint4 {
  unsigned x, y, z, w;
};
inline thread_local dim3 threadIdx, blockIdx;
inline dim3 gridDim, blockDim;

struct EmuWarp {
  std::unique_ptr<std::barrier<>> bar;
  const unsigned short* addr[32];
  unsigned a[32][4];
  unsigned b[32][2];
  float f[32];
};
inline std::unique_ptr<std::barrier<>> emu_block_bar;

// cp.async: with emu_late_copies (EMU_LATE_COPIES=1 in the environment) each
// thread's copies land only when a cp.async.wait_group retires their group,
// as late as the hardware may (a read before its wait sees stale data);
// otherwise at once, as early as it may (a copy into a tile other warps still
// read shows). Run both.
struct EmuCopy {
  unsigned short* dst;
  unsigned char bytes[16];
  bool pred;
};
inline bool emu_late_copies = false;
inline thread_local std::vector<std::vector<EmuCopy>> emu_groups;
inline thread_local std::vector<EmuCopy> emu_open;
inline void emu_land(const EmuCopy& c) {
  if (c.pred) {
    std::memcpy(c.dst, c.bytes, 16);
  } else {
    std::memset(c.dst, 0, 16);
  }
}
inline void emu_cp16(const unsigned short* dst, const void* src, bool pred) {
  EmuCopy c{const_cast<unsigned short*>(dst), {}, pred};
  if (pred) std::memcpy(c.bytes, src, 16);
  if (emu_late_copies) {
    emu_open.push_back(c);
  } else {
    emu_land(c);
  }
}
inline void emu_commit() {
  emu_groups.push_back(std::move(emu_open));
  emu_open.clear();
}
inline void emu_wait(int n) {
  while (static_cast<int>(emu_groups.size()) > n) {
    for (const EmuCopy& c : emu_groups.front()) emu_land(c);
    emu_groups.erase(emu_groups.begin());
  }
}
inline EmuWarp emu_warps[32];

inline void __syncthreads() { emu_block_bar->arrive_and_wait(); }
inline EmuWarp& emu_warp() { return emu_warps[threadIdx.x / 32]; }
inline int emu_lane() { return threadIdx.x % 32; }
inline void __syncwarp() { emu_warp().bar->arrive_and_wait(); }

inline float __int_as_float(int i) {
  float f;
  std::memcpy(&f, &i, 4);
  return f;
}
inline float __uint_as_float(unsigned i) {
  float f;
  std::memcpy(&f, &i, 4);
  return f;
}
inline unsigned __float_as_uint(float f) {
  unsigned i;
  std::memcpy(&i, &f, 4);
  return i;
}
inline float __log2f(float x) { return std::log2(x); }
inline float atomicAdd(float* p, float v) { return std::atomic_ref<float>(*p).fetch_add(v); }

inline float __shfl_xor_sync(unsigned, float v, int o) {
  EmuWarp& w = emu_warp();
  w.f[emu_lane()] = v;
  w.bar->arrive_and_wait();
  const float r = w.f[emu_lane() ^ o];
  w.bar->arrive_and_wait();
  return r;
}
inline float __shfl_sync(unsigned, float v, int src) {
  EmuWarp& w = emu_warp();
  w.f[emu_lane()] = v;
  w.bar->arrive_and_wait();
  const float r = w.f[src];
  w.bar->arrive_and_wait();
  return r;
}

struct loom_half {
  unsigned short bits;
};
struct loom_bf16 {
  unsigned short bits;
};
inline float loom_ld(loom_half h) {
  _Float16 x;
  std::memcpy(&x, &h.bits, 2);
  return (float)x;
}
inline float loom_ld(loom_bf16 h) { return __uint_as_float(((unsigned)h.bits) << 16); }
template <typename T>
inline T loom_ld(T x) {
  return x;
}
inline unsigned short emu_bits(float v, bool bf16) {
  if (bf16) {
    unsigned u = __float_as_uint(v);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (unsigned short)(u >> 16);
  }
  _Float16 x = (_Float16)v;
  unsigned short b;
  std::memcpy(&b, &x, 2);
  return b;
}
inline void loom_st(loom_half* p, float v) { p->bits = emu_bits(v, false); }
inline void loom_st(loom_bf16* p, float v) { p->bits = emu_bits(v, true); }
inline float emu_val(unsigned short b, bool bf16) {
  return bf16 ? loom_ld(loom_bf16{b}) : loom_ld(loom_half{b});
}

// The mma helpers (attention.cpp's mma_helpers), emulated. EMU_BF16 picks the
// element type of the packed operands.
#define EMU_MMA_HELPERS                                                                            \
  static inline const unsigned short* loom_smem(const unsigned short* p) { return p; }             \
  static inline int loom_sw(int r, int c) { return r * LOOM_D + ((c ^ (r & 7)) << 3); }            \
  static inline void loom_cp16(const unsigned short* dst, const void* src, bool pred) {            \
    emu_cp16(dst, src, pred);                                                                      \
  }                                                                                                \
  static inline void loom_commit() { emu_commit(); }                                               \
  template <int N>                                                                                 \
  static inline void loom_wait() {                                                                 \
    emu_wait(N);                                                                                   \
  }                                                                                                \
  static inline float loom_ex2(float x) { return std::exp2(x); }                                   \
  static inline void loom_ldm_any(unsigned* r, const unsigned short* a, bool trans) {              \
    EmuWarp& w = emu_warp();                                                                       \
    const int lane = emu_lane(), g = lane >> 2, t = lane & 3;                                      \
    w.addr[lane] = a;                                                                              \
    w.bar->arrive_and_wait();                                                                      \
    for (int i = 0; i < 4; ++i) {                                                                  \
      unsigned lo, hi;                                                                             \
      if (trans) {                                                                                 \
        lo = w.addr[i * 8 + 2 * t][g];                                                             \
        hi = w.addr[i * 8 + 2 * t + 1][g];                                                         \
      } else {                                                                                     \
        lo = w.addr[i * 8 + g][2 * t];                                                             \
        hi = w.addr[i * 8 + g][2 * t + 1];                                                         \
      }                                                                                            \
      r[i] = lo | (hi << 16);                                                                      \
    }                                                                                              \
    w.bar->arrive_and_wait();                                                                      \
  }                                                                                                \
  static inline void loom_ldm(unsigned* r, const unsigned short* a) { loom_ldm_any(r, a, false); } \
  static inline void loom_ldmt(unsigned* r, const unsigned short* a) { loom_ldm_any(r, a, true); } \
  static inline void loom_mma(float* c, const unsigned* a, unsigned b0, unsigned b1) {             \
    EmuWarp& w = emu_warp();                                                                       \
    const int lane = emu_lane(), g = lane >> 2, t = lane & 3;                                      \
    for (int i = 0; i < 4; ++i) w.a[lane][i] = a[i];                                               \
    w.b[lane][0] = b0;                                                                             \
    w.b[lane][1] = b1;                                                                             \
    w.bar->arrive_and_wait();                                                                      \
    float A[16][16], B[16][8];                                                                     \
    for (int l = 0; l < 32; ++l) {                                                                 \
      const int lg = l >> 2, lt = l & 3;                                                           \
      for (int h = 0; h < 2; ++h) {                                                                \
        A[lg][2 * lt + h] = emu_val((unsigned short)(w.a[l][0] >> (16 * h)), EMU_BF16);            \
        A[lg + 8][2 * lt + h] = emu_val((unsigned short)(w.a[l][1] >> (16 * h)), EMU_BF16);        \
        A[lg][2 * lt + 8 + h] = emu_val((unsigned short)(w.a[l][2] >> (16 * h)), EMU_BF16);        \
        A[lg + 8][2 * lt + 8 + h] = emu_val((unsigned short)(w.a[l][3] >> (16 * h)), EMU_BF16);    \
        B[2 * lt + h][lg] = emu_val((unsigned short)(w.b[l][0] >> (16 * h)), EMU_BF16);            \
        B[2 * lt + 8 + h][lg] = emu_val((unsigned short)(w.b[l][1] >> (16 * h)), EMU_BF16);        \
      }                                                                                            \
    }                                                                                              \
    w.bar->arrive_and_wait();                                                                      \
    for (int e = 0; e < 4; ++e) {                                                                  \
      const int row = g + (e >> 1) * 8, col = 2 * t + (e & 1);                                     \
      float acc = c[e];                                                                            \
      for (int k = 0; k < 16; ++k) acc += A[row][k] * B[k][col];                                   \
      c[e] = acc;                                                                                  \
    }                                                                                              \
  }                                                                                                \
  static inline unsigned loom_pack(float lo, float hi) {                                           \
    return emu_bits(lo, EMU_BF16) | ((unsigned)emu_bits(hi, EMU_BF16) << 16);                      \
  }

// Runs kernel(args) over the grid, block after block, `threads` threads each.
template <typename F>
void emu_launch(dim3 grid, unsigned threads, F kernel) {
  gridDim = grid;
  blockDim = dim3{threads, 1, 1};
  emu_block_bar = std::make_unique<std::barrier<>>(threads);
  for (unsigned w = 0; w < (threads + 31) / 32; ++w) {
    emu_warps[w].bar = std::make_unique<std::barrier<>>(32);
  }
  for (unsigned y = 0; y < grid.y; ++y) {
    for (unsigned x = 0; x < grid.x; ++x) {
      std::vector<std::thread> pool;
      for (unsigned t = 0; t < threads; ++t) {
        pool.emplace_back([=] {
          threadIdx = dim3{t, 0, 0};
          blockIdx = dim3{x, y, 0};
          kernel();
          // Copies never waited for are lost with the block.
          emu_groups.clear();
          emu_open.clear();
        });
      }
      for (auto& th : pool) th.join();
    }
  }
}
