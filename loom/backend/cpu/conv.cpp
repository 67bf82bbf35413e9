// CPU kernel of Convolution.
//
// Every form (1-3 spatial axes, padding, both dilations, groups, flip) is one
// implicit GEMM: the output (rows = N * output positions, O channels) is
// patches @ weightᵀ per group, where a patch row holds, for each kernel tap,
// the Cg input channels it reads (zeros where the tap falls on padding or a
// hole of the input dilation). Patches are built a block at a time (im2col,
// spread over the intra-op pool) so the buffer stays a few MiB whatever the
// problem, and each block is one product (cpu::gemm: panels over the pool).
// A block covers rows or, when a patch row is very long (the weight gradient,
// whose "kernel" is the whole cotangent), a range of taps accumulated with
// beta = 1. Two shapes skip im2col: 1x1 kernels read the input in place
// (its channel rows are already the patches), and grouped convolutions with
// one input channel per group (depthwise) run a direct loop vectorised over
// channels, where a GEMM per group would have a single column. float32
// convolutions with enough channels to fill vector lanes skip all of this for
// the direct kernels of conv_direct.cpp (forward, input gradient and weight
// gradient). float16/bfloat16 compute in float32.
#include "loom/primitives/conv.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <mutex>
#include <type_traits>
#include <vector>

#include "loom/backend/cpu/conv_direct.h"
#include "loom/backend/cpu/copy.h"
#include "loom/backend/cpu/gemm.h"
#include "loom/backend/cpu/thread_pool.h"

