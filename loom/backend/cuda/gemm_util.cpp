// gemm_util.h's GEMM. cuBLAS and cuBLASLt are loaded here, once, with
// dlopen (Loom links no CUDA library but the runtime, so that it loads on
// machines without a GPU); every kernel that multiplies matrices calls
// gemm() below.
//
// Half precision goes through cuBLASLt because its heuristic offers several
// algorithms per shape where cublasGemmStridedBatchedEx picks one without
// looking at the operands' alignment or a workspace: on an H200 the choice
// it makes for bfloat16 8192^3 and float16 4096^3 runs 5-20% under the
// best one (torch uses cuBLASLt for the same reason).
#include "loom/backend/cuda/gemm_util.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "loom/backend/cuda/cuda.h"

namespace loom::cuda {

namespace {

// The 32-bit-index form (the header overloads the name in C++).
using GemmFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
                                  int, const void*, const void*, cudaDataType, int, long long,
                                  const void*, cudaDataType, int, long long, const void*, void*,
                                  cudaDataType, int, long long, int, cublasComputeType_t,
                                  cublasGemmAlgo_t);

// The entry points Loom uses from both libraries.
struct Library {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  GemmFn gemm = nullptr;

  decltype(&cublasLtCreate) lt_create = nullptr;
  decltype(&cublasLtMatmulDescCreate) desc_create = nullptr;
  decltype(&cublasLtMatmulDescDestroy) desc_destroy = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) desc_set = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) layout_create = nullptr;
  decltype(&cublasLtMatrixLayoutDestroy) layout_destroy = nullptr;
  decltype(&cublasLtMatrixLayoutSetAttribute) layout_set = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) pref_create = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) pref_set = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) pref_destroy = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic = nullptr;
  decltype(&cublasLtMatmul) matmul = nullptr;

  bool ok() const { return create && set_stream && gemm; }
  bool lt_ok() const {
    return lt_create && desc_create && desc_destroy && desc_set && layout_create &&
           layout_destroy && layout_set && pref_create && pref_set && pref_destroy && heuristic &&
           matmul;
  }
};

void* open_first(std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (void* h = dlopen(name, RTLD_NOW | RTLD_LOCAL)) return h;
  }
  return nullptr;
}

template <typename Fn>
void bind(void* h, Fn& fn, const char* name) {
  fn = reinterpret_cast<Fn>(dlsym(h, name));
}

const Library& library() {
  static Library lib = [] {
    Library l;
    LibraryLoad loading;
    void* h = open_first({"libcublas.so.13", "libcublas.so.12", "libcublas.so",
                          "/usr/local/cuda/lib64/libcublas.so"});
    if (h == nullptr) return l;
    // cuBLAS loads cuBLASLt itself: the same library, already initialised.
    void* lt = open_first({"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so",
                           "/usr/local/cuda/lib64/libcublasLt.so"});
    close_before_teardown(); // after the libraries' own teardown was registered
    bind(h, l.create, "cublasCreate_v2");
    bind(h, l.set_stream, "cublasSetStream_v2");
    bind(h, l.gemm, "cublasGemmStridedBatchedEx");
    if (lt != nullptr) {
      bind(lt, l.lt_create, "cublasLtCreate");
      bind(lt, l.desc_create, "cublasLtMatmulDescCreate");
      bind(lt, l.desc_destroy, "cublasLtMatmulDescDestroy");
      bind(lt, l.desc_set, "cublasLtMatmulDescSetAttribute");
      bind(lt, l.layout_create, "cublasLtMatrixLayoutCreate");
      bind(lt, l.layout_destroy, "cublasLtMatrixLayoutDestroy");
      bind(lt, l.layout_set, "cublasLtMatrixLayoutSetAttribute");
      bind(lt, l.pref_create, "cublasLtMatmulPreferenceCreate");
      bind(lt, l.pref_set, "cublasLtMatmulPreferenceSetAttribute");
      bind(lt, l.pref_destroy, "cublasLtMatmulPreferenceDestroy");
      bind(lt, l.heuristic, "cublasLtMatmulAlgoGetHeuristic");
      bind(lt, l.matmul, "cublasLtMatmul");
    }
    return l;
  }();
  return lib;
}

