// The fast path of a fused region whose values are all float32: each chunk of
// kChunk elements runs the region's ops one at a time, each as a vectorised
// loop over L1-resident buffers (what the eager kernel does over the whole
// array), dense inputs are read in place and escaping values are written
// straight into their outputs, or streamed there from the chunk buffer when
// the outputs are larger than the caches (no per-op arrays or allocations).
//
// The ops come from the element-wise op table (primitives/elementwise_table.h):
// every unary or binary entry whose functor is defined on float and returns
// float runs here through its own functor, the same one the eager kernels run,
// so results are identical and a new table entry fuses without touching this
// file. Values that are the same at every position (scalars and ops of
// scalars) are computed once and passed to the loops as a number.
#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include <unistd.h>

#if defined(__AVX__)
#include <immintrin.h>
#endif

#include "loom/backend/cpu/compiled.h"
#include "loom/backend/cpu/thread_pool.h"
#include "loom/compile/compiled.h"
#include "loom/primitives/binary.h"
#include "loom/primitives/elementwise_table.h"
#include "loom/primitives/unary.h"

namespace loom::compile_detail {

namespace {

// 1024 float32 values are 4 KiB: a chain's live buffers stay in L1 (1024
// measured ahead of 2048, 4096 and 8192 on gelu).
constexpr size_t kChunk = 1024;
// Chunks a thread takes at a time (256 KiB of float32).
constexpr size_t kRun = 64;

using UnaryLoop = void (*)(const float*, float*, size_t);
using BinaryLoop = void (*)(const float*, const float*, float*, size_t);
using BinaryScalarLoop = void (*)(const float*, float, float*, size_t);
using UnaryScalar = float (*)(float);
using BinaryScalar = float (*)(float, float);

// The loops of one entry. `__restrict`: a destination is a fresh buffer or an
// output, never an operand, and telling the compiler so spares it the
// run-time overlap checks.
template <typename Op>
void unary_loop(const float* __restrict a, float* __restrict d, size_t n) {
  if constexpr (ew::has_block<Op>) {
    Op::block(a, d, n);
  } else {
    for (size_t i = 0; i < n; ++i) d[i] = Op{}(a[i]);
  }
}
template <typename Op>
void binary_loop(const float* __restrict a, const float* __restrict b, float* __restrict d,
                 size_t n) {
  for (size_t i = 0; i < n; ++i) d[i] = Op{}(a[i], b[i]);
}
template <typename Op>
void binary_loop_vs(const float* __restrict a, float b, float* __restrict d, size_t n) {
  for (size_t i = 0; i < n; ++i) d[i] = Op{}(a[i], b);
}

// x / 2^k and x * 2^-k are the same real number, rounded once, so dividing
// by a normal power of two (whose reciprocal is exact) multiplies instead:
// bit for bit the eager quotient, at a fraction of a division's cost
// (gelu's `/ 2`; the division loops were 29% of compiled gelu in perf).
bool exact_reciprocal(float b) {
  uint32_t bits = std::bit_cast<uint32_t>(b);
  uint32_t exponent = (bits >> 23) & 0xffu;
  return (bits & 0x007fffffu) == 0 && exponent != 0 && exponent != 0xffu;
}
template <>
void binary_loop_vs<ew::Divide>(const float* __restrict a, float b, float* __restrict d, size_t n) {
  if (exact_reciprocal(b)) {
    const float r = 1.0f / b;
    for (size_t i = 0; i < n; ++i) d[i] = a[i] * r;
  } else {
    for (size_t i = 0; i < n; ++i) d[i] = a[i] / b;
  }
}
template <typename Op>
void binary_loop_sv(const float* __restrict b, float a, float* __restrict d, size_t n) {
  for (size_t i = 0; i < n; ++i) d[i] = Op{}(a, b[i]);
}
template <typename Op>
float unary_scalar(float a) {
  return Op{}(a);
}
template <typename Op>
float binary_scalar(float a, float b) {
  return Op{}(a, b);
}

// Outputs too large to stay in the last-level cache are written with
// streaming stores: a plain store into a buffer that is not in the cache first
// reads the line it writes (for ownership), and in a chain whose loops compute
// between memory accesses those reads are not hidden (an 8 MiB gelu alone, one
// thread: 2.31 ms streamed, 2.76 not). An output that fits in the cache is
// stored plainly: a streaming store sends it to memory, and the op that reads
// it next (in a training graph, soon: the transformer block's 8 MiB gelu and
// softmax-gradient values feed GEMMs) then reads it back from memory instead of
// the cache. The bar is an eighth of the last-level cache (the graph's other
// values live there too, and on a shared host other tenants' data: 32 MiB
// here, so a 64 MiB gelu, measured 5-15% slower with plain stores, still
// streams), at least 8 MiB (the old fixed bar, kept where the cache size is
// unknown). LOOM_COMPILE_STREAM_BYTES overrides it.
size_t last_level_cache_bytes() {
  long bytes = -1;
#if defined(_SC_LEVEL3_CACHE_SIZE)
  bytes = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
#if defined(_SC_LEVEL2_CACHE_SIZE)
  if (bytes <= 0) bytes = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
  return bytes > 0 ? static_cast<size_t>(bytes) : 0;
}

size_t stream_bytes() {
  static const size_t n = [] {
    if (const char* v = std::getenv("LOOM_COMPILE_STREAM_BYTES"); v && *v) {
      return static_cast<size_t>(std::strtoull(v, nullptr, 10));
    }
    return std::max(size_t(8) << 20, last_level_cache_bytes() / 8);
  }();
  return n;
}

void store_out(const float* src, float* dst, size_t n, bool stream) {
#if defined(__AVX__)
  if (stream && reinterpret_cast<uintptr_t>(dst) % 32 == 0) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_stream_ps(dst + i, _mm256_loadu_ps(src + i));
    for (; i < n; ++i) dst[i] = src[i];
    return;
  }
#endif
  std::memcpy(dst, src, n * sizeof(float));
}

// An entry runs here when its functor maps float (and float, float) to float.
template <typename Op, typename... Args>
constexpr bool runs_on_float() {
  if constexpr (!ew::accepts_v<Op::accepts, float>) {
    return false;
  } else {
    return std::is_same_v<decltype(Op{}(std::declval<Args>()...)), float>;
  }
}

// How one op of the region runs.
struct Step {
  enum Kind { alias, unary, binary } kind = alias;
  UnaryLoop unary_loop = nullptr;
  UnaryScalar unary_scalar = nullptr;
  BinaryLoop binary_loop = nullptr;
  BinaryScalarLoop binary_vs = nullptr;
  BinaryScalarLoop binary_sv = nullptr;
  BinaryScalar binary_scalar = nullptr;
};

bool plan_step(const FusedOp& op, Step& step) {
  if (op.dtype != float32) return false;
  const Primitive& p = *op.primitive;
  if (p.traits().broadcast) {
    step.kind = Step::alias;
    return true;
  }
  if (auto* u = dynamic_cast<const Unary*>(&p)) {
    return ew::visit(u->op(), [&]<typename Op>() {
      if constexpr (runs_on_float<Op, float>()) {
        step.kind = Step::unary;
        step.unary_loop = &unary_loop<Op>;
        step.unary_scalar = &unary_scalar<Op>;
        return true;
      } else {
        return false;
      }
    });
  }
  if (auto* b = dynamic_cast<const Binary*>(&p)) {
    return ew::visit(b->op(), [&]<typename Op>() {
      if constexpr (runs_on_float<Op, float, float>()) {
        step.kind = Step::binary;
        step.binary_loop = &binary_loop<Op>;
        step.binary_vs = &binary_loop_vs<Op>;
        step.binary_sv = &binary_loop_sv<Op>;
        step.binary_scalar = &binary_scalar<Op>;
        return true;
      } else {
        return false;
      }
    });
  }
  return false;
}

} // namespace

