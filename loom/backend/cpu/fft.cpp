// Loom's own FFT (the engine used when FFTW is absent or LOOM_FFT=native)
// and the dispatch between engines. Lengths whose prime factors are all at
// most kMaxDirectRadix run a recursive mixed-radix decimation in time
// (specialised radix-4/2/3 butterflies, a direct DFT for other small
// primes); any other length runs Bluestein's chirp-z transform through a
// power-of-two convolution. Twiddles are computed in double precision and
// stored in float, so the error stays near that of the arithmetic itself.
#include "loom/backend/cpu/fft.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "loom/backend/cpu/thread_pool.h"

namespace loom::cpu::fft {

namespace native {

namespace {

constexpr int kMaxDirectRadix = 31; // beyond, a prime factor costs O(p^2): Bluestein instead

// exp(sign * 2 pi i * num / den), reduced first so large arguments stay exact.
cfloat root(int64_t num, int64_t den, int sign) {
  num %= den;
  double a = sign * 2.0 * M_PI * static_cast<double>(num) / static_cast<double>(den);
  return {static_cast<float>(std::cos(a)), static_cast<float>(std::sin(a))};
}

struct Plan {
  int64_t n = 0;
  int sign = -1;
  std::vector<int> factors;     // mixed radix: radices, outermost first
  std::vector<cfloat> twiddles; // W_n^j for j < n
  // Bluestein: chirp w_k = exp(sign i pi k^2 / n) and the transformed,
  // 1/m-scaled conjugate chirp filter of the length-m convolution.
  bool bluestein = false;
  int64_t m = 0;
  std::vector<cfloat> chirp, filter;
  std::shared_ptr<const Plan> sub_forward, sub_inverse;

  // Scratch (in elements) execute needs beyond its input and output.
  int64_t scratch_size() const { return bluestein ? 2 * m : 0; }
  void execute(const cfloat* in, int64_t in_stride, cfloat* out, cfloat* scratch) const;