// One handle of each kind per worker thread (a cuBLAS handle must not be
// used by two threads at once); each worker serves one stream.
cublasHandle_t blas_handle(cudaStream_t s) {
  thread_local cublasHandle_t h = nullptr;
  thread_local cudaStream_t bound = nullptr;
  if (h == nullptr) {
    LibraryLoad loading; // a handle's creation loads cuBLAS's state
    if (library().create(&h) != CUBLAS_STATUS_SUCCESS) {
      h = nullptr;
      return nullptr;
    }
  }
  if (bound != s) {
    library().set_stream(h, s);
    bound = s;
  }
  return h;
}

cublasLtHandle_t lt_handle() {
  thread_local cublasLtHandle_t h = nullptr;
  if (h == nullptr) {
    LibraryLoad loading;
    if (library().lt_create(&h) != CUBLAS_STATUS_SUCCESS) h = nullptr;
  }
  return h;
}

bool env_flag(const char* name, bool fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  return std::string(v) != "0";
}

bool tf32_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("LOOM_CUDA_TF32");
    return v != nullptr && std::string(v) == "1";
  }();
  return on;
}

struct Types {
  cudaDataType data;
  cublasComputeType_t compute;
};

std::optional<Types> types_of(Dtype d) {
  if (d == float32) {
    return Types{CUDA_R_32F, tf32_enabled() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F};
  }
  if (d == float64) return Types{CUDA_R_64F, CUBLAS_COMPUTE_64F};
  if (d == float16) return Types{CUDA_R_16F, CUBLAS_COMPUTE_32F};
  if (d == bfloat16) return Types{CUDA_R_16BF, CUBLAS_COMPUTE_32F};
  return std::nullopt;
}

// cuBLAS(Lt) sets its teardown up lazily (its kernel libraries load at a
// type's first GEMM, which counts as a library load for the exit gate); the
// gate's closing is registered after it, once per type and path.
class FirstUse {
 public:
  FirstUse(unsigned key) : bit_(uint64_t(1) << (key & 63)) {
    first_ = (seen_.load() & bit_) == 0;
    if (first_) loading_.emplace();
  }
  ~FirstUse() {
    if (first_ && (seen_.fetch_or(bit_) & bit_) == 0) close_before_teardown();
  }

 private:
  static inline std::atomic<uint64_t> seen_{0};
  uint64_t bit_;
  bool first_;
  std::optional<LibraryLoad> loading_;
};

[[noreturn]] void fail(const char* op, cublasStatus_t st) {
  throw std::runtime_error(std::string("[") + op + "] cuBLAS GEMM failed with status " +
                           std::to_string(st) + ".");
}

// --- cuBLASLt -------------------------------------------------------------

// Workspace cuBLASLt may use (NVIDIA recommends 32 MiB on Hopper); taken from
// the device pool per call, only as much as the chosen algorithm asks for.
constexpr size_t kMaxWorkspace = size_t(32) << 20;
// Products of at least this many multiply-adds time their candidates once;
// below it the first heuristic answer is kept (timing would cost more than a
// better choice can save).
constexpr long long kTuneMacs = 1ll << 30;
constexpr int kCandidates = 8;

// The largest power of two (up to 256) that divides every address the
// operand's batches start at: cuBLASLt's fast kernels need 16-byte aligned
// operands, and its heuristic assumes 256 unless told.
uint32_t alignment(const void* p, long long stride, int batch, size_t elem) {
  uint64_t bits = reinterpret_cast<uintptr_t>(p) | 256;
  if (batch > 1) bits |= static_cast<uint64_t>(stride) * elem;
  return static_cast<uint32_t>(bits & (~bits + 1));
}

struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  std::vector<cublasLtMatmulHeuristicResult_t> candidates;
  std::atomic<int> chosen{-1}; // index into candidates once timed (or untimed)

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  // Runs when the cache drops the plan and the last GEMM using it has
  // returned (never at exit: the cache is not destroyed).
  ~Plan() {
    const Library& L = library();
    for (cublasLtMatrixLayout_t l : {a, b, c}) {
      if (l != nullptr) L.layout_destroy(l);
    }
    if (desc != nullptr) L.desc_destroy(desc);
  }
};

using PlanKey = std::array<long long, 17>;

// Builds the descriptor, layouts and candidate list of one shape; a plan
// with no candidates means cuBLASLt has no algorithm for it.
std::unique_ptr<Plan> make_plan(const PlanKey& key, const Types& t, cublasLtHandle_t h) {
  const Library& L = library();
  auto plan = std::make_unique<Plan>();
  const bool ta = key[1], tb = key[2];
  const long long m = key[3], n = key[4], k = key[5], lda = key[6], ldb = key[7], ldc = key[8];
  const long long sa = key[9], sb = key[10], sc = key[11];
  const int batch = static_cast<int>(key[12]);
  auto ok = [](cublasStatus_t st) { return st == CUBLAS_STATUS_SUCCESS; };
  if (!ok(L.desc_create(&plan->desc, t.compute, CUDA_R_32F))) return plan;
  cublasOperation_t op_a = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t op_b = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  L.desc_set(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a));
  L.desc_set(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b));
  auto layout = [&](cublasLtMatrixLayout_t* out, long long rows, long long cols, long long ld,
                    long long stride) {
    if (!ok(L.layout_create(out, t.data, rows, cols, ld))) return false;
    if (batch > 1) {
      int32_t count = batch;
      int64_t offset = stride;
      L.layout_set(*out, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count));
      L.layout_set(*out, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &offset, sizeof(offset));
    }
    return true;
  };
  if (!layout(&plan->a, ta ? k : m, ta ? m : k, lda, sa) ||
      !layout(&plan->b, tb ? n : k, tb ? k : n, ldb, sb) || !layout(&plan->c, m, n, ldc, sc)) {
    return plan;
  }
  cublasLtMatmulPreference_t pref = nullptr;
  if (!ok(L.pref_create(&pref))) return plan;
  uint64_t workspace = kMaxWorkspace;
  L.pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace));
  const uint32_t align_a = static_cast<uint32_t>(key[13]), align_b = static_cast<uint32_t>(key[14]),
                 align_c = static_cast<uint32_t>(key[15]);
  L.pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof(align_a));
  L.pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof(align_b));
  L.pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c, sizeof(align_c));
  L.pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c, sizeof(align_c));
  std::vector<cublasLtMatmulHeuristicResult_t> found(kCandidates);
  int count = 0;
  cublasStatus_t st = L.heuristic(h, plan->desc, plan->a, plan->b, plan->c, plan->c, pref,
                                  kCandidates, found.data(), &count);
  L.pref_destroy(pref);
  if (!ok(st)) return plan;
  for (int i = 0; i < count; ++i) {
    if (found[i].state == CUBLAS_STATUS_SUCCESS) plan->candidates.push_back(found[i]);
  }
  return plan;
}

// Plans cached at most (one per shape, alignment and dtype seen): a program
// whose shapes keep changing (growing sequences) would otherwise hold
// descriptors without bound. Past the bound the whole cache is dropped (the
// shapes in use come back at their next GEMM, timed again).
constexpr size_t kMaxPlans = 4096;