namespace loom {

namespace {

// Patch block size in elements (2 MiB of float32): large enough for sgemm to
// run at speed, small enough that the block im2col writes is still in L2 when
// sgemm reads it (ResNet-stage forward, best of 5 CPU-time samples on this
// machine: 89 ms against 129 ms with 8 MiB blocks).
constexpr int64_t kBlockElements = int64_t{1} << 19;

using Geometry = cpu::ConvGeometry;

Geometry make_geometry(const Shape& xs, const Shape& ws, const Shape& os, const ConvParams& p) {
  Geometry g;
  const int nd = static_cast<int>(xs.size()) - 2;
  g.N = xs[0];
  g.C = xs.back();
  g.O = ws[0];
  g.G = p.groups;
  g.Cg = g.C / g.G;
  g.Og = g.O / g.G;
  for (int a = 0; a < 3; ++a) g.src[a] = {0};
  for (int i = 0; i < nd; ++i) {
    const int a = 3 - nd + i;
    g.in[a] = xs[i + 1];
    g.k[a] = ws[i + 1];
    g.out[a] = os[i + 1];
    const int64_t id = p.input_dilation[i];
    const int64_t span = g.in[a] == 0 ? 0 : (g.in[a] - 1) * id + 1;
    std::vector<int64_t>& t = g.src[a];
    t.assign(g.out[a] * g.k[a], -1);
    for (int64_t o = 0; o < g.out[a]; ++o) {
      for (int64_t j = 0; j < g.k[a]; ++j) {
        const int64_t tap = p.flip ? g.k[a] - 1 - j : j;
        const int64_t pos = o * p.stride[i] + tap * p.kernel_dilation[i] - p.padding_lo[i];
        if (pos >= 0 && pos < span && pos % id == 0) t[o * g.k[a] + j] = pos / id;
      }
    }
    if (g.k[a] != 1 || g.out[a] != g.in[a] || p.stride[i] != 1 || p.padding_lo[i] != 0 || id != 1) {
      g.identity = false;
    }
  }
  g.rows = g.N * g.out[0] * g.out[1] * g.out[2];
  g.taps = g.k[0] * g.k[1] * g.k[2];
  g.kc = g.taps * g.Cg;
  return g;
}

template <typename T>
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const T* a, int64_t lda, const T* b,
          int64_t ldb, T beta, T* c, int64_t ldc) {
  cpu::gemm<T>(ta, tb, M, N, K, T(1), a, lda, b, ldb, beta, c, ldc);
}

// C = A Bᵀ: the patches against the weight rows.
template <typename T>
void gemm_nt(int64_t M, int64_t N, int64_t K, const T* a, int64_t lda, const T* b, int64_t ldb,
             T beta, T* c, int64_t ldc) {
  gemm<T>(false, true, M, N, K, a, lda, b, ldb, beta, c, ldc);
}

// Fills patch rows [r0, r1) for group `grp`, taps [t0, t1), into `dst`
// (row stride (t1 - t0) * Cg).
template <typename T>
void im2col(const Geometry& g, const T* x, int64_t grp, int64_t r0, int64_t r1, int64_t t0,
            int64_t t1, T* dst) {
  const int64_t width = (t1 - t0) * g.Cg;
  const int64_t kk12 = g.k[1] * g.k[2];
  for (int64_t r = r0; r < r1; ++r) {
    const cpu::ConvRow ri = cpu::conv_row(g, r);
    T* d = dst + (r - r0) * width;
    const T* xn = x + ri.n * g.in[0] * g.in[1] * g.in[2] * g.C + grp * g.Cg;
    for (int64_t t = t0; t < t1; ++t, d += g.Cg) {
      const int64_t j0 = t / kk12;
      const int64_t j1 = (t / g.k[2]) % g.k[1];
      const int64_t j2 = t % g.k[2];
      const int64_t s0 = g.src[0][ri.o0 * g.k[0] + j0];
      const int64_t s1 = g.src[1][ri.o1 * g.k[1] + j1];
      const int64_t s2 = g.src[2][ri.o2 * g.k[2] + j2];
      if (s0 < 0 || s1 < 0 || s2 < 0) {
        std::fill(d, d + g.Cg, T(0));
      } else {
        const T* s = xn + ((s0 * g.in[1] + s1) * g.in[2] + s2) * g.C;
        std::copy(s, s + g.Cg, d);
      }
    }
  }
}

template <typename T>
void conv_gemm(const Geometry& g, const T* x, const T* w, T* out) {
  if (g.identity) {
    // 1x1 kernel read in place: group grp's channels of every row, lda = C.
    for (int64_t grp = 0; grp < g.G; ++grp) {
      gemm_nt<T>(g.rows, g.Og, g.Cg, x + grp * g.Cg, g.C, w + grp * g.Og * g.kc, g.kc, T(0),
                 out + grp * g.Og, g.O);
    }
    return;
  }
  // Block shape: whole patch rows when a block of them fits, else a range of
  // taps over at most kMaxRows rows.
  constexpr int64_t kMinRows = 64;
  int64_t block_rows, block_taps;
  if (g.kc * std::min(g.rows, kMinRows) <= kBlockElements) {
    block_taps = g.taps;
    block_rows =
        std::max<int64_t>(1, std::min(g.rows, kBlockElements / std::max<int64_t>(1, g.kc)));
  } else {
    block_rows = std::min<int64_t>(g.rows, 1024);
    block_taps = std::max<int64_t>(1, kBlockElements / (block_rows * g.Cg));
  }
  // Uninitialised: every element is written by im2col before sgemm reads it.
  std::unique_ptr<T[]> buffer(
      new T[static_cast<size_t>(block_rows * std::min(block_taps, g.taps) * g.Cg)]);
  T* patches = buffer.get();
  for (int64_t grp = 0; grp < g.G; ++grp) {
    for (int64_t r0 = 0; r0 < g.rows; r0 += block_rows) {
      const int64_t r1 = std::min(g.rows, r0 + block_rows);
      for (int64_t t0 = 0; t0 < g.taps; t0 += block_taps) {
        const int64_t t1 = std::min(g.taps, t0 + block_taps);
        const int64_t width = (t1 - t0) * g.Cg;
        const size_t grain =
            static_cast<size_t>(std::max<int64_t>(1, 16384 / std::max<int64_t>(1, width)));
        cpu::parallel_for(static_cast<size_t>(r1 - r0), grain, [&](size_t b, size_t e) {
          im2col(g, x, grp, r0 + static_cast<int64_t>(b), r0 + static_cast<int64_t>(e), t0, t1,
                 patches + static_cast<int64_t>(b) * width);
        });
        gemm_nt<T>(r1 - r0, g.Og, width, patches, width, w + grp * g.Og * g.kc + t0 * g.Cg, g.kc,
                   t0 == 0 ? T(0) : T(1), out + r0 * g.O + grp * g.Og, g.O);
      }
    }
  }
}

// One input channel per group (depthwise and its channel multipliers):
// out[r, o] = sum over taps of x[src, o / Og] * w[o, tap], vectorised over o.
template <typename T>
void conv_depthwise(const Geometry& g, const T* x, const T* w, T* out) {
  std::vector<T> wt(static_cast<size_t>(g.taps * g.O)); // tap-major
  for (int64_t o = 0; o < g.O; ++o) {
    for (int64_t t = 0; t < g.taps; ++t) wt[t * g.O + o] = w[o * g.taps + t];
  }
  const int64_t kk12 = g.k[1] * g.k[2];
  const size_t grain =
      static_cast<size_t>(std::max<int64_t>(1, 32768 / std::max<int64_t>(1, g.taps * g.O)));
  cpu::parallel_for(static_cast<size_t>(g.rows), grain, [&](size_t b, size_t e) {
    std::vector<T> acc(static_cast<size_t>(g.O));
    for (int64_t r = static_cast<int64_t>(b); r < static_cast<int64_t>(e); ++r) {
      const cpu::ConvRow ri = cpu::conv_row(g, r);
      std::fill(acc.begin(), acc.end(), T(0));
      const T* xn = x + ri.n * g.in[0] * g.in[1] * g.in[2] * g.C;
      for (int64_t t = 0; t < g.taps; ++t) {
        const int64_t s0 = g.src[0][ri.o0 * g.k[0] + t / kk12];
        const int64_t s1 = g.src[1][ri.o1 * g.k[1] + (t / g.k[2]) % g.k[1]];
        const int64_t s2 = g.src[2][ri.o2 * g.k[2] + t % g.k[2]];
        if (s0 < 0 || s1 < 0 || s2 < 0) continue;
        const T* xs = xn + ((s0 * g.in[1] + s1) * g.in[2] + s2) * g.C;
        const T* wr = wt.data() + t * g.O;
        T* a = acc.data();
        if (g.Og == 1) {
          for (int64_t o = 0; o < g.O; ++o) a[o] += xs[o] * wr[o];
        } else {
          for (int64_t o = 0; o < g.O; ++o) a[o] += xs[o / g.Og] * wr[o];
        }
      }
      std::copy(acc.begin(), acc.end(), out + r * g.O);
    }
  });
}

template <typename T>
void conv_typed(const Geometry& g, const T* x, const T* w, T* out) {
  if (g.kc == 0) {
    std::fill(out, out + g.rows * g.O, T(0));
    return;
  }
  if (g.Cg == 1 && g.G > 1) {
    conv_depthwise(g, x, w, out);
  } else if (std::is_same_v<T, float> && cpu::conv_direct_available() &&
             cpu::conv_direct_suits(g)) {
    cpu::conv_direct_f32(g, reinterpret_cast<const float*>(x), reinterpret_cast<const float*>(w),
                         reinterpret_cast<float*>(out));
  } else {
    conv_gemm(g, x, w, out);
  }
}

// The batch and channel axes of a row-contiguous array of shape
// (C, S..., N) whose memory is laid out as (N, S..., C): what the weight
// gradient convolves (the input and the cotangent with those axes swapped).
bool is_swapped_view(const array& a) {
  const Shape& sh = a.shape();
  const Strides& st = a.strides();
  const int nd = a.ndim();
  if (nd < 3 || sh[0] < 2 || st[0] != 1) return false;
  int64_t expected = sh[0];
  for (int d = nd - 2; d >= 1; --d) {
    if (sh[d] != 1 && st[d] != expected) return false;
    expected *= sh[d];
  }
  return sh[nd - 1] == 1 || st[nd - 1] == expected;
}

// Strides of shape (C, S..., N) laid out as (N, S..., C).
Strides swapped_strides(const Shape& sh) {
  const int nd = static_cast<int>(sh.size());
  Strides st(nd);
  st[0] = 1;
  int64_t step = sh[0];
  for (int d = nd - 2; d >= 1; --d) {
    st[d] = step;
    step *= sh[d];
  }
  st[nd - 1] = step;
  return st;
}

// `a` in the swapped layout, copied there if it is not (a broadcast cotangent).
// The copy walks the layout's memory order, (N, S..., C), so that it writes
// contiguously: in a's own order consecutive writes land a whole (S..., C)
// apart (the ResNet-stage weight gradient spent 11% of its time there).
array as_swapped(const array& a) {
  if (is_swapped_view(a)) return a;
  const int nd = a.ndim();
  Shape order{a.shape(nd - 1)};
  Strides order_strides{a.strides()[nd - 1]};
  for (int d = 1; d < nd - 1; ++d) {
    order.push_back(a.shape(d));
    order_strides.push_back(a.strides()[d]);
  }
  order.push_back(a.shape(0));
  order_strides.push_back(a.strides()[0]);
  array view = array::empty(order, a.dtype());
  view.copy_shared_buffer(a, order_strides, Flags{false, false, false}, a.data_size());
  view.set_status(Status::available);
  array stored = array::empty(order, a.dtype());
  cpu::copy_contiguous(view, stored);
  array out = array::empty(a.shape(), a.dtype());
  out.copy_shared_buffer(stored, swapped_strides(a.shape()), Flags{true, false, false}, a.size());
  out.set_status(Status::available);
  return out;
}

// The layout of the weight gradient: input I (B, S..., N) stored as (N, S..., B), weight
// W (O, P..., N) stored as (N, P..., O), output (B, Q..., O). Its sum runs over
// (n, p), which is where the memory is contiguous, so the GEMM contracts over
// rows: with X the input as stored and Z the patches of X for the "convolution"
// whose taps are the output positions q (columns (q, b)) at the positions p
// (rows (n, p)), out[b, q, o] = (Zᵀ W)[(q, b), o]. Z's rows are built a block
// at a time and the product accumulates over the blocks.
template <typename T>
void conv_swapped(const array& in, const array& wt, array& out, const ConvParams& p) {
  const int nd = in.ndim() - 2;
  const int64_t B = in.shape(0), N = in.shape(-1), O = wt.shape(0);
  // The stored shapes: X (N, S..., B) and W (N, P..., O).
  Shape xs{static_cast<int>(N)}, ws{0}, zs{static_cast<int>(N)};
  for (int i = 0; i < nd; ++i) {
    xs.push_back(in.shape(i + 1));
    ws.push_back(out.shape(i + 1)); // taps of the patches: the output positions q
    zs.push_back(wt.shape(i + 1));  // positions of the patches: the weight's taps p
  }
  xs.push_back(static_cast<int>(B));
  ws.push_back(static_cast<int>(B));
  zs.push_back(0);
  ConvParams zp{
      p.kernel_dilation, p.padding_lo, p.padding_hi, p.stride, p.input_dilation, 1, false};
  const Geometry g = make_geometry(xs, ws, zs, zp);
  const T* x = in.data<T>();
  const T* w = wt.data<T>();
  if (std::is_same_v<T, float> && cpu::conv_direct_available() &&
      cpu::conv_wgrad_direct_suits(g, O)) {
    // Its output is laid out as out's (b, q, o) already.
    cpu::conv_wgrad_direct_f32(g, reinterpret_cast<const float*>(x),
                               reinterpret_cast<const float*>(w), O, out.data<float>());
    return;
  }
  const int64_t width = g.kc; // Q * B
  const int64_t block = std::max<int64_t>(1, kBlockElements / std::max<int64_t>(1, width));
  std::unique_ptr<T[]> patches(new T[static_cast<size_t>(std::min(block, g.rows) * width)]);
  std::vector<T> acc(static_cast<size_t>(width * O));
  for (int64_t r0 = 0; r0 < g.rows; r0 += block) {
    const int64_t r1 = std::min(g.rows, r0 + block);
    const size_t grain = static_cast<size_t>(std::max<int64_t>(1, 16384 / width));
    cpu::parallel_for(static_cast<size_t>(r1 - r0), grain, [&](size_t b, size_t e) {
      im2col(g, x, 0, r0 + static_cast<int64_t>(b), r0 + static_cast<int64_t>(e), 0, g.taps,
             patches.get() + static_cast<int64_t>(b) * width);
    });
    gemm<T>(true, false, width, O, r1 - r0, patches.get(), width, w + r0 * O, O,
            r0 == 0 ? T(0) : T(1), acc.data(), O);
  }
  // (q, b) rows back to the output's (b, q).
  T* dst = out.data<T>();
  const int64_t Q = g.taps;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t q = 0; q < Q; ++q) {
      std::copy_n(acc.data() + (q * B + b) * O, O, dst + (b * Q + q) * O);
    }
  }
}

