// Unary element-wise kernels: the op table's functor of each op
// (primitives/elementwise_table.h) over the compute type of each dtype, run
// by a loop that picks the layout's fastest path.
#include <algorithm>
#include <cmath>
#include <complex>
#include <stdexcept>
#include <string>

#include "loom/backend/cpu/elementwise.h"
#include "loom/backend/cpu/strided.h"
#include "loom/backend/cpu/thread_pool.h"
#include "loom/primitives/elementwise_table.h"
#include "loom/types/dispatch.h"

namespace loom::cpu {

namespace {

using namespace elementwise;

// --- the loop ---

// `f` maps one element; `span(x, o, n)` maps n contiguous elements (a loop
// over f, or the entry's block form).
template <typename T, typename Out, typename F, typename Span>
void unary_loop(const array& in, array& out, F f, Span span) {
  if (out.size() == 0) {
    out.set_data(allocator::allocate(0));
    return;
  }
  const bool dense = is_dense(in);
  if (dense || is_scalar_like(in)) {
    // The output mirrors the input's layout, so any dense input (row-major,
    // column-major, transposed) and any broadcast scalar runs as a flat loop.
    size_t n = 1;
    if (dense) {
      alloc_like(out, in, {&in});
      n = in.data_size();
    } else {
      alloc_scalar_like(out);
    }
    const T* src = in.data<T>();
    Out* dst = out.data<Out>();
    parallel_for(n, kGrain, [&](size_t b, size_t e) { span(src + b, dst + b, e - b); });
    return;
  }
  out.set_data(allocator::allocate(out.nbytes()));
  auto layout = collapse<2>(in.shape(), {broadcast_strides(in, in.shape()), out.strides()});
  const T* src = in.data<T>();
  Out* dst = out.data<Out>();
  parallel_for(out.size(), kGrain, [&](size_t b, size_t e) {
    for_each_run<2>(layout, b, e, [&](const auto& off, int64_t n, const auto& st) {
      const T* s = src + off[0];
      Out* d = dst + off[1];
      if (st[0] == 1) {
        span(s, d, static_cast<size_t>(n));
      } else {
        for (int64_t i = 0; i < n; ++i) d[i] = f(s[i * st[0]]);
      }
    });
  });
}

// Entries with a block form (elementwise_table.h) run it over float32 runs
// directly; float16 and bfloat16 runs convert a piece to float32 on the
// stack, run the block form and convert back.

template <typename Op, typename T>
void block_span(const T* x, T* o, size_t n) {
  if constexpr (std::is_same_v<T, float>) {
    Op::block(x, o, n);
  } else {
    constexpr size_t kPiece = 512;
    alignas(64) float buf[kPiece];
    for (size_t b = 0; b < n; b += kPiece) {
      const size_t m = std::min(kPiece, n - b);
      for (size_t i = 0; i < m; ++i) buf[i] = load(x[b + i]);
      Op::block(buf, buf, m);
      for (size_t i = 0; i < m; ++i) o[b + i] = store<T>(buf[i]);
    }
  }
}

template <typename Op>
void run(UnaryOp op, const array& in, array& out) {
  dispatch(in.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    if constexpr (ew::accepts_v<Op::accepts, C>) {
      using R = decltype(Op{}(std::declval<C>()));
      using Out = std::conditional_t<std::is_same_v<R, C>, T, R>;
      if (out.itemsize() != sizeof(Out)) {
        throw std::logic_error(std::string("[") + Op::name + "] Output dtype " +
                               dtype_name(out.dtype()) + " does not match the kernel.");
      }
      using S = storage_t<T>;
      using SO = storage_t<Out>;
      auto f = [](S x) { return static_cast<SO>(store<Out>(Op{}(load_storage<T>(x)))); };
      if constexpr (ew::has_block<Op> && std::is_same_v<C, float> && std::is_same_v<Out, T>) {
        unary_loop<S, SO>(in, out, f, [](const S* x, SO* o, size_t n) { block_span<Op>(x, o, n); });
      } else {
        unary_loop<S, SO>(in, out, f, [&f](const S* x, SO* o, size_t n) {
          // The pointers are parameters: were they captured, a byte-sized
          // output could alias them and the loop would not vectorise.
          for (size_t i = 0; i < n; ++i) o[i] = f(x[i]);
        });
      }
    } else {
      throw std::invalid_argument(std::string("[") + Op::name + "] Not supported for " +
                                  dtype_name(in.dtype()) + ".");
    }
  });
}

} // namespace

void unary(UnaryOp op, const array& in, array& out) {
  ew::visit(op, [&]<typename Op>() { run<Op>(op, in, out); });
}

} // namespace loom::cpu

namespace loom {

void Unary::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  cpu::unary(op_, inputs[0], outputs[0]);
}

void StopGradient::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  outputs[0].copy_shared_buffer(inputs[0]);
}

} // namespace loom
