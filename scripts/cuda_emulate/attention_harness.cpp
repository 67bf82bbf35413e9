// Runs the tensor-core attention kernels (forward, and the backward's three
// passes) under the host emulation (emu.h) on random inputs and compares
// them with a float64 reference of the same rounded inputs. The kernels'
// sources come from attention_emulate.py as kernels.h; the configuration
// from -D flags: CFG_BF16, CFG_D, CFG_MASK (0 none, 1 boolean, 2 additive),
// CFG_SINKS, CFG_CAUSAL, CFG_B, CFG_NQ, CFG_NK, CFG_TQ, CFG_TK.
#include <cstdio>
#include <cstdlib>
#include <random>

#include "emu.h"

struct loom_attn_params {
  const void* q;
  const void* k;
  const void* v;
  void* out;
  const void* mask;
  const void* sinks;
  long long Nq, Tq, Tk, groups;
  long long qs[4], ks[4], vs[4], ms[4];
  float scale;
  int causal;
  const void* o;
  const void* dout;
  float* stats;
  float* dq;
  void* dk;
  void* dv;
  float* dsink;
};

#define EMU_BF16 CFG_BF16
#include "kernels.h"

using T = std::conditional_t<CFG_BF16, loom_bf16, loom_half>;
constexpr long long B = CFG_B, NQ = CFG_NQ, NK = CFG_NK, TQ = CFG_TQ, TK = CFG_TK, D = CFG_D;
constexpr double kLowest = -3.402823466e38;

std::vector<T> rnd(size_t n, std::mt19937& gen, double s = 1.0) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<T> out(n);
  for (auto& x : out) loom_st(&x, static_cast<float>(nd(gen) * s));
  return out;
}
std::vector<double> val(const std::vector<T>& x) {
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = loom_ld(x[i]);
  return out;
}

int report(const char* what, const std::vector<double>& got, const std::vector<double>& want,
           double tol) {
  double err = 0, mag = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    err = std::max(err, std::fabs(got[i] - want[i]));
    mag = std::max(mag, std::fabs(want[i]));
    if (std::isnan(got[i])) err = INFINITY;
  }
  const double rel = err / std::max(mag, 1e-6);
  std::printf("  %-6s max|err| %.3e  max|ref| %.3e  rel %.3e %s\n", what, err, mag, rel,
              rel <= tol ? "ok" : "FAIL");
  return rel <= tol ? 0 : 1;
}