 private:
  void recurse(cfloat* out, const cfloat* in, int64_t in_stride, size_t level, int64_t len,
               int64_t tw_step) const;
  void butterfly(cfloat* out, int p, int64_t m, int64_t tw_step) const;
};

std::shared_ptr<const Plan> get_plan(int64_t n, bool inverse);

bool fftw_in_use(); // the dispatch's choice (below)

std::shared_ptr<Plan> make_plan(int64_t n, bool inverse) {
  auto plan = std::make_shared<Plan>();
  plan->n = n;
  plan->sign = inverse ? 1 : -1;
  int64_t rest = n;
  while (rest % 4 == 0) {
    plan->factors.push_back(4);
    rest /= 4;
  }
  for (int64_t p = 2; p * p <= rest; ++p) {
    while (rest % p == 0) {
      plan->factors.push_back(static_cast<int>(p));
      rest /= p;
    }
  }
  if (rest > 1) plan->factors.push_back(static_cast<int>(std::min<int64_t>(rest, 1 << 30)));
  bool direct = std::all_of(plan->factors.begin(), plan->factors.end(),
                            [](int p) { return p <= kMaxDirectRadix; });
  if (direct || n <= 1) {
    plan->twiddles.resize(n);
    for (int64_t j = 0; j < n; ++j) plan->twiddles[j] = root(j, n, plan->sign);
    return plan;
  }
  plan->bluestein = true;
  plan->factors.clear();
  // The convolution's length: the smallest 2^a 3^b >= 2n - 1 (both engines
  // have radix-2/3/4 kernels), up to a third shorter than a power of two
  // (10007: 20736 against 32768).
  int64_t m = int64_t{1} << 62;
  for (int64_t p3 = 1; p3 < 2 * (2 * n - 1); p3 *= 3) {
    int64_t v = p3;
    while (v < 2 * n - 1) v <<= 1;
    m = std::min(m, v);
  }
  plan->m = m;
  plan->chirp.resize(n);
  for (int64_t k = 0; k < n; ++k) {
    // k^2 / (2n) reduced modulo 1 in integers: exact for any n below 2^31.
    int64_t k2 = (k % (2 * n)) * (k % (2 * n)) % (2 * n);
    plan->chirp[k] = root(k2, 2 * n, plan->sign);
  }
  plan->sub_forward = get_plan(m, false);
  plan->sub_inverse = get_plan(m, true);
  std::vector<cfloat> b(m, cfloat(0, 0));
  for (int64_t k = 0; k < n; ++k) {
    b[k] = std::conj(plan->chirp[k]);
    if (k > 0) b[m - k] = b[k];
  }
  plan->filter.resize(m);
  plan->sub_forward->execute(b.data(), 1, plan->filter.data(), nullptr);
  const float inv_m = 1.0f / static_cast<float>(m);
  for (auto& v : plan->filter) v *= inv_m;
  return plan;
}

// Plans are built once per (length, direction) and shared by all threads.
std::shared_ptr<const Plan> get_plan(int64_t n, bool inverse) {
  static std::mutex mutex;
  static std::map<std::pair<int64_t, bool>, std::shared_ptr<const Plan>> cache;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache.find({n, inverse});
    if (it != cache.end()) return it->second;
  }
  // Built outside the lock: Bluestein's plan asks for its sub-plans here.
  std::shared_ptr<const Plan> plan = make_plan(n, inverse);
  std::lock_guard<std::mutex> lock(mutex);
  if (cache.size() > 512) cache.clear(); // holders keep their plans alive
  return cache.emplace(std::make_pair(n, inverse), plan).first->second;
}

// Bluestein's power-of-two transforms: FFTW's where it is in use (about 3x
// the own radix-4 loops), so a length with a large prime factor runs as two
// FFTW transforms of length m instead of FFTW's own Rader plan, which for
// primes like 10007 (10006 = 2 x 5003) recurses into further primes and
// trailed pocketfft's Bluestein by 1.4-2.5x.
void power_of_two(const Plan& plan, const cfloat* in, cfloat* out) {
  if (fftw_in_use() && fft::fftw::c2c(in, out, 1, plan.n, 1, plan.sign > 0)) return;
  plan.execute(in, 1, out, nullptr);
}

void Plan::execute(const cfloat* in, int64_t in_stride, cfloat* out, cfloat* scratch) const {
  if (n == 1) {
    out[0] = in[0];
    return;
  }
  if (!bluestein) {
    recurse(out, in, in_stride, 0, n, 1);
    return;
  }
  cfloat* a = scratch;
  cfloat* spec = scratch + m;
  for (int64_t k = 0; k < n; ++k) a[k] = in[k * in_stride] * chirp[k];
  std::fill(a + n, a + m, cfloat(0, 0));
  power_of_two(*sub_forward, a, spec);
  for (int64_t k = 0; k < m; ++k) spec[k] *= filter[k];
  power_of_two(*sub_inverse, spec, a);
  for (int64_t k = 0; k < n; ++k) out[k] = a[k] * chirp[k];
}

// Decimation in time: the p interleaved subsequences of `in` are transformed
// into consecutive blocks of `out`, then combined in place.
void Plan::recurse(cfloat* out, const cfloat* in, int64_t in_stride, size_t level, int64_t len,
                   int64_t tw_step) const {
  const int p = factors[level];
  const int64_t m = len / p;
  if (m == 1) {
    for (int r = 0; r < p; ++r) out[r] = in[r * in_stride];
  } else {
    for (int r = 0; r < p; ++r) {
      recurse(out + r * m, in + r * in_stride, in_stride * p, level + 1, m, tw_step * p);
    }
  }
  butterfly(out, p, m, tw_step);
}

// out[k + q m] = sum_r (W_len^{rk} out[k + r m]) W_p^{rq}, len = p m, where
// W_len^e = twiddles[e * tw_step].
void Plan::butterfly(cfloat* out, int p, int64_t m, int64_t tw_step) const {
  const cfloat* tw = twiddles.data();
  if (p == 2) {
    for (int64_t k = 0; k < m; ++k) {
      cfloat a0 = out[k], a1 = out[k + m] * tw[k * tw_step];
      out[k] = a0 + a1;
      out[k + m] = a0 - a1;
    }
  } else if (p == 4) {
    const float s = static_cast<float>(sign); // W_4 = sign * i
    for (int64_t k = 0; k < m; ++k) {
      cfloat a0 = out[k];
      cfloat a1 = out[k + m] * tw[k * tw_step];
      cfloat a2 = out[k + 2 * m] * tw[2 * k * tw_step];
      cfloat a3 = out[k + 3 * m] * tw[3 * k * tw_step];
      cfloat t0 = a0 + a2, t1 = a0 - a2, t2 = a1 + a3, d = a1 - a3;
      cfloat t3(-s * d.imag(), s * d.real());
      out[k] = t0 + t2;
      out[k + m] = t1 + t3;
      out[k + 2 * m] = t0 - t2;
      out[k + 3 * m] = t1 - t3;
    }
  } else if (p == 3) {
    const cfloat w = tw[m * tw_step]; // W_3
    for (int64_t k = 0; k < m; ++k) {
      cfloat a0 = out[k];
      cfloat a1 = out[k + m] * tw[k * tw_step];
      cfloat a2 = out[k + 2 * m] * tw[2 * k * tw_step];
      cfloat sum = a1 + a2, d = a1 - a2;
      cfloat base = a0 + w.real() * sum;
      cfloat rot(-w.imag() * d.imag(), w.imag() * d.real());
      out[k] = a0 + sum;
      out[k + m] = base + rot;
      out[k + 2 * m] = base - rot;
    }
  } else {
    std::array<cfloat, kMaxDirectRadix + 1> a; // p <= kMaxDirectRadix here
    const int64_t len = p * m;
    for (int64_t k = 0; k < m; ++k) {
      for (int r = 0; r < p; ++r) a[r] = out[k + r * m] * tw[(r * k % len) * tw_step];
      for (int q = 0; q < p; ++q) {
        cfloat acc = a[0];
        for (int r = 1; r < p; ++r) acc += a[r] * tw[((r * q) % p) * m * tw_step];
        out[k + q * m] = acc;
      }
    }
  }
}

// Real transforms of even length n pack the signal into a complex one of
// length n/2 and untangle the two interleaved spectra with W_n^k.
struct RealPlan {
  std::shared_ptr<const Plan> half; // even n: length n/2; odd n: length n
  std::vector<cfloat> w;            // W_n^k for k <= n/2 (forward sign)
};

std::shared_ptr<const RealPlan> get_real_plan(int64_t n, bool inverse) {
  static std::mutex mutex;
  static std::map<std::pair<int64_t, bool>, std::shared_ptr<const RealPlan>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find({n, inverse});
  if (it != cache.end()) return it->second;
  auto plan = std::make_shared<RealPlan>();
  bool even = n % 2 == 0 && n >= 2;
  plan->half = get_plan(even ? n / 2 : n, inverse);
  if (even) {
    plan->w.resize(n / 2 + 1);
    for (int64_t k = 0; k <= n / 2; ++k) plan->w[k] = root(k, n, -1);
  }
  if (cache.size() > 512) cache.clear();
  return cache.emplace(std::make_pair(n, inverse), plan).first->second;
}

// Lines of [outer, n, inner] (n is the length of the transformed axis) split
// across the pool; `body(line, scratch)` runs one line with thread-local
// scratch of `scratch_elems` complex values.
template <typename Body>
void for_lines(int64_t outer, int64_t inner, int64_t work_per_line, int64_t scratch_elems,
               Body body) {
  int64_t lines = outer * inner;
  size_t grain =
      static_cast<size_t>(std::max<int64_t>(1, (1 << 15) / std::max<int64_t>(1, work_per_line)));
  parallel_for(static_cast<size_t>(lines), grain, [&](size_t begin, size_t end) {
    std::vector<cfloat> scratch(static_cast<size_t>(scratch_elems));
    for (size_t l = begin; l < end; ++l) body(static_cast<int64_t>(l), scratch.data());
  });
}

} // namespace

void c2c(const cfloat* in, cfloat* out, int64_t outer, int64_t n, int64_t inner, bool inverse) {
  if (n == 0 || outer * inner == 0) return;
  auto plan = get_plan(n, inverse);
  // Along an inner axis, kColumns neighbouring lines move together, so each
  // cache line read or written carries kColumns useful values instead of one.
  constexpr int64_t kColumns = 8;
  const int64_t width = inner == 1 ? 1 : kColumns;
  const int64_t blocks = (inner + width - 1) / width;
  // Scratch: the gathered lines, one result, then the plan's own.
  const int64_t scratch = width * n + n + plan->scratch_size();
  for_lines(outer, blocks, n * width, scratch, [&](int64_t task, cfloat* s) {
    int64_t o = task / blocks, first = (task % blocks) * width;
    int64_t count = std::min(width, inner - first);
    const cfloat* src = in + o * n * inner + first;
    cfloat* dst = out + o * n * inner + first;
    cfloat* result = s + width * n;
    for (int64_t k = 0; k < n; ++k) {
      for (int64_t c = 0; c < count; ++c) s[c * n + k] = src[k * inner + c];
    }
    for (int64_t c = 0; c < count; ++c) {
      plan->execute(s + c * n, 1, result, result + n);
      for (int64_t k = 0; k < n; ++k) s[c * n + k] = result[k];
    }
    for (int64_t k = 0; k < n; ++k) {
      for (int64_t c = 0; c < count; ++c) dst[k * inner + c] = s[c * n + k];
    }
  });
}

void r2c(const float* in, cfloat* out, int64_t outer, int64_t n, int64_t inner) {
  if (n == 0 || outer * inner == 0) return;
  auto rp = get_real_plan(n, false);
  const Plan& plan = *rp->half;
  const bool even = !rp->w.empty();
  const int64_t len = plan.n, h = n / 2;
  for_lines(outer, inner, n, 2 * len + plan.scratch_size(), [&](int64_t line, cfloat* s) {
    int64_t o = line / inner, i = line % inner;
    const float* src = in + o * n * inner + i;
    cfloat* dst = out + o * (h + 1) * inner + i;
    cfloat* z = s + len;
    if (even) {
      for (int64_t k = 0; k < h; ++k) s[k] = {src[2 * k * inner], src[(2 * k + 1) * inner]};
      plan.execute(s, 1, z, s + 2 * len);
      for (int64_t k = 0; k <= h; ++k) {
        cfloat zk = z[k % h], zc = std::conj(z[(h - k) % h]);
        cfloat e = 0.5f * (zk + zc);
        cfloat od = cfloat(0, -0.5f) * (zk - zc);
        dst[k * inner] = e + rp->w[k] * od;
      }
    } else {
      for (int64_t k = 0; k < n; ++k) s[k] = {src[k * inner], 0.0f};
      plan.execute(s, 1, z, s + 2 * len);
      for (int64_t k = 0; k <= h; ++k) dst[k * inner] = z[k];
    }
  });
}

void c2r(const cfloat* in, float* out, int64_t outer, int64_t n, int64_t inner) {
  if (n == 0 || outer * inner == 0) return;
  auto rp = get_real_plan(n, true);
  const Plan& plan = *rp->half;
  const bool even = !rp->w.empty();
  const int64_t len = plan.n, h = n / 2;
  for_lines(outer, inner, n, 2 * len + plan.scratch_size(), [&](int64_t line, cfloat* s) {
    int64_t o = line / inner, i = line % inner;
    const cfloat* src = in + o * (h + 1) * inner + i;
    float* dst = out + o * n * inner + i;
    cfloat* z = s + len;
    auto bin = [&](int64_t k) {
      cfloat v = src[k * inner];
      // The zero (and, for even n, Nyquist) bins of a real signal are real.
      if (k == 0 || (even && k == h)) v.imag(0.0f);
      return v;
    };
    if (even) {
      for (int64_t k = 0; k < h; ++k) {
        cfloat xk = bin(k), xc = std::conj(bin(h - k));
        cfloat e = xk + xc;
        cfloat od = (xk - xc) * std::conj(rp->w[k]);
        s[k] = e + cfloat(-od.imag(), od.real());
      }
      plan.execute(s, 1, z, s + 2 * len);
      for (int64_t k = 0; k < h; ++k) {
        dst[2 * k * inner] = z[k].real();
        dst[(2 * k + 1) * inner] = z[k].imag();
      }
    } else {
      for (int64_t k = 0; k <= h; ++k) s[k] = bin(k);
      for (int64_t k = 1; k <= h; ++k) s[n - k] = std::conj(s[k]);
      plan.execute(s, 1, z, s + 2 * len);
      for (int64_t k = 0; k < n; ++k) dst[k * inner] = z[k].real();
    }
  });
}

} // namespace native

