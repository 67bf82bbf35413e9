// FFTW3 (single precision) as an optional engine, loaded at run time: Loom
// declares the few entry points it calls and never links FFTW, so a Loom
// binary carries no GPL code and runs (on the native engine) where FFTW is
// not installed. FFTW's planner is not thread-safe but executing a plan on
// new arrays is, so plans are made under one lock, cached per problem
// (lengths, batch layout, direction, placement, alignment) and executed
// concurrently by the intra-op pool, each thread on its own slice of the
// batch. FFTW_ESTIMATE plans in microseconds and never touches the arrays,
// so planning on the real buffers is safe.
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "loom/backend/cpu/fft.h"
#include "loom/backend/cpu/thread_pool.h"

namespace loom::cpu::fft::fftw {

namespace {

using fftwf_plan = void*;
using fftwf_complex = float[2];

constexpr int kForward = -1;
constexpr int kBackward = 1;
constexpr unsigned kEstimate = 1U << 6;

struct Library {
  fftwf_plan (*plan_many_dft)(int, const int*, int, fftwf_complex*, const int*, int, int,
                              fftwf_complex*, const int*, int, int, int, unsigned);
  fftwf_plan (*plan_many_r2c)(int, const int*, int, float*, const int*, int, int, fftwf_complex*,
                              const int*, int, int, unsigned);
  fftwf_plan (*plan_many_c2r)(int, const int*, int, fftwf_complex*, const int*, int, int, float*,
                              const int*, int, int, unsigned);
  void (*execute_dft)(fftwf_plan, fftwf_complex*, fftwf_complex*);
  void (*execute_r2c)(fftwf_plan, float*, fftwf_complex*);
  void (*execute_c2r)(fftwf_plan, fftwf_complex*, float*);
  void (*destroy_plan)(fftwf_plan);
  int (*alignment_of)(float*);
  bool loaded = false;
};

const Library& library() {
  static const Library lib = [] {
    Library l{};
    void* h = dlopen("libfftw3f.so.3", RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) h = dlopen("libfftw3f.so", RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) return l;
    auto get = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
      return fn != nullptr;
    };
    l.loaded =
        get(l.plan_many_dft, "fftwf_plan_many_dft") &&
        get(l.plan_many_r2c, "fftwf_plan_many_dft_r2c") &&
        get(l.plan_many_c2r, "fftwf_plan_many_dft_c2r") &&
        get(l.execute_dft, "fftwf_execute_dft") && get(l.execute_r2c, "fftwf_execute_dft_r2c") &&
        get(l.execute_c2r, "fftwf_execute_dft_c2r") && get(l.destroy_plan, "fftwf_destroy_plan") &&
        get(l.alignment_of, "fftwf_alignment_of");
    return l;
  }();
  return lib;
}

enum class Kind { c2c_forward, c2c_inverse, r2c, c2r };

// One batched 1-D problem: `howmany` transforms of length n, elements
// `stride` apart, transforms `dist` apart (in elements of each side's type).
struct Problem {
  Kind kind;
  int n, howmany, in_stride, in_dist, out_stride, out_dist;
  bool in_place;
  int in_align, out_align;
  auto key() const {
    return std::tie(kind, n, howmany, in_stride, in_dist, out_stride, out_dist, in_place, in_align,
                    out_align);
  }
  bool operator<(const Problem& o) const { return key() < o.key(); }
};

std::mutex& planner_mutex() {
  static std::mutex m;
  return m;
}

using PlanPtr = std::shared_ptr<void>;

PlanPtr make(const Problem& p, void* in, void* out) {
  const Library& lib = library();
  int n = p.n;
  fftwf_plan plan = nullptr;
  auto* cin = static_cast<fftwf_complex*>(in);
  auto* cout = static_cast<fftwf_complex*>(out);
  switch (p.kind) {
    case Kind::c2c_forward:
    case Kind::c2c_inverse:
      plan = lib.plan_many_dft(1, &n, p.howmany, cin, nullptr, p.in_stride, p.in_dist, cout,
                               nullptr, p.out_stride, p.out_dist,
                               p.kind == Kind::c2c_forward ? kForward : kBackward, kEstimate);
      break;
    case Kind::r2c:
      plan = lib.plan_many_r2c(1, &n, p.howmany, static_cast<float*>(in), nullptr, p.in_stride,
                               p.in_dist, cout, nullptr, p.out_stride, p.out_dist, kEstimate);
      break;
    case Kind::c2r:
      plan =
          lib.plan_many_c2r(1, &n, p.howmany, cin, nullptr, p.in_stride, p.in_dist,
                            static_cast<float*>(out), nullptr, p.out_stride, p.out_dist, kEstimate);
      break;
  }
  if (plan == nullptr) return nullptr;
  // Destruction goes through the planner too, so it takes the same lock.
  return PlanPtr(plan, [destroy = lib.destroy_plan](void* q) {
    std::lock_guard<std::mutex> lock(planner_mutex());
    destroy(q);
  });
}

PlanPtr get(Problem p, void* in, void* out) {
  const Library& lib = library();
  p.in_align = lib.alignment_of(static_cast<float*>(in));
  p.out_align = lib.alignment_of(static_cast<float*>(out));
  static std::map<Problem, PlanPtr> cache;
  static std::mutex cache_mutex;
  std::vector<PlanPtr> evicted; // released after the locks, whose deleter locks
  PlanPtr plan;
  {
    std::lock_guard<std::mutex> lock(cache_mutex);
    auto it = cache.find(p);
    if (it != cache.end()) return it->second;
    if (cache.size() >= 256) {
      for (auto& [k, v] : cache) evicted.push_back(std::move(v));
      cache.clear();
    }
    {
      std::lock_guard<std::mutex> planning(planner_mutex());
      plan = make(p, in, out);
    }
    if (plan) cache.emplace(p, plan);
  }
  return plan;
}

bool fits(int64_t v) { return v > 0 && v <= INT_MAX; }

// Runs a batched problem over [outer, n_in | n_out, inner] layouts, split
// across the pool: lines of the last axis in groups, or for an inner axis
// column blocks (multiples of 8 columns keep each block's start aligned).
template <typename In, typename Out, typename Exec>
bool run(Kind kind, In* in, Out* out, int64_t outer, int64_t n, int64_t n_in, int64_t n_out,
         int64_t inner, Exec exec) {
  if (!library().loaded) return false;
  if (!fits(n) || !fits(n_in * inner) || !fits(n_out * inner) || !fits(outer * inner)) return false;
  if (!fits(outer * n_in * inner) || !fits(outer * n_out * inner)) return false;
  const bool in_place = static_cast<void*>(in) == static_cast<void*>(out);
  const int64_t threads = std::max(1, num_threads());
  const int64_t work = outer * inner * n;
  const int64_t want = work < (1 << 16) ? 1 : threads;
  if (inner == 1) {
    int64_t group = std::max<int64_t>(1, (outer + want - 1) / want);
    int64_t groups = (outer + group - 1) / group;
    std::atomic<bool> ok{true};
    parallel_for(static_cast<size_t>(groups), 1, [&](size_t b, size_t e) {
      for (size_t g = b; g < e; ++g) {
        int64_t first = static_cast<int64_t>(g) * group;
        int64_t count = std::min(group, outer - first);
        Problem p{kind,
                  static_cast<int>(n),
                  static_cast<int>(count),
                  1,
                  static_cast<int>(n_in),
                  1,
                  static_cast<int>(n_out),
                  in_place,
                  0,
                  0};
        In* i = in + first * n_in;
        Out* o = out + first * n_out;
        PlanPtr plan = get(p, i, o);
        if (!plan) {
          ok = false;
          return;
        }
        exec(plan.get(), i, o);
      }
    });
    return ok.load();
  }
  int64_t per_outer = std::max<int64_t>(1, (want + outer - 1) / outer);
  int64_t width = (inner + per_outer - 1) / per_outer;
  width = std::min(inner, (width + 7) / 8 * 8);
  int64_t blocks = (inner + width - 1) / width;
  std::atomic<bool> ok{true};
  parallel_for(static_cast<size_t>(outer * blocks), 1, [&](size_t b, size_t e) {
    for (size_t t = b; t < e; ++t) {
      int64_t o_idx = static_cast<int64_t>(t) / blocks, blk = static_cast<int64_t>(t) % blocks;
      int64_t first = blk * width;
      int64_t count = std::min(width, inner - first);
      Problem p{kind,
                static_cast<int>(n),
                static_cast<int>(count),
                static_cast<int>(inner),
                1,
                static_cast<int>(inner),
                1,
                in_place,
                0,
                0};
      In* i = in + o_idx * n_in * inner + first;
      Out* o = out + o_idx * n_out * inner + first;
      PlanPtr plan = get(p, i, o);
      if (!plan) {
        ok = false;
        return;
      }
      exec(plan.get(), i, o);
    }
  });
  return ok.load();
}

} // namespace