array as_float32(const array& a) {
  array out = array::empty(a.shape(), float32);
  cpu::copy_contiguous(a, out);
  out.set_status(Status::available);
  return out;
}

} // namespace

cpu::ConvGeometry cpu::make_conv_geometry(const Shape& xs, const Shape& ws, const Shape& os,
                                          const ConvParams& p) {
  return make_geometry(xs, ws, os, p);
}

void Convolution::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array& out = outputs[0];
  out.set_data(allocator::allocate(out.nbytes()));
  if (out.size() == 0) return;
  const Dtype dtype = out.dtype();
  if ((dtype == float32 || dtype == float64) && p_.groups == 1 && !p_.flip &&
      is_swapped_view(inputs[0]) && inputs[1].shape(-1) > 0) {
    const array w = as_swapped(inputs[1]);
    if (dtype == float32) {
      conv_swapped<float>(inputs[0], w, out, p_);
    } else {
      conv_swapped<double>(inputs[0], w, out, p_);
    }
    return;
  }
  if (dtype == float32 || dtype == float64) {
    array x = cpu::ensure_row_contiguous(inputs[0]);
    array w = cpu::ensure_row_contiguous(inputs[1]);
    const Geometry g = make_geometry(x.shape(), w.shape(), out.shape(), p_);
    if (dtype == float32) {
      conv_typed<float>(g, x.data<float>(), w.data<float>(), out.data<float>());
    } else {
      conv_typed<double>(g, x.data<double>(), w.data<double>(), out.data<double>());
    }
    return;
  }
  if (dtype != float16 && dtype != bfloat16) {
    throw std::invalid_argument("[conv] Unsupported type " + dtype_name(dtype) + ".");
  }
  array x = as_float32(inputs[0]);
  array w = as_float32(inputs[1]);
  const Geometry g = make_geometry(x.shape(), w.shape(), out.shape(), p_);
  std::vector<float> result(static_cast<size_t>(out.size()));
  conv_typed<float>(g, x.data<float>(), w.data<float>(), result.data());
  char* dst = out.data<char>();
  cpu::parallel_for(out.size(), 1 << 16, [&](size_t b, size_t e) {
    cpu::convert_buffer(result.data() + b, float32, dst + b * out.itemsize(), dtype, e - b);
  });
}

// The composite, op by op: the same kernels on the same views as the graph
// Convolution::vjp built before the gradient nodes, so the same bits.
void ConvolutionGrad::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  outputs[0].copy_shared_buffer(
      run_composite(inputs, [](Primitive& p, const std::vector<array>& in,
                               std::vector<array>& out) { p.eval_cpu(in, out); }));
}

} // namespace loom