// --- dispatch --------------------------------------------------------------

namespace {

Backend initial_backend() {
  const char* v = std::getenv("LOOM_FFT");
  if (v != nullptr && std::string(v) == "native") return Backend::native;
  if (v != nullptr && std::string(v) == "fftw") return Backend::fftw;
  return Backend::automatic;
}

std::atomic<Backend>& backend() {
  static std::atomic<Backend> b{initial_backend()};
  return b;
}

bool use_fftw() {
  Backend b = backend().load();
  if (b == Backend::native) return false;
  return fftw::available();
}

} // namespace

namespace native {
namespace {
bool fftw_in_use() { return use_fftw(); }
} // namespace
} // namespace native

void set_backend(const std::string& name) {
  if (name == "auto") {
    backend() = Backend::automatic;
  } else if (name == "native") {
    backend() = Backend::native;
  } else if (name == "fftw") {
    if (!fftw::available()) {
      throw std::runtime_error("[fft] FFTW (libfftw3f.so.3) cannot be loaded on this machine.");
    }
    backend() = Backend::fftw;
  } else {
    throw std::invalid_argument("[fft] Unknown FFT backend '" + name +
                                "'; expected 'auto', 'native' or 'fftw'.");
  }
}

std::string backend_name() { return use_fftw() ? "fftw" : "native"; }