bool available() { return library().loaded; }

namespace {

// Along an inner axis, FFTW's strided loops under ESTIMATE plans run well
// below its contiguous speed: blocks of kColumns lines are moved into a
// contiguous buffer, transformed there in place and moved back. The
// buffer's lines are padded past the power-of-two length so that the
// kColumns lines written together do not share cache sets. Wider blocks and
// tiled copies measured no faster (CPU time of the column pass of 4096²:
// 107 ms plain, 97 ms padded, 105-190 ms for 16-128 columns).
// Only columns c with c % seg < used are transformed (seg = inner: all).
bool c2c_columns(const cfloat* in, cfloat* out, int64_t outer, int64_t n, int64_t inner,
                 int64_t seg, int64_t used, bool inverse) {
  constexpr int64_t kColumns = 8;
  constexpr int64_t kPad = 8;
  const int64_t ld = n + kPad;
  if (!fits(ld) || !fits(ld * kColumns)) return false;
  const Library& lib = library();
  const Kind kind = inverse ? Kind::c2c_inverse : Kind::c2c_forward;
  const int64_t per_seg = (used + kColumns - 1) / kColumns;
  const int64_t blocks = (inner / seg) * per_seg;
  std::atomic<bool> ok{true};
  parallel_for(static_cast<size_t>(outer * blocks), 1, [&](size_t b, size_t e) {
    std::vector<cfloat> buf(static_cast<size_t>(kColumns * ld));
    for (size_t t = b; t < e; ++t) {
      const int64_t o = static_cast<int64_t>(t) / blocks, blk = static_cast<int64_t>(t) % blocks;
      const int64_t within = (blk % per_seg) * kColumns;
      const int64_t first = (blk / per_seg) * seg + within;
      const int64_t count = std::min(kColumns, used - within);
      const cfloat* src = in + o * n * inner + first;
      cfloat* dst = out + o * n * inner + first;
      for (int64_t k = 0; k < n; ++k) {
        for (int64_t c = 0; c < count; ++c) buf[c * ld + k] = src[k * inner + c];
      }
      Problem p{kind,
                static_cast<int>(n),
                static_cast<int>(count),
                1,
                static_cast<int>(ld),
                1,
                static_cast<int>(ld),
                true,
                0,
                0};
      PlanPtr plan = get(p, buf.data(), buf.data());
      if (!plan) {
        ok = false;
        return;
      }
      auto* data = reinterpret_cast<fftwf_complex*>(buf.data());
      lib.execute_dft(plan.get(), data, data);
      for (int64_t k = 0; k < n; ++k) {
        for (int64_t c = 0; c < count; ++c) dst[k * inner + c] = buf[c * ld + k];
      }
    }
  });
  return ok.load();
}

} // namespace

