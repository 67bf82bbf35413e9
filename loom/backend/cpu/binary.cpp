// Binary element-wise kernels: the op table's functor of each op
// (primitives/elementwise_table.h) run by a loop per layout. Both inputs share the output's shape
// and one dtype (ops/ broadcast and promoted them); they may still be strided views, broadcasts
// (stride 0) or scalars, and each layout gets its own loop.
#include <cmath>
#include <complex>
#include <stdexcept>
#include <string>
#include <utility>

#include "loom/backend/cpu/copy.h"
#include "loom/backend/cpu/elementwise.h"
#include "loom/backend/cpu/strided.h"
#include "loom/backend/cpu/thread_pool.h"
#include "loom/primitives/elementwise_table.h"
#include "loom/types/dispatch.h"

namespace loom::cpu {

namespace {

using namespace elementwise;

// --- the loop ---

template <typename T, typename Out, typename F>
void binary_loop(const array& a, const array& b, array& out, F f) {
  if (out.size() == 0) {
    out.set_data(allocator::allocate(0));
    return;
  }
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  const bool dense_a = is_dense(a);
  const bool dense_b = is_dense(b);
  const bool scalar_a = is_scalar_like(a);
  const bool scalar_b = is_scalar_like(b);

  // Flat loops: the output mirrors the layout of the dense operand(s).
  if (dense_a && dense_b && same_dense_layout(a, b)) {
    alloc_like(out, a, {&a, &b});
    Out* po = out.data<Out>();
    parallel_for(a.data_size(), kGrain, [&](size_t s, size_t e) {
      // Local copies: a byte-sized output could otherwise alias the
      // captured pointers, and the loop would not vectorise.
      const T* x = pa;
      const T* y = pb;
      Out* o = po;
      for (size_t i = s; i < e; ++i) o[i] = f(x[i], y[i]);
    });
    return;
  }
  // Two dense operands in different layouts (a transposed view beside a
  // row-major array: a weight's gradient, a transposed product, added to
  // optimizer state). Walking the transposed one in the output's order takes
  // a cache miss per element, and its lines alias in L1 when its row length
  // is a multiple of the page size (an Adam update of an MLP ran at a tenth
  // of the copy rate); the blocked transpose copy is far cheaper.
  if (dense_a && dense_b && !scalar_a && !scalar_b) {
    const bool row_a = a.flags().row_contiguous, row_b = b.flags().row_contiguous;
    if (row_a != row_b) {
      binary_loop<T, Out>(row_a ? a : ensure_row_contiguous(a),
                          row_b ? b : ensure_row_contiguous(b), out, f);
      return;
    }
  }
  if (scalar_a && dense_b) {
    alloc_like(out, b, {&b});
    Out* po = out.data<Out>();
    parallel_for(b.data_size(), kGrain, [&](size_t s, size_t e) {
      const T x = pa[0];
      const T* y = pb;
      Out* o = po;
      for (size_t i = s; i < e; ++i) o[i] = f(x, y[i]);
    });
    return;
  }
  if (dense_a && scalar_b) {
    alloc_like(out, a, {&a});
    Out* po = out.data<Out>();
    parallel_for(a.data_size(), kGrain, [&](size_t s, size_t e) {
      const T* x = pa;
      const T y = pb[0];
      Out* o = po;
      for (size_t i = s; i < e; ++i) o[i] = f(x[i], y);
    });
    return;
  }
  if (scalar_a && scalar_b) {
    alloc_scalar_like(out);
    out.data<Out>()[0] = f(pa[0], pb[0]);
    return;
  }

  // Strided and broadcast operands: a row-major output, walked in runs
  // along the collapsed last dimension.
  out.set_data(allocator::allocate(out.nbytes()));
  Out* po = out.data<Out>();
  const Shape& shape = out.shape();
  auto layout =
      collapse<3>(shape, {broadcast_strides(a, shape), broadcast_strides(b, shape), out.strides()});
  parallel_for(out.size(), kGrain, [&](size_t s, size_t e) {
    for_each_run<3>(layout, s, e, [&](const auto& off, int64_t n, const auto& st) {
      const T* x = pa + off[0];
      const T* y = pb + off[1];
      Out* o = po + off[2];
      if (st[0] == 1 && st[1] == 1) {
        for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[i]);
      } else if (st[0] == 0 && st[1] == 1) {
        const T xv = *x;
        for (int64_t i = 0; i < n; ++i) o[i] = f(xv, y[i]);
      } else if (st[0] == 1 && st[1] == 0) {
        const T yv = *y;
        for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], yv);
      } else {
        for (int64_t i = 0; i < n; ++i) o[i] = f(x[i * st[0]], y[i * st[1]]);
      }
    });
  });
}

template <typename Op>
void run(const array& a, const array& b, array& out) {
  dispatch(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    if constexpr (ew::accepts_v<Op::accepts, C>) {
      using R = decltype(Op{}(std::declval<C>(), std::declval<C>()));
      using Out = std::conditional_t<std::is_same_v<R, C>, T, R>;
      if (out.itemsize() != sizeof(Out) || b.dtype() != a.dtype()) {
        throw std::logic_error(std::string("[") + Op::name +
                               "] Input or output dtypes do not match the kernel.");
      }
      using S = storage_t<T>;
      using SO = storage_t<Out>;
      binary_loop<S, SO>(a, b, out, [](S x, S y) {
        return static_cast<SO>(store<Out>(Op{}(load_storage<T>(x), load_storage<T>(y))));
      });
    } else {
      throw std::invalid_argument(std::string("[") + Op::name + "] Not supported for " +
                                  dtype_name(a.dtype()) + ".");
    }
  });
}

} // namespace

void binary(BinaryOp op, const array& a, const array& b, array& out) {
  ew::visit(op, [&]<typename Op>() { run<Op>(a, b, out); });
}

} // namespace loom::cpu

namespace loom {

void Binary::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  cpu::binary(op_, inputs[0], inputs[1], outputs[0]);
}

} // namespace loom
