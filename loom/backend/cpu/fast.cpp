// CPU kernels of mx.fast. Rows (normalisations, cross entropy) and heads
// (attention, the delta rule) are independent and split across the intra-op
// pool. Half precision is computed in float32 and rounded once at the end;
// float64 in double. Attention runs per head as BLAS products around a
// softmax over rows still in cache, forward and backward (scores are
// recomputed in the backward pass rather than stored).
#include "loom/primitives/fast.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <mutex>
#include <type_traits>
#include <vector>

#include "loom/backend/cpu/copy.h"
#include "loom/backend/cpu/gemm.h"
#include "loom/backend/cpu/thread_pool.h"
#include "loom/primitives/elementwise_scalar.h"
#include "loom/types/dispatch.h"

namespace loom {

namespace {

template <typename T>
using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename Fn>
void dispatch_float(Dtype d, const char* op, Fn&& fn) {
  switch (d.val) {
    case Dtype::Val::float32:
      return fn(float{});
    case Dtype::Val::float64:
      return fn(double{});
    case Dtype::Val::float16:
      return fn(float16_t{});
    case Dtype::Val::bfloat16:
      return fn(bfloat16_t{});
    default:
      throw std::invalid_argument(std::string("[") + op + "] Unsupported dtype " + dtype_name(d) +
                                  ".");
  }
}

template <typename C>
C exp_of(C v) {
  if constexpr (std::is_same_v<C, float>) {
    return scalar::exp_f32(v);
  } else {
    return std::exp(v);
  }
}

size_t row_grain(size_t n) {
  return std::max<size_t>(1, (size_t{1} << 14) / std::max<size_t>(n, 1));
}

// A contiguous copy of `a` in the compute type C (a view when it already is).
template <typename C>
struct Dense {
  std::vector<C> owned;
  const C* ptr = nullptr;
};

template <typename T, typename C>
Dense<C> dense(const array& a) {
  Dense<C> d;
  array c = cpu::ensure_row_contiguous(a);
  if constexpr (std::is_same_v<T, C>) {
    if (c.data_shared_ptr() == a.data_shared_ptr()) {
      d.ptr = a.data<C>();
      return d;
    }
    d.owned.assign(c.data<C>(), c.data<C>() + c.size());
  } else {
    const T* src = c.data<T>();
    d.owned.resize(c.size());
    for (size_t i = 0; i < c.size(); ++i) d.owned[i] = static_cast<C>(src[i]);
  }
  d.ptr = d.owned.data();
  return d;
}

} // namespace

// Normalisations --------------------------------------------------------------------

void RMSNorm::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array x = cpu::ensure_row_contiguous(inputs[0]);
  array& out = outputs[0];
  out.set_data(allocator::allocate(out.nbytes()));
  if (out.size() == 0) return;
  const size_t n = x.shape(-1);
  const size_t rows = x.size() / n;
  dispatch_float(out.dtype(), "rms_norm", [&](auto tag) {
    using T = decltype(tag);
    using C = Acc<T>;
    const T* px = x.data<T>();
    T* py = out.data<T>();
    std::vector<C> w(n, C(1));
    if (has_weight_) {
      array wa = cpu::ensure_row_contiguous(inputs[1]);
      for (size_t j = 0; j < n; ++j) w[j] = static_cast<C>(wa.data<T>()[j]);
    }
    const C eps = static_cast<C>(eps_);
    cpu::parallel_for(rows, row_grain(n), [&](size_t b, size_t e) {
      for (size_t r = b; r < e; ++r) {
        const T* xr = px + r * n;
        T* yr = py + r * n;
        C ss = 0;
        for (size_t j = 0; j < n; ++j) {
          C v = static_cast<C>(xr[j]);
          ss += v * v;
        }
        const C inv = C(1) / std::sqrt(ss / static_cast<C>(n) + eps);
        for (size_t j = 0; j < n; ++j) yr[j] = static_cast<T>(static_cast<C>(xr[j]) * inv * w[j]);
      }
    });
  });
}