bool c2c(const cfloat* in, cfloat* out, int64_t outer, int64_t n, int64_t inner, bool inverse) {
  if (n == 0 || outer * inner == 0) return true;
  if (!library().loaded) return false;
  if (inner > 1) return c2c_columns(in, out, outer, n, inner, inner, inner, inverse);
  const Library& lib = library();
  // FFTW reads `in` only (out of place), so dropping const is sound.
  auto* src = const_cast<cfloat*>(in);
  return run(inverse ? Kind::c2c_inverse : Kind::c2c_forward, src, out, outer, n, n, n, inner,
             [&](void* plan, cfloat* i, cfloat* o) {
               lib.execute_dft(plan, reinterpret_cast<fftwf_complex*>(i),
                               reinterpret_cast<fftwf_complex*>(o));
             });
}

bool c2c_partial_columns(const cfloat* in, cfloat* out, int64_t outer, int64_t n, int64_t inner,
                         int64_t seg, int64_t used, bool inverse) {
  if (n == 0 || outer * inner == 0) return true;
  if (!library().loaded) return false;
  return c2c_columns(in, out, outer, n, inner, seg, used, inverse);
}

bool r2c_full_rows(const float* in, cfloat* out, int64_t rows, int64_t n) {
  if (n == 0 || rows == 0) return true;
  const Library& lib = library();
  auto* src = const_cast<float*>(in);
  return run(Kind::r2c, src, out, rows, n, n, n, 1, [&](void* plan, float* i, cfloat* o) {
    lib.execute_r2c(plan, i, reinterpret_cast<fftwf_complex*>(o));
  });
}

bool r2c(const float* in, cfloat* out, int64_t outer, int64_t n, int64_t inner) {
  if (n == 0 || outer * inner == 0) return true;
  const Library& lib = library();
  auto* src = const_cast<float*>(in);
  return run(Kind::r2c, src, out, outer, n, n, n / 2 + 1, inner,
             [&](void* plan, float* i, cfloat* o) {
               lib.execute_r2c(plan, i, reinterpret_cast<fftwf_complex*>(o));
             });
}

bool c2r(const cfloat* in, float* out, int64_t outer, int64_t n, int64_t inner) {
  if (n == 0 || outer * inner == 0) return true;
  const Library& lib = library();
  // FFTW's c2r overwrites its input; it works on a copy so `in` (an input
  // array of the graph) stays intact.
  const int64_t h = n / 2 + 1;
  std::vector<cfloat> copy(in, in + outer * h * inner);
  // The zero (and, for even n, Nyquist) bins of a real signal are real;
  // NumPy ignores their imaginary parts, and so does Loom.
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      copy[(o * h) * inner + i].imag(0.0f);
      if (n % 2 == 0) copy[(o * h + h - 1) * inner + i].imag(0.0f);
    }
  }
  return run(Kind::c2r, copy.data(), out, outer, n, h, n, inner,
             [&](void* plan, cfloat* i, float* o) {
               lib.execute_c2r(plan, reinterpret_cast<fftwf_complex*>(i), o);
             });
}

} // namespace loom::cpu::fft::fftw