int main() {
  const char* late = std::getenv("EMU_LATE_COPIES");
  emu_late_copies = late != nullptr && late[0] == '1';
  std::mt19937 gen(1234);
  const long long groups = NQ / NK;
  auto q = rnd(B * NQ * TQ * D, gen), k = rnd(B * NK * TK * D, gen), v = rnd(B * NK * TK * D, gen);
  auto dout = rnd(B * NQ * TQ * D, gen);
  auto sinks = rnd(NQ, gen);
  std::vector<unsigned char> bmask(B * NQ * TQ * TK);
  std::bernoulli_distribution keep(0.7);
  for (auto& m : bmask) m = keep(gen);
  // Some rows with every key masked.
  for (long long j = 0; j < TK; ++j) bmask[3 * TK + j] = 0;
  auto amask = rnd(B * NQ * TQ * TK, gen);
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));

  loom_attn_params p{};
  p.q = q.data();
  p.k = k.data();
  p.v = v.data();
  p.mask = CFG_MASK == 1   ? (const void*)bmask.data()
           : CFG_MASK == 2 ? (const void*)amask.data()
                           : nullptr;
  p.sinks = CFG_SINKS ? sinks.data() : nullptr;
  p.Nq = NQ;
  p.Tq = TQ;
  p.Tk = TK;
  p.groups = groups;
  const long long qs[4] = {NQ * TQ * D, TQ * D, D, 1}, ks[4] = {NK * TK * D, TK * D, D, 1},
                  ms[4] = {NQ * TQ * TK, TQ * TK, TK, 1};
  for (int i = 0; i < 4; ++i) {
    p.qs[i] = qs[i];
    p.ks[i] = ks[i];
    p.vs[i] = ks[i];
    p.ms[i] = ms[i];
  }
  p.scale = scale;
  p.causal = CFG_CAUSAL;
  std::vector<T> out(B * NQ * TQ * D);
  p.out = out.data();
  emu_launch(dim3{(unsigned)((TQ + 63) / 64), (unsigned)(B * NQ), 1}, 128,
             [&] { kfwd_ns::kfwd(p); });

  // float64 reference.
  auto Q = val(q), K = val(k), V = val(v), dO = val(dout), S = val(sinks), AM = val(amask);
  std::vector<double> O(out.size()), dQ(Q.size(), 0), dK(K.size(), 0), dV(V.size(), 0), dS(NQ, 0);
  std::vector<double> P(TK), dP(TK);
  std::vector<char> kept(TK);
  for (long long b = 0; b < B; ++b) {
    for (long long h = 0; h < NQ; ++h) {
      const long long hk = h / groups;
      const double* Kh = &K[(b * NK + hk) * TK * D];
      const double* Vh = &V[(b * NK + hk) * TK * D];
      for (long long i = 0; i < TQ; ++i) {
        const double* qi = &Q[((b * NQ + h) * TQ + i) * D];
        double mx = CFG_SINKS ? S[h] : -INFINITY;
        for (long long j = 0; j < TK; ++j) {
          double s = 0;
          for (long long c = 0; c < D; ++c) s += qi[c] * Kh[j * D + c];
          s *= scale;
          kept[j] = 1;
          const long long mo = ((b * NQ + h) * TQ + i) * TK + j;
          if (CFG_MASK == 1 && !bmask[mo]) kept[j] = 0;
          if (CFG_MASK == 2) s += AM[mo];
          if (CFG_CAUSAL && j > i + TK - TQ) kept[j] = 0;
          if (!kept[j]) s = kLowest;
          P[j] = s;
          mx = std::max(mx, s);
        }
        double sum = CFG_SINKS ? std::exp(S[h] - mx) : 0;
        for (long long j = 0; j < TK; ++j) sum += (P[j] = std::exp(P[j] - mx));
        for (long long j = 0; j < TK; ++j) P[j] /= sum;
        const double psink = CFG_SINKS ? std::exp(S[h] - mx) / sum : 0;
        double* oi = &O[((b * NQ + h) * TQ + i) * D];
        const double* doi = &dO[((b * NQ + h) * TQ + i) * D];
        for (long long c = 0; c < D; ++c) {
          double a = 0;
          for (long long j = 0; j < TK; ++j) a += P[j] * Vh[j * D + c];
          oi[c] = a;
        }
        double delta = 0;
        for (long long c = 0; c < D; ++c) delta += oi[c] * doi[c];
        dS[h] -= psink * delta;
        double* dqi = &dQ[((b * NQ + h) * TQ + i) * D];
        double* dKh = &dK[(b * NK + hk) * TK * D];
        double* dVh = &dV[(b * NK + hk) * TK * D];
        for (long long j = 0; j < TK; ++j) {
          double dp = 0;
          for (long long c = 0; c < D; ++c) dp += doi[c] * Vh[j * D + c];
          const double ds = kept[j] || CFG_MASK == 2 ? P[j] * (dp - delta) : 0.0;
          const double dsk = kept[j] ? ds : 0.0;
          for (long long c = 0; c < D; ++c) {
            dVh[j * D + c] += P[j] * doi[c];
            dqi[c] += scale * dsk * Kh[j * D + c];
            dKh[j * D + c] += scale * dsk * qi[c];
          }
        }
      }
    }
  }
  int bad = report("out", val(out), O, CFG_BF16 ? 2e-2 : 4e-3);

  // The backward's passes, as attention_vjp_kernel launches them.
  const long long rows = B * NQ * TQ;
  std::vector<float> stats(3 * rows), acc(rows * D + NQ, 0.0f);
  std::vector<T> dq(Q.size()), dk(K.size()), dv(V.size()), dsink(NQ);
  p.o = out.data();
  p.dout = dout.data();
  p.stats = stats.data();
  p.dq = acc.data();
  p.dk = dk.data();
  p.dv = dv.data();
  p.dsink = CFG_SINKS ? acc.data() + rows * D : nullptr;
  emu_launch(dim3{(unsigned)((TQ + 63) / 64), (unsigned)(B * NQ), 1}, 128,
             [&] { kstats_ns::kstats(p); });
  emu_launch(dim3{(unsigned)((TK + 63) / 64), (unsigned)(B * NK), 1}, 128,
             [&] { kbwd_ns::kbwd(p); });
  const float* accp = acc.data();
  const float* dsp = p.dsink;
  emu_launch(dim3{4, 1, 1}, 256,
             [&] { kfin_ns::kfin(accp, dq.data(), rows * D, scale, dsp, dsink.data(), (int)NQ); });
  const double tol = CFG_BF16 ? 3e-2 : 8e-3;
  bad += report("dq", val(dq), dQ, tol);
  bad += report("dk", val(dk), dK, tol);
  bad += report("dv", val(dv), dV, tol);
  if (CFG_SINKS) bad += report("dsink", val(dsink), dS, tol);
  return bad;
}