namespace {
// Whether n has a prime factor of at least kBluesteinPrime: such lengths
// run the own Bluestein on FFTW's power-of-two transforms (native::c2c
// and friends route them there) rather than FFTW's Rader plans.
bool large_prime_factor(int64_t n) {
  // Measured from 1009 up; smaller primes stay on FFTW as before.
  constexpr int64_t kBluesteinPrime = 1000;
  int64_t rest = n;
  for (int64_t p = 2; p * p <= rest; ++p) {
    while (rest % p == 0) rest /= p;
  }
  if (rest < kBluesteinPrime) return false;
  // rest is n's largest prime factor. FFTW's Rader plan for it is a
  // transform of length rest - 1: fast when that is 5-smooth (65537:
  // 110 ms against 299 for Bluestein, 64 rows), slow otherwise.
  int64_t r = rest - 1;
  for (int64_t p : {2, 3, 5}) {
    while (r % p == 0) r /= p;
  }
  return r != 1;
}
bool fftw_for(int64_t n) { return use_fftw() && !large_prime_factor(n); }
} // namespace

void c2c(const cfloat* in, cfloat* out, int64_t outer, int64_t n, int64_t inner, bool inverse) {
  if (fftw_for(n) && fftw::c2c(in, out, outer, n, inner, inverse)) return;
  native::c2c(in, out, outer, n, inner, inverse);
}

void r2c(const float* in, cfloat* out, int64_t outer, int64_t n, int64_t inner) {
  if (fftw_for(n) && fftw::r2c(in, out, outer, n, inner)) return;
  native::r2c(in, out, outer, n, inner);
}

void c2r(const cfloat* in, float* out, int64_t outer, int64_t n, int64_t inner) {
  if (fftw_for(n) && fftw::c2r(in, out, outer, n, inner)) return;
  native::c2r(in, out, outer, n, inner);
}

bool r2c_full_rows(const float* in, cfloat* out, int64_t rows, int64_t n) {
  return fftw_for(n) && fftw::r2c_full_rows(in, out, rows, n);
}

bool c2c_partial_columns(const cfloat* in, cfloat* out, int64_t outer, int64_t m, int64_t inner,
                         int64_t seg, int64_t used, bool inverse) {
  return fftw_for(m) && fftw::c2c_partial_columns(in, out, outer, m, inner, seg, used, inverse);
}

} // namespace loom::cpu::fft