void LayerNorm::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array x = cpu::ensure_row_contiguous(inputs[0]);
  array& out = outputs[0];
  out.set_data(allocator::allocate(out.nbytes()));
  if (out.size() == 0) return;
  const size_t n = x.shape(-1);
  const size_t rows = x.size() / n;
  dispatch_float(out.dtype(), "layer_norm", [&](auto tag) {
    using T = decltype(tag);
    using C = Acc<T>;
    const T* px = x.data<T>();
    T* py = out.data<T>();
    std::vector<C> w(n, C(1)), bias(n, C(0));
    size_t next = 1;
    if (has_weight_) {
      array wa = cpu::ensure_row_contiguous(inputs[next++]);
      for (size_t j = 0; j < n; ++j) w[j] = static_cast<C>(wa.data<T>()[j]);
    }
    if (has_bias_) {
      array ba = cpu::ensure_row_contiguous(inputs[next++]);
      for (size_t j = 0; j < n; ++j) bias[j] = static_cast<C>(ba.data<T>()[j]);
    }
    const C eps = static_cast<C>(eps_);
    cpu::parallel_for(rows, row_grain(n), [&](size_t b, size_t e) {
      for (size_t r = b; r < e; ++r) {
        const T* xr = px + r * n;
        T* yr = py + r * n;
        C total = 0;
        for (size_t j = 0; j < n; ++j) total += static_cast<C>(xr[j]);
        const C mu = total / static_cast<C>(n);
        // The variance about the mean (a second pass: no cancellation).
        C ss = 0;
        for (size_t j = 0; j < n; ++j) {
          C d = static_cast<C>(xr[j]) - mu;
          ss += d * d;
        }
        const C inv = C(1) / std::sqrt(ss / static_cast<C>(n) + eps);
        for (size_t j = 0; j < n; ++j) {
          yr[j] = static_cast<T>((static_cast<C>(xr[j]) - mu) * inv * w[j] + bias[j]);
        }
      }
    });
  });
}

// RoPE -------------------------------------------------------------------------------