std::shared_ptr<Plan> plan_for(const PlanKey& key, const Types& t, cublasLtHandle_t h) {
  // Never destroyed: a worker thread may run a GEMM while the process exits.
  static std::mutex& mutex = *new std::mutex;
  static auto& plans = *new std::map<PlanKey, std::shared_ptr<Plan>>;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = plans.find(key);
    if (it != plans.end()) return it->second;
  }
  std::shared_ptr<Plan> made = make_plan(key, t, h); // outside the lock: the heuristic is slow
  std::lock_guard<std::mutex> lock(mutex);
  auto it = plans.find(key);
  if (it != plans.end()) return it->second;     // another thread made it first: as good
  if (plans.size() >= kMaxPlans) plans.clear(); // plans in use live on in their callers
  plans.emplace(key, made);
  return made;
}

// Runs every candidate on the real operands (beta is 0, so the output's last
// write is a full product) and returns the fastest's index. Every candidate
// runs once untimed first (a GPU idle before its first large product is
// still raising its clocks: timed then, the heuristic's first choice, timed
// first, looked slower than it is), then each is timed in two rounds of
// kTimedRuns, taking its better round; another candidate replaces the
// heuristic's first only when it is at least 1% faster (a closer difference
// is noise).
int fastest(Plan& plan, cublasLtHandle_t h, const void* alpha, const void* beta, const void* a,
            const void* b, void* c, cudaStream_t s) {
  const Library& L = library();
  size_t need = 0;
  for (auto& cand : plan.candidates) need = std::max(need, cand.workspaceSize);
  auto& pool = device_pool(current_device());
  allocator::Buffer ws{};
  if (need > 0) ws = pool.malloc(need);
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  const size_t n = plan.candidates.size();
  auto run = [&](size_t i) {
    const auto& cand = plan.candidates[i];
    return L.matmul(h, plan.desc, alpha, a, plan.a, b, plan.b, beta, c, plan.c, c, plan.c,
                    &cand.algo, ws.ptr, cand.workspaceSize, s) == CUBLAS_STATUS_SUCCESS;
  };
  std::vector<char> usable(n, 0);
  for (size_t i = 0; i < n; ++i) usable[i] = run(i); // warm-up; a failing algorithm is skipped
  constexpr int kTimedRuns = 2;
  std::vector<float> best_ms(n, -1.0f);
  for (int round = 0; round < 2; ++round) {
    for (size_t i = 0; i < n; ++i) {
      if (!usable[i]) continue;
      check(cudaEventRecord(start, s), "cudaEventRecord");
      bool ran = true;
      for (int rep = 0; rep < kTimedRuns && ran; ++rep) ran = run(i);
      check(cudaEventRecord(stop, s), "cudaEventRecord");
      check(cudaEventSynchronize(stop), "cudaEventSynchronize");
      float ms = 0;
      check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
      if (!ran) {
        usable[i] = 0;
        continue;
      }
      if (best_ms[i] < 0 || ms < best_ms[i]) best_ms[i] = ms;
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  int best = 0;
  while (best < static_cast<int>(n) && !usable[best]) ++best;
  if (best == static_cast<int>(n)) best = 0; // none ran: the GEMM below reports the error
  const float first_ms = best_ms[best];
  for (size_t i = best + 1; i < n; ++i) {
    if (usable[i] && best_ms[i] < 0.99f * first_ms && best_ms[i] < best_ms[best]) {
      best = static_cast<int>(i);
    }
  }
  if (ws.ptr != nullptr) pool.free(ws);
  return best;
}

// The cuBLASLt path; false when cuBLASLt has no algorithm for this case (the
// caller then uses cuBLAS).
bool lt_gemm(const Types& t, Dtype d, bool ta, bool tb, int m, int n, int k, const void* a, int lda,
             long long sa, const void* b, int ldb, long long sb, void* c, int ldc, long long sc,
             int batch, cudaStream_t s, const char* op) {
  cublasLtHandle_t h = lt_handle();
  if (h == nullptr) return false;
  const size_t elem = d.size;
  PlanKey key{static_cast<long long>(t.compute) * 1000 + t.data,
              ta,
              tb,
              m,
              n,
              k,
              lda,
              ldb,
              ldc,
              batch > 1 ? sa : 0,
              batch > 1 ? sb : 0,
              batch > 1 ? sc : 0,
              batch,
              alignment(a, sa, batch, elem),
              alignment(b, sb, batch, elem),
              alignment(c, sc, batch, elem),
              0};
  FirstUse first(static_cast<unsigned>(t.data) + 32);
  std::shared_ptr<Plan> held = plan_for(key, t, h);
  Plan& plan = *held;
  if (plan.candidates.empty()) return false;
  const float alpha = 1.0f, beta = 0.0f;
  int chosen = plan.chosen.load();
  if (chosen < 0) {
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    cudaStreamIsCapturing(s, &capturing);
    const long long macs = static_cast<long long>(m) * n * k * batch;
    const bool tune =
        plan.candidates.size() > 1 && macs >= kTuneMacs && env_flag("LOOM_CUDA_GEMM_TUNE", true);
    if (tune && capturing == cudaStreamCaptureStatusNone) {
      chosen = fastest(plan, h, &alpha, &beta, a, b, c, s);
      plan.chosen.store(chosen);
    } else {
      chosen = 0;
      // Under stream capture nothing can be timed: this GEMM takes the
      // heuristic's first, and the first uncaptured one times them.
      if (!tune) plan.chosen.store(chosen);
    }
  }
  const auto& cand = plan.candidates[chosen];
  auto& pool = device_pool(current_device());
  allocator::Buffer ws{};
  if (cand.workspaceSize > 0) ws = pool.malloc(cand.workspaceSize);
  cublasStatus_t st = library().matmul(h, plan.desc, &alpha, a, plan.a, b, plan.b, &beta, c, plan.c,
                                       c, plan.c, &cand.algo, ws.ptr, cand.workspaceSize, s);
  if (ws.ptr != nullptr) pool.free(ws); // stream-ordered: after the GEMM
  if (st != CUBLAS_STATUS_SUCCESS) fail(op, st);
  return true;
}

} // namespace

bool gemm_supported(Dtype d) { return types_of(d).has_value() && library().ok(); }

bool gemm(Dtype d, bool trans_a, bool trans_b, int m, int n, int k, const void* a, int lda,
          long long stride_a, const void* b, int ldb, long long stride_b, void* c, int ldc,
          long long stride_c, int batch, cudaStream_t s, const char* op) {
  std::optional<Types> t = types_of(d);
  if (!t || !library().ok()) return false;
  static const bool use_lt = env_flag("LOOM_CUDA_LT", true) && library().lt_ok();
  const bool lt_type = d == float16 || d == bfloat16 || (d == float32 && tf32_enabled());
  // A broadcast operand (batch stride 0) stays on cuBLAS: cuBLASLt documents
  // no zero batch offset.
  const bool broadcast = batch > 1 && (stride_a == 0 || stride_b == 0);
  if (use_lt && lt_type && !broadcast &&
      lt_gemm(*t, d, trans_a, trans_b, m, n, k, a, lda, stride_a, b, ldb, stride_b, c, ldc,
              stride_c, batch, s, op)) {
    return true;
  }
  cublasHandle_t h = blas_handle(s);
  if (h == nullptr) return false;
  double alpha_d = 1.0, beta_d = 0.0;
  float alpha_f = 1.0f, beta_f = 0.0f;
  const void* alpha = d == float64 ? static_cast<const void*>(&alpha_d) : &alpha_f;
  const void* beta = d == float64 ? static_cast<const void*>(&beta_d) : &beta_f;
  FirstUse first(static_cast<unsigned>(t->data));
  cublasStatus_t st =
      library().gemm(h, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, m,
                     n, k, alpha, a, t->data, lda, stride_a, b, t->data, ldb, stride_b, beta, c,
                     t->data, ldc, stride_c, batch, t->compute, CUBLAS_GEMM_DEFAULT);
  if (st != CUBLAS_STATUS_SUCCESS) fail(op, st);
  return true;
}

} // namespace loom::cuda
