// CPU kernels of mx.fast.scaled_dot_product_attention, forward and backward.
// Each head runs as products around a softmax over a block of query rows
// whose scores stay in cache; the backward recomputes the scores block by
// block rather than storing them, so memory stays O(L * block), never
// L x L. float32 products run on register tiles over keys and values packed
// once per head (fast_attention_tiles.h) where the CPU has AVX-512, else as
// BLAS products (cpu::gemm). Half precision computes in float32 and rounds
// once at the end; float64 in double.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "loom/backend/cpu/copy.h"
#include "loom/backend/cpu/fast.h"
#include "loom/backend/cpu/fast_attention_tiles.h"
#include "loom/backend/cpu/gemm.h"
#include "loom/backend/cpu/thread_pool.h"
#include "loom/primitives/elementwise_scalar.h"
#include "loom/primitives/fast.h"
#include "loom/types/dispatch.h"

namespace loom {

using namespace cpu::fast_kernels;
namespace tiles = cpu::attention_tiles;

// Attention --------------------------------------------------------------------------

namespace {

// Inside a parallel region each product runs on its thread (cpu::gemm does
// not split nested calls); outside one it is split over the pool.
template <typename C>
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, C alpha, const C* a, int64_t lda,
          const C* b, int64_t ldb, C beta, C* c, int64_t ldc) {
  cpu::gemm<C>(ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
}

// Reductions over a row in independent lanes, so that they vectorise (one
// accumulator is a serial chain).
template <typename C>
C lane_max(const C* x, int64_t n) {
  constexpr int64_t L = 16;
  C lanes[L];
  for (int64_t l = 0; l < L; ++l) lanes[l] = -std::numeric_limits<C>::infinity();
  const int64_t full = n - n % L;
  for (int64_t j = 0; j < full; j += L) {
    for (int64_t l = 0; l < L; ++l) lanes[l] = x[j + l] > lanes[l] ? x[j + l] : lanes[l];
  }
  C m = -std::numeric_limits<C>::infinity();
  for (int64_t j = full; j < n; ++j) m = x[j] > m ? x[j] : m;
  for (int64_t l = 0; l < L; ++l) m = lanes[l] > m ? lanes[l] : m;
  return m;
}

// e^y for y <= 0 (the scores less their row's maximum). Below e^-87 the
// weight is flushed to 0: next to the maximum's weight of 1 it is under
// 1e-38, and skipping exp_f32's subnormal and overflow handling makes the
// softmax's exponentials a quarter cheaper. NaN stays NaN.
template <typename C>
C shifted_exp(C y) {
  if constexpr (std::is_same_v<C, float>) {
    const float e = scalar::exp_f32_bounded(y < -87.0f ? -87.0f : y);
    return y < -87.0f ? 0.0f : e;
  } else {
    return std::exp(y);
  }
}

// x[j] = exp(x[j] - shift), returning the sum, in lanes.
template <typename C>
C exp_sum(C* x, int64_t n, C shift) {
  constexpr int64_t L = 16;
  C lanes[L] = {};
  const int64_t full = n - n % L;
  for (int64_t j = 0; j < full; j += L) {
    for (int64_t l = 0; l < L; ++l) {
      x[j + l] = shifted_exp<C>(x[j + l] - shift);
      lanes[l] += x[j + l];
    }
  }
  C total = 0;
  for (int64_t j = full; j < n; ++j) {
    x[j] = shifted_exp<C>(x[j] - shift);
    total += x[j];
  }
  for (int64_t l = 0; l < L; ++l) total += lanes[l];
  return total;
}

// What the forward and backward share: the inputs in the compute type and
// the recomputation of a block of one head's probabilities.
template <typename C>
struct Attention {
  int64_t B, Nq, Nkv, Tq, Tk, D, Dv, groups;
  float scale;
  bool causal;
  Dense<C> q, k, v, sinks;
  bool has_sinks = false;
  // The mask (bool or additive), a broadcast view of shape (B, Nq, Tq, Tk).
  const array* mask = nullptr;
  // float32 products through the register tiles (fast_attention_tiles.h)
  // rather than BLAS: where they run, and with enough query rows per head
  // to pay for packing its keys and values.
  bool use_tiles = false;

  // Keys that rows [i0, i0 + rows) can see: with a causal mask the keys past
  // the block's last row get probability exactly 0 (exp of the lowest finite
  // value minus a finite maximum), so the products skip them. A row that
  // sees no key at all weighs every key equally (MLX): then all of them.
  int64_t visible_keys(int64_t i0, int64_t rows) const {
    if (!causal || i0 + Tk - Tq < 0) return Tk;
    return std::min(Tk, i0 + rows + Tk - Tq);
  }

  // Rows [i0, i0 + rows) of scale q k^T of head (b, h) over the first `kn`
  // keys into P (leading dimension ld). `packed`: the head's keys packed for
  // the tiles, or null for a BLAS product.
  void scores(int64_t b, int64_t h, int64_t i0, int64_t rows, int64_t kn, const float* packed, C* P,
              int64_t ld) const {
    const C* Q = q.ptr + ((b * Nq + h) * Tq + i0) * D;
    if constexpr (std::is_same_v<C, float>) {
      if (packed != nullptr) {
        tiles::product_nt(rows, kn, D, scale, Q, D, packed, P, ld);
        return;
      }
    }
    const C* K = k.ptr + (b * Nkv + h / groups) * Tk * D;
    gemm<C>(false, true, rows, kn, D, static_cast<C>(scale), Q, D, K, D, C(0), P, ld);
  }

  // Turns the scores in P (rows [i0, i0 + rows) of head (b, h)) into
  // exp(score - row maximum) after the masks, with inv[r] = 1 / (row sum +
  // sink weight) and, if sink_p is given, the sink's probability per row.
  // The rows stay unnormalised: the products that read them scale by inv
  // (rows x Dv multiplies instead of a pass over rows x kn).
  void softmax_rows(int64_t b, int64_t h, int64_t i0, int64_t rows, int64_t kn, C* P, int64_t ld,
                    C* inv, C* sink_p) const {
    // Boolean and causal masks write the lowest finite value, as MLX does: a
    // row with every key masked then weighs them equally (or gives all its
    // weight to a sink) instead of turning into NaN.
    const C masked = std::numeric_limits<C>::lowest();
    const C sink = has_sinks ? sinks.ptr[h] : -std::numeric_limits<C>::infinity();
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = i0 + r;
      C* row = P + r * ld;
      if (mask != nullptr) {
        const Strides& st = mask->strides();
        const int64_t base = b * st[0] + h * st[1] + static_cast<int64_t>(i) * st[2];
        if (mask->dtype() == bool_) {
          const bool* m = mask->data<bool>() + base;
          for (int64_t j = 0; j < kn; ++j) row[j] = m[j * st[3]] ? row[j] : masked;
        } else {
          dispatch_floating(mask->dtype(), "scaled_dot_product_attention", [&](auto mt) {
            using M = decltype(mt);
            const M* m = mask->data<M>() + base;
            for (int64_t j = 0; j < kn; ++j) row[j] += static_cast<C>(m[j * st[3]]);
          });
        }
      }
      if (causal) {
        const int64_t last = static_cast<int64_t>(i) + Tk - Tq; // last visible key
        for (int64_t j = std::max<int64_t>(last + 1, 0); j < kn; ++j) row[j] = masked;
      }
      C mx, total;
      if constexpr (std::is_same_v<C, float>) {
        if (use_tiles) {
          mx = std::max(sink, tiles::row_max(row, kn));
          total = tiles::exp_sum(row, kn, mx);
        } else {
          mx = std::max(sink, lane_max(row, kn));
          total = exp_sum(row, kn, mx);
        }
      } else {
        mx = std::max(sink, lane_max(row, kn));
        total = exp_sum(row, kn, mx);
      }
      const C sink_e = has_sinks ? exp_of<C>(sink - mx) : C(0);
      total += sink_e;
      // No key and no sink: an empty sum, whose rows of O are 0.
      inv[r] = total == C(0) ? C(0) : C(1) / total;
      if (sink_p != nullptr) sink_p[r] = sink_e * inv[r];
    }
  }

  // Packs each (batch, kv head)'s keys (or values: `src`, width w) for the
  // tiles, over the pool: one buffer of B * Nkv heads.
  std::vector<float> pack_heads(const C* src, int64_t w) const {
    std::vector<float> out;
    if constexpr (std::is_same_v<C, float>) {
      const size_t each = tiles::packed_size(Tk, w);
      out.resize(each * B * Nkv);
      for_tasks(B * Nkv, [&](auto next) {
        for (int64_t t = next(); t >= 0; t = next()) {
          tiles::pack(src + t * Tk * w, Tk, w, w, out.data() + t * each);
        }
      });
    }
    return out;
  }

  // A masked score does not depend on q or k: its entries of dS are 0. Only
  // a row that sees no key has weight there (elsewhere P is exactly 0).
  void clear_masked(int64_t b, int64_t h, int64_t i, C* ds, int64_t kn) const {
    if (causal && i + Tk - Tq < 0) {
      std::fill(ds, ds + kn, C(0));
    } else if (mask != nullptr && mask->dtype() == bool_) {
      const Strides& st = mask->strides();
      const bool* m = mask->data<bool>() + b * st[0] + h * st[1] + i * st[2];
      for (int64_t j = 0; j < kn; ++j) ds[j] = m[j * st[3]] ? ds[j] : C(0);
    }
  }

  // The leading dimension of a block's scores over kn keys: a row of 1024
  // floats is 4 KiB, and rows that far apart share one L1 set, so a tile
  // reading down a column (P^T, dS^T) would evict its own lines; padding
  // the rows by a line spreads them over the sets.
  int64_t scores_ld(int64_t kn) const { return use_tiles ? (kn + 15) / 16 * 16 + 16 : kn; }

  // Query rows per block: about 512 KiB of scores, so a block fits in L2.
  int64_t block_rows() const {
    // (BLAS products: 128K to 1M scores per block within 2% at L 1024, their
    // packing set the pace. Tiles: 64K and 128K level in CPU time.)
    const int64_t rows = std::max<int64_t>(16, (int64_t{1} << 17) / std::max<int64_t>(Tk, 1));
    return std::min(rows, std::max<int64_t>(Tq, 1));
  }

  // Runs worker(next) on every pool thread, where next() hands out task
  // indices [0, count) (then -1) to whichever thread asks first: on a loaded
  // machine a thread that was descheduled takes fewer tasks instead of
  // holding the others up at the end (a static split lost half the time).
  // Each worker owns its scratch buffers for all its tasks; its products
  // run on its thread. With fewer tasks than threads they run on the
  // calling thread, each product split over the pool by cpu::gemm.
  // The tiles run each task on its thread: with fewer tasks than threads
  // the BLAS path, which splits each product over the pool, is used instead.
  static bool leaves_threads_idle(int64_t count) {
    return count < cpu::num_threads() && !cpu::in_parallel_region();
  }

  template <typename Worker>
  void for_tasks(int64_t count, Worker&& worker) const {
    const int threads = cpu::num_threads();
    if (threads > 1 && count >= threads && !cpu::in_parallel_region()) {
      std::atomic<int64_t> next{0};
      cpu::parallel_chunks(static_cast<size_t>(threads), [&](size_t) {
        worker([&]() -> int64_t {
          const int64_t t = next.fetch_add(1);
          return t < count ? t : -1;
        });
      });
    } else {
      int64_t t = 0;
      worker([&]() -> int64_t { return t < count ? t++ : -1; });
    }
  }
};

// Query rows per head from which the tiles pay for packing the head's keys
// and values (each product reads them Tq times).
constexpr int64_t kTileRows = 16;

template <typename T, typename C>
Attention<C> attention_inputs(const std::vector<array>& inputs, float scale,
                              const std::string& mode, bool has_sinks) {
  Attention<C> a;
  const array& q = inputs[0];
  const array& k = inputs[1];
  const array& v = inputs[2];
  a.B = q.shape(0);
  a.Nq = q.shape(1);
  a.Nkv = k.shape(1);
  a.Tq = q.shape(2);
  a.Tk = k.shape(2);
  a.D = q.shape(3);
  a.Dv = v.shape(3);
  a.groups = a.Nq / a.Nkv;
  a.scale = scale;
  a.causal = mode == "causal";
  a.q = dense<T, C>(q);
  a.k = dense<T, C>(k);
  a.v = dense<T, C>(v);
  size_t next = 3;
  if (mode == "array") a.mask = &inputs[next++];
  if (has_sinks) {
    a.sinks = dense<T, C>(inputs[next++]);
    a.has_sinks = true;
  }
  a.use_tiles = std::is_same_v<C, float> && tiles::available() && a.Tq >= kTileRows;
  return a;
}

template <typename T, typename C>
void store(const C* src, T* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = static_cast<T>(src[i]);
}

// Where a gradient is accumulated: the output itself when it has the
// compute type, else a buffer rounded into it at the end.
template <typename T, typename C>
struct Accumulator {
  std::vector<C> owned;
  C* ptr;
  explicit Accumulator(array& out) {
    if constexpr (std::is_same_v<T, C>) {
      ptr = out.data<C>();
    } else {
      owned.resize(out.size());
      ptr = owned.data();
    }
  }
  void finish(array& out) const {
    if constexpr (!std::is_same_v<T, C>) store(ptr, out.data<T>(), out.size());
  }
};

} // namespace