void RoPE::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array x = cpu::ensure_row_contiguous(inputs[0]);
  array offset = cpu::ensure_row_contiguous(inputs[1]);
  array& out = outputs[0];
  out.set_data(allocator::allocate(out.nbytes()));
  if (out.size() == 0) return;
  const int64_t D = x.shape(-1);
  const int64_t T = x.shape(-2);
  const int64_t batch = x.shape(0);
  const int64_t per_batch = x.size() / (batch * T * D); // the middle axes (heads)
  const int half = dims_ / 2;
  // Angles per (batch entry, position, frequency), in double then rounded,
  // so that float32 matches the composite's float32 angles closely.
  std::vector<float> inv_freq(half);
  if (base_ > 0) {
    for (int i = 0; i < half; ++i) {
      inv_freq[i] = std::exp(static_cast<float>(i) * static_cast<float>(-std::log(base_) / half));
    }
  } else {
    array f = cpu::ensure_row_contiguous(inputs[2]);
    for (int i = 0; i < half; ++i) inv_freq[i] = 1.0f / f.data<float>()[i];
  }
  const bool per_entry = offset.size() != 1;
  const int64_t tables = per_entry ? batch : 1;
  std::vector<float> cos_t(tables * T * half), sin_t(tables * T * half);
  const float sign = forward_ ? 1.0f : -1.0f;
  for (int64_t b = 0; b < tables; ++b) {
    const float off = static_cast<float>(offset.data<int32_t>()[b]);
    for (int64_t t = 0; t < T; ++t) {
      const float pos = (static_cast<float>(t) + off) * static_cast<float>(scale_);
      for (int i = 0; i < half; ++i) {
        const float theta = pos * inv_freq[i];
        cos_t[(b * T + t) * half + i] = std::cos(theta);
        sin_t[(b * T + t) * half + i] = sign * std::sin(theta);
      }
    }
  }
  const int64_t rows = batch * per_batch * T;
  dispatch_float(out.dtype(), "rope", [&](auto tag) {
    using T_ = decltype(tag);
    using C = Acc<T_>;
    const T_* px = x.data<T_>();
    T_* py = out.data<T_>();
    cpu::parallel_for(rows, row_grain(D), [&](size_t b, size_t e) {
      for (size_t r = b; r < e; ++r) {
        const int64_t t = static_cast<int64_t>(r) % T;
        const int64_t entry = static_cast<int64_t>(r) / (T * per_batch);
        const int64_t table = per_entry ? entry : 0;
        const float* c = cos_t.data() + (table * T + t) * half;
        const float* sn = sin_t.data() + (table * T + t) * half;
        const T_* xr = px + r * D;
        T_* yr = py + r * D;
        for (int i = 0; i < half; ++i) {
          const int64_t ia = traditional_ ? 2 * i : i;
          const int64_t ib = traditional_ ? 2 * i + 1 : i + half;
          const C a = static_cast<C>(xr[ia]);
          const C bb = static_cast<C>(xr[ib]);
          yr[ia] = static_cast<T_>(a * c[i] - bb * sn[i]);
          yr[ib] = static_cast<T_>(a * sn[i] + bb * c[i]);
        }
        for (int64_t j = dims_; j < D; ++j) yr[j] = xr[j];
      }
    });
  });
}

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

  // Keys that rows [i0, i0 + rows) can see: with a causal mask the keys past
  // the block's last row get probability exactly 0 (exp of the lowest finite
  // value minus a finite maximum), so the products skip them. A row that
  // sees no key at all weighs every key equally (MLX): then all of them.
  int64_t visible_keys(int64_t i0, int64_t rows) const {
    if (!causal || i0 + Tk - Tq < 0) return Tk;
    return std::min(Tk, i0 + rows + Tk - Tq);
  }

  // Rows [i0, i0 + rows) of P (Tq x Tk) of head (b, h) over the first `kn`
  // keys, with leading dimension kn, and the sink's probability per row if
  // any: a block of queries whose scores stay in cache between the products
  // around the softmax.
  void probabilities(int64_t b, int64_t h, int64_t i0, int64_t rows, int64_t kn, C* P,
                     C* sink_p) const {
    const C* Q = q.ptr + ((b * Nq + h) * Tq + i0) * D;
    const C* K = k.ptr + (b * Nkv + h / groups) * Tk * D;
    gemm<C>(false, true, rows, kn, D, static_cast<C>(scale), Q, D, K, D, C(0), P, kn);
    // Boolean and causal masks write the lowest finite value, as MLX does: a
    // row with every key masked then weighs them equally (or gives all its
    // weight to a sink) instead of turning into NaN.
    const C masked = std::numeric_limits<C>::lowest();
    const C sink = has_sinks ? sinks.ptr[h] : -std::numeric_limits<C>::infinity();
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = i0 + r;
      C* row = P + r * kn;
      if (mask != nullptr) {
        const Strides& st = mask->strides();
        const int64_t base = b * st[0] + h * st[1] + static_cast<int64_t>(i) * st[2];
        if (mask->dtype() == bool_) {
          const bool* m = mask->data<bool>() + base;
          for (int64_t j = 0; j < kn; ++j) row[j] = m[j * st[3]] ? row[j] : masked;
        } else {
          dispatch_float(mask->dtype(), "scaled_dot_product_attention", [&](auto mt) {
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
      const C mx = std::max(sink, lane_max(row, kn));
      const C sink_e = has_sinks ? exp_of<C>(sink - mx) : C(0);
      const C inv = C(1) / (sink_e + exp_sum(row, kn, mx));
      for (int64_t j = 0; j < kn; ++j) row[j] *= inv;
      if (sink_p != nullptr) sink_p[r] = sink_e * inv;
    }
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

  // Query rows per block: about 512 KiB of scores, so a block fits in L2.
  int64_t block_rows() const {
    // (128K to 1M scores per block measured within 2% at L 1024: the
    // products' packing, not the cache, sets the pace.)
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
  dispatch_float(out.dtype(), "scaled_dot_product_attention", [&](auto tag) {
    using T = decltype(tag);
    using C = Acc<T>;
    auto a = attention_inputs<T, C>(inputs, scale_, mask_mode_, has_sinks_);
    T* po = out.data<T>();
    const int64_t block = a.block_rows();
    const int64_t blocks = (a.Tq + block - 1) / block;
    const int64_t heads = a.B * a.Nq;
    // One task per (head, query block), the last blocks first: under a
    // causal mask they see the most keys, so the cheap ones fill in last.
    a.for_tasks(heads * blocks, [&](auto next) {
      std::vector<C> P(block * a.Tk), O(std::is_same_v<T, C> ? 0 : block * a.Dv);
      for (int64_t t = next(); t >= 0; t = next()) {
        const int64_t bh = t % heads, i0 = (blocks - 1 - t / heads) * block;
        const int64_t b = bh / a.Nq, h = bh % a.Nq;
        const C* V = a.v.ptr + (b * a.Nkv + h / a.groups) * a.Tk * a.Dv;
        const int64_t rows = std::min(block, a.Tq - i0);
        const int64_t kn = a.visible_keys(i0, rows);
        a.probabilities(b, h, i0, rows, kn, P.data(), nullptr);
        T* dst = po + (bh * a.Tq + i0) * a.Dv;
        if constexpr (std::is_same_v<T, C>) {
          gemm<C>(false, false, rows, a.Dv, kn, C(1), P.data(), kn, V, a.Dv, C(0), dst, a.Dv);
        } else {
          gemm<C>(false, false, rows, a.Dv, kn, C(1), P.data(), kn, V, a.Dv, C(0), O.data(), a.Dv);
          store(O.data(), dst, rows * a.Dv);
        }
      }
    });
  });
}

void ScaledDotProductAttentionVJP::eval_cpu(const std::vector<array>& inputs,
                                            std::vector<array>& outputs) {
  for (auto& o : outputs) o.set_data(allocator::allocate(o.nbytes()));
  const size_t n = inputs.size();
  dispatch_float(outputs[0].dtype(), "scaled_dot_product_attention", [&](auto tag) {
    using T = decltype(tag);
    using C = Acc<T>;
    auto a = attention_inputs<T, C>(inputs, scale_, mask_mode_, has_sinks_);
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
    // One task per (batch, kv head): the query heads sharing it add into
    // its dK and dV in turn, so no two tasks write the same memory.
    a.for_tasks(a.B * a.Nkv, [&](auto next) {
      std::vector<C> P(block * a.Tk), dP(block * a.Tk), rowdot(block), sink_p(block);
      for (int64_t bk = next(); bk >= 0; bk = next()) {
        const int64_t b = bk / a.Nkv, hk = bk % a.Nkv;
        const C* K = a.k.ptr + bk * a.Tk * a.D;
        const C* V = a.v.ptr + bk * a.Tk * a.Dv;
        C* dK = dk.ptr + bk * a.Tk * a.D;
        C* dV = dv.ptr + bk * a.Tk * a.Dv;
        for (int64_t h = hk * a.groups; h < (hk + 1) * a.groups; ++h) {
          for (int64_t i0 = 0; i0 < a.Tq; i0 += block) {
            const int64_t rows = std::min(block, a.Tq - i0);
            const int64_t kn = a.visible_keys(i0, rows);
            a.probabilities(b, h, i0, rows, kn, P.data(), a.has_sinks ? sink_p.data() : nullptr);
            const int64_t at = (b * a.Nq + h) * a.Tq + i0; // first row of the block
            const C* Q = a.q.ptr + at * a.D;
            const C* Oh = O.ptr + at * a.Dv;
            const C* dOh = dO.ptr + at * a.Dv;
            const bool first = h == hk * a.groups && i0 == 0;
            const C acc = first ? C(0) : C(1);
            if (first) {
              std::fill(dK + kn * a.D, dK + a.Tk * a.D, C(0));
              std::fill(dV + kn * a.Dv, dV + a.Tk * a.Dv, C(0));
            }
            // dV += P^T dO; dP = dO V^T.
            gemm<C>(true, false, kn, a.Dv, rows, C(1), P.data(), kn, dOh, a.Dv, acc, dV, a.Dv);
            gemm<C>(false, true, rows, kn, a.Dv, C(1), dOh, a.Dv, V, a.Dv, C(0), dP.data(), kn);
            // dS = P (dP - rowsum(dO o O)): the softmax's backward per row.
            for (int64_t r = 0; r < rows; ++r) {
              C d = 0;
              for (int64_t j = 0; j < a.Dv; ++j) d += dOh[r * a.Dv + j] * Oh[r * a.Dv + j];
              rowdot[r] = d;
              const C* prow = P.data() + r * kn;
              C* drow = dP.data() + r * kn;
              for (int64_t j = 0; j < kn; ++j) drow[j] = prow[j] * (drow[j] - d);
              a.clear_masked(b, h, i0 + r, drow, kn);
            }
            if (a.has_sinks) {
              for (int64_t r = 0; r < rows; ++r) {
                dsink_parts[b * a.Nq + h] -= sink_p[r] * rowdot[r];
              }
            }
            // dQ = scale dS K; dK += scale dS^T Q.
            gemm<C>(false, false, rows, a.D, kn, static_cast<C>(scale_), dP.data(), kn, K, a.D,
                    C(0), dq.ptr + at * a.D, a.D);
            gemm<C>(true, false, kn, a.D, rows, static_cast<C>(scale_), dP.data(), kn, Q, a.D, acc,
                    dK, a.D);
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

// Cross entropy ----------------------------------------------------------------------

void CrossEntropy::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array logits = cpu::ensure_row_contiguous(inputs[0]);
  array targets = cpu::ensure_row_contiguous(inputs[1]);
  array& out = outputs[0];
  out.set_data(allocator::allocate(out.nbytes()));
  if (out.size() == 0) return;
  const int64_t n = logits.shape(-1);
  const size_t rows = out.size();
  float* py = out.data<float>();
  const int32_t* pt = targets.data<int32_t>();
  dispatch_float(logits.dtype(), "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    using C = Acc<T>;
    const T* px = logits.data<T>();
    cpu::parallel_for(rows, row_grain(n), [&](size_t b, size_t e) {
      for (size_t r = b; r < e; ++r) {
        const T* xr = px + r * n;
        C mx = -std::numeric_limits<C>::infinity();
        for (int64_t j = 0; j < n; ++j) mx = std::max(mx, static_cast<C>(xr[j]));
        C total = 0;
        if (std::isinf(mx)) {
          for (int64_t j = 0; j < n; ++j) total += std::exp(static_cast<C>(xr[j]) - mx);
        } else {
          for (int64_t j = 0; j < n; ++j) total += exp_of<C>(static_cast<C>(xr[j]) - mx);
        }
        const int64_t t = pt[r] < 0 ? pt[r] + n : pt[r];
        // A class outside the row has no logit: NaN (MLX reads past the row).
        const C picked =
            t >= 0 && t < n ? static_cast<C>(xr[t]) : std::numeric_limits<C>::quiet_NaN();
        py[r] = static_cast<float>(std::log(total) + mx - picked);
      }
    });
  });
}

// Gated delta rule -------------------------------------------------------------------

namespace {

// A dot product in eight running sums: one sum is a serial chain the
// compiler may not reorder, eight vectorise (the rule's kernels are dots
// and axpys over rows of the state).
inline float dot8(const float* a, const float* b, int64_t n) {
  float p[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    for (int l = 0; l < 8; ++l) p[l] += a[j + l] * b[j + l];
  }
  float s = ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
  for (; j < n; ++j) s += a[j] * b[j];
  return s;
}

// out = row * gate (one gate per key, or one for the row).
inline void gate_row(const float* row, const float* gt, bool per_key, int64_t n, float* out) {
  if (per_key) {
    for (int64_t j = 0; j < n; ++j) out[j] = row[j] * gt[j];
  } else {
    const float g = gt[0];
    for (int64_t j = 0; j < n; ++j) out[j] = row[j] * g;
  }
}

// One step of the rule on the state S (Dv rows of Dk), as both kernels run it.
inline void delta_step(float* S, const float* kt, const float* vt, const float* gt, float bt,
                       bool per_key, int64_t Dv, int64_t Dk) {
  for (int64_t i = 0; i < Dv; ++i) {
    float* row = S + i * Dk;
    gate_row(row, gt, per_key, Dk, row);
    const float delta = (vt[i] - dot8(row, kt, Dk)) * bt;
    for (int64_t j = 0; j < Dk; ++j) row[j] += delta * kt[j];
  }
}

} // namespace

void GatedDeltaUpdate::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array& y = outputs[0];
  array& final_state = outputs[1];
  y.set_data(allocator::allocate(y.nbytes()));
  final_state.set_data(allocator::allocate(final_state.nbytes()));
  const array& qa = inputs[0];
  const int64_t B = qa.shape(0), T = qa.shape(1), Hk = qa.shape(2), Dk = qa.shape(3);
  const int64_t Hv = inputs[2].shape(2), Dv = inputs[2].shape(3);
  const bool gate_per_key = inputs[3].ndim() == 4;
  const int64_t rep = Hv / Hk;
  array state0 = cpu::ensure_row_contiguous(inputs[5]);
  array mask = has_mask_ ? cpu::ensure_row_contiguous(inputs[6]) : array(false);
  dispatch_float(y.dtype(), "gated_delta_update", [&](auto tag) {
    using T_ = decltype(tag);
    auto q = dense<T_, float>(inputs[0]);
    auto k = dense<T_, float>(inputs[1]);
    auto v = dense<T_, float>(inputs[2]);
    auto g = dense<T_, float>(inputs[3]);
    auto beta = dense<T_, float>(inputs[4]);
    const float* s0 = state0.data<float>();
    float* sf = final_state.data<float>();
    T_* py = y.data<T_>();
    const bool* pm = has_mask_ ? mask.data<bool>() : nullptr;
    cpu::parallel_for(B * Hv, 1, [&](size_t begin, size_t end) {
      std::vector<float> kv(Dv), out(Dv);
      for (size_t bh = begin; bh < end; ++bh) {
        const int64_t b = bh / Hv, h = bh % Hv, hk = h / rep;
        float* S = sf + bh * Dv * Dk; // the state lives in the output
        std::copy(s0 + bh * Dv * Dk, s0 + (bh + 1) * Dv * Dk, S);
        for (int64_t t = 0; t < T; ++t) {
          const float* qt = q.ptr + ((b * T + t) * Hk + hk) * Dk;
          const float* kt = k.ptr + ((b * T + t) * Hk + hk) * Dk;
          const float* vt = v.ptr + ((b * T + t) * Hv + h) * Dv;
          const float* gt = g.ptr + ((b * T + t) * Hv + h) * (gate_per_key ? Dk : 1);
          const float bt = beta.ptr[(b * T + t) * Hv + h];
          T_* yt = py + ((b * T + t) * Hv + h) * Dv;
          if (pm != nullptr && !pm[b * T + t]) {
            std::fill(yt, yt + Dv, T_(0));
            continue; // a masked step leaves the state as it was
          }
          delta_step(S, kt, vt, gt, bt, gate_per_key, Dv, Dk);
          for (int64_t i = 0; i < Dv; ++i) yt[i] = static_cast<T_>(dot8(S + i * Dk, qt, Dk));
        }
      }
    });
  });
}

// The backward recurrence, per (batch, key head) so that the value heads
// sharing a key head add into its dq and dk without races. With S' = S * g
// (the gated state), delta = (v - S' k) * beta and S_t = S' + delta k^T,
// each step back (dS the cotangent of S_t, after adding dy q^T) gives
// dq = S_t^T dy, dk = dS^T delta + S'^T dkv, dv = beta * dS k,
// dbeta = (dS k) . (v - S' k), dg = sum over rows of dS' * S, and
// dS <- (dS + dkv k^T) * g with dkv = -beta * dS k.
void GatedDeltaUpdateVJP::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  for (auto& o : outputs) o.set_data(allocator::allocate(o.nbytes()));
  const size_t n = inputs.size();
  const array& qa = inputs[0];
  const int64_t B = qa.shape(0), T = qa.shape(1), Hk = qa.shape(2), Dk = qa.shape(3);
  const int64_t Hv = inputs[2].shape(2), Dv = inputs[2].shape(3);
  const bool gate_per_key = inputs[3].ndim() == 4;
  const int64_t rep = Hv / Hk, SZ = Dv * Dk;
  const int64_t C = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(std::sqrt(double(T)))));
  const int64_t chunks = (T + C - 1) / C;
  array state0 = cpu::ensure_row_contiguous(inputs[5]);
  array dfinal = cpu::ensure_row_contiguous(inputs[n - 1]);
  array mask = has_mask_ ? cpu::ensure_row_contiguous(inputs[6]) : array(false);
  float* dq = outputs[0].data<float>();
  float* dk = outputs[1].data<float>();
  float* dv = outputs[2].data<float>();
  float* dg = outputs[3].data<float>();
  float* dbeta = outputs[4].data<float>();
  float* dstate = outputs[5].data<float>();
  std::fill(dq, dq + outputs[0].size(), 0.0f);
  std::fill(dk, dk + outputs[1].size(), 0.0f);
  dispatch_float(inputs[2].dtype(), "gated_delta_update", [&](auto tag) {
    using T_ = decltype(tag);
    auto q = dense<T_, float>(inputs[0]);
    auto k = dense<T_, float>(inputs[1]);
    auto v = dense<T_, float>(inputs[2]);
    auto g = dense<T_, float>(inputs[3]);
    auto beta = dense<T_, float>(inputs[4]);
    auto dy = dense<T_, float>(inputs[n - 2]);
    const float* s0 = state0.data<float>();
    const float* dsT = dfinal.data<float>();
    const bool* pm = has_mask_ ? mask.data<bool>() : nullptr;
    const int64_t gw = gate_per_key ? Dk : 1;
    cpu::parallel_for(B * Hk, 1, [&](size_t begin, size_t end) {
      std::vector<float> ckpt(chunks * SZ), chunk(C * SZ), dS(SZ), sa(Dk), aq(Dk), ak(Dk), ag(Dk);
      for (size_t bk = begin; bk < end; ++bk) {
        const int64_t b = bk / Hk, hk = bk % Hk;
        for (int64_t h = hk * rep; h < (hk + 1) * rep; ++h) {
          const int64_t bh = b * Hv + h;
          auto at = [&](int64_t t) { return (b * T + t) * Hv + h; };
          auto kat = [&](int64_t t) { return ((b * T + t) * Hk + hk) * Dk; };
          auto masked = [&](int64_t t) { return pm != nullptr && !pm[b * T + t]; };
          auto step = [&](float* S, int64_t t) { // the forward step, as eval_cpu runs it
            if (masked(t)) return;
            const float* kt = k.ptr + kat(t);
            const float* vt = v.ptr + at(t) * Dv;
            const float* gt = g.ptr + at(t) * gw;
            const float bt = beta.ptr[at(t)];
            delta_step(S, kt, vt, gt, bt, gate_per_key, Dv, Dk);
          };
          std::copy(s0 + bh * SZ, s0 + (bh + 1) * SZ, chunk.data());
          for (int64_t t = 0; t < T; ++t) {
            if (t % C == 0)
              std::copy(chunk.begin(), chunk.begin() + SZ, ckpt.begin() + (t / C) * SZ);
            step(chunk.data(), t);
          }
          std::copy(dsT + bh * SZ, dsT + (bh + 1) * SZ, dS.begin());
          for (int64_t c = chunks - 1; c >= 0; --c) {
            const int64_t t0 = c * C, t1 = std::min(T, t0 + C);
            // chunk[j] = the state before step t0 + j
            std::copy(ckpt.begin() + c * SZ, ckpt.begin() + (c + 1) * SZ, chunk.begin());
            for (int64_t t = t0; t + 1 < t1; ++t) {
              float* next = chunk.data() + (t - t0 + 1) * SZ;
              std::copy(next - SZ, next, next);
              step(next, t);
            }
            for (int64_t t = t1 - 1; t >= t0; --t) {
              float* dgt = dg + at(t) * gw;
              if (masked(t)) { // the state passed through; nothing here was used
                std::fill(dv + at(t) * Dv, dv + (at(t) + 1) * Dv, 0.0f);
                std::fill(dgt, dgt + gw, 0.0f);
                dbeta[at(t)] = 0.0f;
                continue;
              }
              const float* S = chunk.data() + (t - t0) * SZ;
              const float* qt = q.ptr + kat(t);
              const float* kt = k.ptr + kat(t);
              const float* vt = v.ptr + at(t) * Dv;
              const float* gt = g.ptr + at(t) * gw;
              const float* dyt = dy.ptr + at(t) * Dv;
              const float bt = beta.ptr[at(t)];
              std::fill(aq.begin(), aq.end(), 0.0f);
              std::fill(ak.begin(), ak.end(), 0.0f);
              std::fill(ag.begin(), ag.end(), 0.0f);
              float db = 0.0f;
              for (int64_t i = 0; i < Dv; ++i) {
                const float* sp = S + i * Dk;
                float* ds = dS.data() + i * Dk;
                gate_row(sp, gt, gate_per_key, Dk, sa.data());
                const float r = vt[i] - dot8(sa.data(), kt, Dk), delta = r * bt, dyi = dyt[i];
                float dd = 0;
                for (int64_t j = 0; j < Dk; ++j) {
                  aq[j] += (sa[j] + delta * kt[j]) * dyi;
                  ds[j] += dyi * qt[j];
                  dd += ds[j] * kt[j];
                  ak[j] += ds[j] * delta;
                }
                dv[at(t) * Dv + i] = dd * bt;
                db += dd * r;
                const float dkv = -dd * bt;
                for (int64_t j = 0; j < Dk; ++j) {
                  const float dsa = ds[j] + dkv * kt[j];
                  ak[j] += sa[j] * dkv;
                  ag[j] += dsa * sp[j];
                  ds[j] = dsa * (gate_per_key ? gt[j] : gt[0]);
                }
              }
              float* dqt = dq + kat(t);
              float* dkt = dk + kat(t);
              for (int64_t j = 0; j < Dk; ++j) {
                dqt[j] += aq[j];
                dkt[j] += ak[j];
              }
              if (gate_per_key) {
                std::copy(ag.begin(), ag.end(), dgt);
              } else {
                float total = 0;
                for (int64_t j = 0; j < Dk; ++j) total += ag[j];
                dgt[0] = total;
              }
              dbeta[at(t)] = db;
            }
          }
          std::copy(dS.begin(), dS.end(), dstate + bh * SZ);
        }
      }
    });
  });
}

} // namespace loom