bool eval_f32_chain(const Compiled& c, const std::vector<array>& inputs,
                    std::vector<array>& outputs, const std::vector<InputPlan>& plans) {
  const auto& ops = c.ops();
  const int num_inputs = c.num_inputs();
  for (const auto& in : inputs) {
    if (in.dtype() != float32) return false;
  }
  std::vector<Step> steps(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    if (!plan_step(ops[i], steps[i])) return false;
  }
  const size_t values = num_inputs + ops.size();

  // Uniform values (scalar inputs and ops of uniform values only) are
  // computed here, once.
  std::vector<char> uniform(values, 0);
  std::vector<float> number(values, 0.0f);
  for (int k = 0; k < num_inputs; ++k) {
    if (plans[k].kind == InputPlan::scalar) {
      uniform[k] = 1;
      number[k] = *inputs[k].data<float>();
    }
  }
  for (size_t i = 0; i < ops.size(); ++i) {
    const auto& args = ops[i].args;
    const size_t v = num_inputs + i;
    const Step& s = steps[i];
    bool all = std::all_of(args.begin(), args.end(), [&](int a) { return uniform[a] != 0; });
    if (!all) continue;
    uniform[v] = 1;
    number[v] = s.kind == Step::alias   ? number[args[0]]
                : s.kind == Step::unary ? s.unary_scalar(number[args[0]])
                                        : s.binary_scalar(number[args[0]], number[args[1]]);
  }

  const size_t total = outputs[0].size();
  const bool stream = total * sizeof(float) >= stream_bytes();

  // An output takes over the buffer of a dense input that dies with this
  // node (Adam's old m, v and parameter; a chain's consumed intermediate),
  // as eager kernels do: no fresh buffer, and the lines it writes are the
  // ones the chunk has just read, so no cold read-for-ownership. Its values
  // then go through the chunk buffer and are copied out after the chunk's
  // last op, once every read of the input's elements there is done.
  std::vector<char> donated(outputs.size(), 0);
  {
    std::vector<char> taken(num_inputs, 0);
    for (size_t j = 0; j < outputs.size(); ++j) {
      const size_t v = num_inputs + c.output_ops()[j];
      if (uniform[v] || steps[c.output_ops()[j]].kind == Step::alias) continue;
      for (int k = 0; k < num_inputs; ++k) {
        const array& in = inputs[k];
        if (taken[k] || plans[k].kind != InputPlan::dense || !in.is_donatable() ||
            outputs[j].is_tracer() || in.data_size() != total) {
          continue;
        }
        // One input may appear twice among the node's inputs: donate only a
        // buffer no other input slot reads.
        bool shared = false;
        for (int q = 0; q < num_inputs; ++q) {
          shared = shared || (q != k && inputs[q].data<float>() == in.data<float>());
        }
        if (shared) continue;
        taken[k] = 1;
        donated[j] = 1;
        outputs[j].copy_shared_buffer(in);
        break;
      }
    }
  }
  for (size_t j = 0; j < outputs.size(); ++j) {
    if (!donated[j]) outputs[j].set_data(allocator::allocate(outputs[j].nbytes()));
  }

  // Chunk buffers: the values neither read in place nor written to an
  // output get a buffer from a small pool, returned after their last use,
  // so a long chain needs only as many buffers as it has values live at once.
  std::vector<int> escape(ops.size(), -1); // op -> output, or -1
  for (size_t j = 0; j < c.output_ops().size(); ++j)
    escape[c.output_ops()[j]] = static_cast<int>(j);
  std::vector<int> last_use(values, -1);
  for (size_t i = 0; i < ops.size(); ++i)
    for (int a : ops[i].args) last_use[a] = static_cast<int>(i);
  // A donated output's chunk buffer lives to the end of the chunk.
  for (size_t j = 0; j < outputs.size(); ++j) {
    if (donated[j]) last_use[num_inputs + c.output_ops()[j]] = static_cast<int>(ops.size());
  }
  // An alias shares its source's storage, which must outlive the alias.
  for (size_t i = ops.size(); i-- > 0;) {
    if (steps[i].kind == Step::alias) {
      int src = ops[i].args[0];
      last_use[src] = std::max(last_use[src], last_use[num_inputs + i]);
    }
  }
  std::vector<int> buffer(values, -1);
  int buffers = 0;
  {
    std::vector<int> free_list;
    std::vector<char> freed(values, 0);
    auto take = [&]() {
      if (free_list.empty()) return buffers++;
      int b = free_list.back();
      free_list.pop_back();
      return b;
    };
    for (int k = 0; k < num_inputs; ++k) {
      if (plans[k].kind == InputPlan::strided) buffer[k] = take();
    }
    for (size_t i = 0; i < ops.size(); ++i) {
      const size_t v = num_inputs + i;
      if (!uniform[v] && steps[i].kind != Step::alias &&
          (escape[i] < 0 || stream || donated[escape[i]])) {
        buffer[v] = take();
      }
      // Operands read for the last time give their buffer back (once, even
      // when an op reads one value twice); the value keeps its index.
      for (int a : ops[i].args) {
        if (last_use[a] == static_cast<int>(i) && buffer[a] >= 0 && !freed[a]) {
          free_list.push_back(buffer[a]);
          freed[a] = 1;
        }
      }
    }
  }

  // A vector broadcast over leading dimensions (a bias, a layer norm's
  // scale: collapsed strides (0, 1)) repeats with period L, so a chunk reads
  // it in place: inside the row when L >= kChunk, else from a copy of the
  // row repeated past kChunk elements, made once. Gathering it per chunk
  // cost as much as one of the region's ops.
  std::vector<int64_t> period(num_inputs, 0);
  std::vector<std::vector<float>> repeated(num_inputs);
  for (int k = 0; k < num_inputs; ++k) {
    const auto& layout = plans[k].layout;
    if (plans[k].kind != InputPlan::strided || layout.shape.size() != 2 ||
        layout.strides[0][0] != 0 || layout.strides[0][1] != 1) {
      continue;
    }
    const int64_t len = layout.shape[1];
    const float* row = inputs[k].data<float>();
    period[k] = len;
    if (len < static_cast<int64_t>(kChunk)) {
      repeated[k].resize(kChunk + len);
      for (size_t i = 0; i < repeated[k].size(); ++i) repeated[k][i] = row[i % len];
    }
  }

  // One chunk: gather its strided inputs, then run the ops in order.
  auto run_chunk = [&](size_t ch, float* scratch, std::vector<const float*>& ptr) {
    const size_t start = ch * kChunk;
    const size_t n = std::min(kChunk, total - start);
    for (int k = 0; k < num_inputs; ++k) {
      if (plans[k].kind == InputPlan::dense) {
        ptr[k] = inputs[k].data<float>() + start;
        continue;
      }
      if (period[k] > 0) {
        const size_t at = start % static_cast<size_t>(period[k]);
        if (!repeated[k].empty()) {
          ptr[k] = repeated[k].data() + at;
          continue;
        }
        if (at + n <= static_cast<size_t>(period[k])) {
          ptr[k] = inputs[k].data<float>() + at;
          continue;
        }
      }
      if (plans[k].kind == InputPlan::strided) {
        float* dst = scratch + buffer[k] * kChunk;
        gather_into(inputs[k], plans[k], start, n, dst);
        ptr[k] = dst;
      }
    }
    for (size_t i = 0; i < ops.size(); ++i) {
      const size_t v = num_inputs + i;
      const auto& args = ops[i].args;
      const Step& s = steps[i];
      float* out = escape[i] >= 0 ? outputs[escape[i]].data<float>() + start : nullptr;
      if (uniform[v]) {
        if (out) std::fill(out, out + n, number[v]);
        continue;
      }
      if (s.kind == Step::alias) {
        ptr[v] = ptr[args[0]];
        if (out) std::copy(ptr[v], ptr[v] + n, out);
        continue;
      }
      const bool deferred = out && donated[escape[i]];
      float* dst = out && !stream && !deferred ? out : scratch + buffer[v] * kChunk;
      if (s.kind == Step::unary) {
        s.unary_loop(ptr[args[0]], dst, n);
      } else if (uniform[args[1]]) {
        s.binary_vs(ptr[args[0]], number[args[1]], dst, n);
      } else if (uniform[args[0]]) {
        s.binary_sv(ptr[args[1]], number[args[0]], dst, n);
      } else {
        s.binary_loop(ptr[args[0]], ptr[args[1]], dst, n);
      }
      ptr[v] = dst;
      if (out && stream && !deferred) store_out(dst, out, n, true);
    }
    for (size_t j = 0; j < outputs.size(); ++j) {
      if (!donated[j]) continue;
      const float* src = ptr[num_inputs + c.output_ops()[j]];
      std::memcpy(outputs[j].data<float>() + start, src, n * sizeof(float));
    }
  };

  // Threads take runs of kRun chunks from a shared counter instead of a
  // fixed half each: on a machine whose cores are shared, a thread that
  // gets less of its core no longer holds up the whole region.
  const size_t chunks = (total + kChunk - 1) / kChunk;
  const size_t runs = (chunks + kRun - 1) / kRun;
  const size_t workers = std::min<size_t>(runs, static_cast<size_t>(cpu::num_threads()));
  std::atomic<size_t> next_run{0};
  cpu::parallel_for(workers, 1, [&](size_t, size_t) {
    std::vector<float> scratch(std::max(buffers, 1) * kChunk);
    std::vector<const float*> ptr(values, nullptr);
    for (size_t run = next_run++; run < runs; run = next_run++) {
      const size_t end = std::min(chunks, (run + 1) * kRun);
      for (size_t ch = run * kRun; ch < end; ++ch) run_chunk(ch, scratch.data(), ptr);
    }
#if defined(__AVX__)
    if (stream) _mm_sfence(); // streamed lines reach memory before the pool's join
#endif
  });
  return true;
}

} // namespace loom::compile_detail