void ScaledDotProductAttention::eval_cpu(const std::vector<array>& inputs,
                                         std::vector<array>& outputs) {
  array& out = outputs[0];
  out.set_data(allocator::allocate(out.nbytes()));
  if (out.size() == 0) return;
  dispatch_floating(out.dtype(), "scaled_dot_product_attention", [&](auto tag) {
    using T = decltype(tag);
    using C = Acc<T>;
    auto a = attention_inputs<T, C>(inputs, scale_, mask_mode_, has_sinks_);
    T* po = out.data<T>();
    const int64_t block = a.block_rows();
    const int64_t blocks = (a.Tq + block - 1) / block;
    const int64_t heads = a.B * a.Nq;
    if (a.leaves_threads_idle(heads * blocks)) a.use_tiles = false;
    const std::vector<float> kp = a.use_tiles ? a.pack_heads(a.k.ptr, a.D) : std::vector<float>{};
    const size_t kp_each = a.use_tiles ? tiles::packed_size(a.Tk, a.D) : 0;
    // One task per (head, query block), a head's blocks one after another
    // (its keys and values stay in cache between them), the last first:
    // under a causal mask they see the most keys, so the cheap ones end.
    a.for_tasks(heads * blocks, [&](auto next) {
      std::vector<C> P(block * a.scores_ld(a.Tk)), inv(block);
      std::vector<C> O(std::is_same_v<T, C> ? 0 : block * a.Dv);
      for (int64_t t = next(); t >= 0; t = next()) {
        const int64_t bh = t / blocks, i0 = (blocks - 1 - t % blocks) * block;
        const int64_t b = bh / a.Nq, h = bh % a.Nq;
        const int64_t bk = b * a.Nkv + h / a.groups;
        const C* V = a.v.ptr + bk * a.Tk * a.Dv;
        const int64_t rows = std::min(block, a.Tq - i0);
        const int64_t kn = a.visible_keys(i0, rows), ld = a.scores_ld(kn);
        a.scores(b, h, i0, rows, kn, a.use_tiles ? kp.data() + bk * kp_each : nullptr, P.data(),
                 ld);
        a.softmax_rows(b, h, i0, rows, kn, P.data(), ld, inv.data(), nullptr);
        T* dst = po + (bh * a.Tq + i0) * a.Dv;
        C* o = nullptr;
        if constexpr (std::is_same_v<T, C>) {
          o = dst;
        } else {
          o = O.data();
        }
        // O = diag(inv) E V.
        bool done = false;
        if constexpr (std::is_same_v<C, float>) {
          if (a.use_tiles) {
            tiles::product_nn(rows, a.Dv, kn, 1.0f, P.data(), ld, 1, V, a.Dv, inv.data(), false, o,
                              a.Dv);
            done = true;
          }
        }
        if (!done) {
          gemm<C>(false, false, rows, a.Dv, kn, C(1), P.data(), ld, V, a.Dv, C(0), o, a.Dv);
          for (int64_t r = 0; r < rows; ++r) {
            for (int64_t j = 0; j < a.Dv; ++j) o[r * a.Dv + j] *= inv[r];
          }
        }
        if constexpr (!std::is_same_v<T, C>) store(O.data(), dst, rows * a.Dv);
      }
    });
  });
}

