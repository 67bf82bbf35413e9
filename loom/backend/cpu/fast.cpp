// CPU kernels of mx.fast but attention (fast_attention.cpp). Rows
// (normalisations, cross entropy) and heads (the delta rule) are independent
// and split across the intra-op pool. Half precision is computed in float32
// and rounded once at the end; float64 in double.
#include "loom/primitives/fast.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "loom/backend/cpu/copy.h"
#include "loom/backend/cpu/fast.h"
#include "loom/backend/cpu/thread_pool.h"
#include "loom/primitives/elementwise_scalar.h"
#include "loom/types/dispatch.h"

namespace loom {

using namespace cpu::fast_kernels;

// Normalisations --------------------------------------------------------------------

void RMSNorm::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array x = cpu::ensure_row_contiguous(inputs[0]);
  array& out = outputs[0];
  out.set_data(allocator::allocate(out.nbytes()));
  if (out.size() == 0) return;
  const size_t n = x.shape(-1);
  const size_t rows = x.size() / n;
  dispatch_floating(out.dtype(), "rms_norm", [&](auto tag) {
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
  dispatch_floating(out.dtype(), "layer_norm", [&](auto tag) {
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
  dispatch_floating(out.dtype(), "rope", [&](auto tag) {
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
  dispatch_floating(logits.dtype(), "cross_entropy", [&](auto tag) {
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
  dispatch_floating(y.dtype(), "gated_delta_update", [&](auto tag) {
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
  dispatch_floating(inputs[2].dtype(), "gated_delta_update", [&](auto tag) {
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