void ScaledDotProductAttentionVJP::eval_cpu(const std::vector<array>& inputs,
                                            std::vector<array>& outputs) {
  for (auto& o : outputs) o.set_data(allocator::allocate(o.nbytes()));
  const size_t n = inputs.size();
  dispatch_floating(outputs[0].dtype(), "scaled_dot_product_attention", [&](auto tag) {
    using T = decltype(tag);
    using C = Acc<T>;
    auto a = attention_inputs<T, C>(inputs, scale_, mask_mode_, has_sinks_);
    if (a.leaves_threads_idle(a.B * a.Nkv)) a.use_tiles = false;
    Dense<C> O = dense<T, C>(inputs[n - 2]);
    Dense<C> dO = dense<T, C>(inputs[n - 1]);
    // Each task's first block writes its dK and dV rows with beta 0 (and
    // zeroes those a causal first block does not reach): no pass to clear them.
    Accumulator<T, C> dq(outputs[0]), dk(outputs[1]), dv(outputs[2]);
    std::vector<C> dsink_parts(a.B * a.Nq, C(0));
    if (a.Tq == 0) { // no query: no block to write the key gradients
      std::fill(dk.ptr, dk.ptr + outputs[1].size(), C(0));
      std::fill(dv.ptr, dv.ptr + outputs[2].size(), C(0));
    }
    const int64_t block = a.block_rows();
    const C scale = static_cast<C>(scale_);
    // One task per (batch, kv head): the query heads sharing it add into
    // its dK and dV in turn, so no two tasks write the same memory.
    a.for_tasks(a.B * a.Nkv, [&](auto next) {
      const size_t scratch = block * a.scores_ld(a.Tk);
      std::vector<C> P(scratch), dP(scratch), inv(block), rowdot(block), sink_p(block);
      std::vector<float> kp, vp;
      if (a.use_tiles) {
        kp.resize(tiles::packed_size(a.Tk, a.D));
        vp.resize(tiles::packed_size(a.Tk, a.Dv));
      }
      for (int64_t bk = next(); bk >= 0; bk = next()) {
        const int64_t b = bk / a.Nkv, hk = bk % a.Nkv;
        const C* K = a.k.ptr + bk * a.Tk * a.D;
        const C* V = a.v.ptr + bk * a.Tk * a.Dv;
        C* dK = dk.ptr + bk * a.Tk * a.D;
        C* dV = dv.ptr + bk * a.Tk * a.Dv;
        if constexpr (std::is_same_v<C, float>) {
          if (a.use_tiles) {
            tiles::pack(K, a.Tk, a.D, a.D, kp.data());
            tiles::pack(V, a.Tk, a.Dv, a.Dv, vp.data());
          }
        }
        for (int64_t h = hk * a.groups; h < (hk + 1) * a.groups; ++h) {
          for (int64_t i0 = 0; i0 < a.Tq; i0 += block) {
            const int64_t rows = std::min(block, a.Tq - i0);
            const int64_t kn = a.visible_keys(i0, rows), ld = a.scores_ld(kn);
            a.scores(b, h, i0, rows, kn, a.use_tiles ? kp.data() : nullptr, P.data(), ld);
            a.softmax_rows(b, h, i0, rows, kn, P.data(), ld, inv.data(),
                           a.has_sinks ? sink_p.data() : nullptr);
            const int64_t at = (b * a.Nq + h) * a.Tq + i0; // first row of the block
            const C* Q = a.q.ptr + at * a.D;
            const C* Oh = O.ptr + at * a.Dv;
            const C* dOh = dO.ptr + at * a.Dv;
            C* dQ = dq.ptr + at * a.D;
            const bool first = h == hk * a.groups && i0 == 0;
            if (first) {
              std::fill(dK + kn * a.D, dK + a.Tk * a.D, C(0));
              std::fill(dV + kn * a.Dv, dV + a.Tk * a.Dv, C(0));
            }
            // dP = dO V^T.
            bool tiled = false;
            if constexpr (std::is_same_v<C, float>) {
              if (a.use_tiles) {
                tiles::product_nt(rows, kn, a.Dv, 1.0f, dOh, a.Dv, vp.data(), dP.data(), ld);
                tiled = true;
              }
            }
            if (!tiled) {
              gemm<C>(false, true, rows, kn, a.Dv, C(1), dOh, a.Dv, V, a.Dv, C(0), dP.data(), ld);
            }
            // One pass normalises P and turns dP into dS = P (dP - rowsum(dO o O)),
            // the softmax's backward per row.
            for (int64_t r = 0; r < rows; ++r) {
              C d = 0;
              for (int64_t j = 0; j < a.Dv; ++j) d += dOh[r * a.Dv + j] * Oh[r * a.Dv + j];
              rowdot[r] = d;
              const C iv = inv[r];
              C* prow = P.data() + r * ld;
              C* drow = dP.data() + r * ld;
              for (int64_t j = 0; j < kn; ++j) {
                const C p = prow[j] * iv;
                prow[j] = p;
                drow[j] = p * (drow[j] - d);
              }
              a.clear_masked(b, h, i0 + r, drow, kn);
            }
            if (a.has_sinks) {
              for (int64_t r = 0; r < rows; ++r) {
                dsink_parts[b * a.Nq + h] -= sink_p[r] * rowdot[r];
              }
            }
            // dV += P^T dO; dQ = scale dS K; dK += scale dS^T Q.
            if constexpr (std::is_same_v<C, float>) {
              if (tiled) {
                tiles::product_nn(kn, a.Dv, rows, 1.0f, P.data(), 1, ld, dOh, a.Dv, nullptr, !first,
                                  dV, a.Dv);
                tiles::product_nn(rows, a.D, kn, scale, dP.data(), ld, 1, K, a.D, nullptr, false,
                                  dQ, a.D);
                tiles::product_nn(kn, a.D, rows, scale, dP.data(), 1, ld, Q, a.D, nullptr, !first,
                                  dK, a.D);
              }
            }
            if (!tiled) {
              const C acc = first ? C(0) : C(1);
              gemm<C>(true, false, kn, a.Dv, rows, C(1), P.data(), ld, dOh, a.Dv, acc, dV, a.Dv);
              gemm<C>(false, false, rows, a.D, kn, scale, dP.data(), ld, K, a.D, C(0), dQ, a.D);
              gemm<C>(true, false, kn, a.D, rows, scale, dP.data(), ld, Q, a.D, acc, dK, a.D);
            }
          }
        }
      }
    });
    dq.finish(outputs[0]);
    dk.finish(outputs[1]);
    dv.finish(outputs[2]);
    if (has_sinks_) {
      std::vector<C> dsinks(a.Nq, C(0));
      for (int64_t b = 0; b < a.B; ++b) {
        for (int64_t h = 0; h < a.Nq; ++h) dsinks[h] += dsink_parts[b * a.Nq + h];
      }
      store(dsinks.data(), outputs[3].data<T>(), dsinks.size());
    }
  });
}

} // namespace loom
