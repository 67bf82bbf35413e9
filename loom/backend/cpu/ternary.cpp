// where(condition, x, y): a bool condition and x, y of one dtype, all of the
// output's shape (possibly strided or broadcast views).
#include "loom/primitives/ternary.h"

#include <stdexcept>

#include "loom/backend/cpu/elementwise.h"
#include "loom/backend/cpu/strided.h"
#include "loom/backend/cpu/thread_pool.h"
#include "loom/primitives/elementwise_table.h"
#include "loom/types/dispatch.h"

namespace loom::cpu {

namespace {

using namespace elementwise;

template <typename T>
void select_loop(const array& condition, const array& x, const array& y, array& out) {
  if (out.size() == 0) {
    out.set_data(allocator::allocate(0));
    return;
  }
  const uint8_t* pc = condition.data<uint8_t>(); // bool read as bytes
  const T* px = x.data<T>();
  const T* py = y.data<T>();

  if (is_dense(condition) && is_dense(x) && is_dense(y) && same_dense_layout(condition, x) &&
      same_dense_layout(condition, y)) {
    alloc_like(out, x, {&x, &y, &condition});
    T* po = out.data<T>();
    parallel_for(x.data_size(), kGrain, [&](size_t s, size_t e) {
      // Local copies: a byte-sized output could otherwise alias the
      // captured pointers, and the loop would not vectorise.
      const uint8_t* c = pc;
      const T* xs = px;
      const T* ys = py;
      T* o = po;
      for (size_t i = s; i < e; ++i) {
        // Both loads happen, so the select vectorises as a blend.
        T xv = xs[i], yv = ys[i];
        o[i] = ew::Select{}(c[i] != 0, xv, yv);
      }
    });
    return;
  }

  out.set_data(allocator::allocate(out.nbytes()));
  T* po = out.data<T>();
  const Shape& shape = out.shape();
  auto layout =
      collapse<4>(shape, {broadcast_strides(condition, shape), broadcast_strides(x, shape),
                          broadcast_strides(y, shape), out.strides()});
  parallel_for(out.size(), kGrain, [&](size_t s, size_t e) {
    for_each_run<4>(layout, s, e, [&](const auto& off, int64_t n, const auto& st) {
      const uint8_t* c = pc + off[0];
      const T* xs = px + off[1];
      const T* ys = py + off[2];
      T* o = po + off[3];
      if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
        for (int64_t i = 0; i < n; ++i) {
          T xv = xs[i], yv = ys[i];
          o[i] = ew::Select{}(c[i] != 0, xv, yv);
        }
      } else if (st[0] == 1 && st[1] == 1 && st[2] == 0) {
        const T yv = *ys; // where(mask, x, constant)
        for (int64_t i = 0; i < n; ++i) {
          T xv = xs[i];
          o[i] = ew::Select{}(c[i] != 0, xv, yv);
        }
      } else if (st[0] == 1 && st[1] == 0 && st[2] == 1) {
        const T xv = *xs; // where(mask, constant, y)
        for (int64_t i = 0; i < n; ++i) {
          T yv = ys[i];
          o[i] = ew::Select{}(c[i] != 0, xv, yv);
        }
      } else {
        for (int64_t i = 0; i < n; ++i) {
          o[i] = ew::Select{}(c[i * st[0]] != 0, xs[i * st[1]], ys[i * st[2]]);
        }
      }
    });
  });
}

} // namespace

void select(const array& condition, const array& x, const array& y, array& out) {
  if (condition.dtype() != bool_ || x.dtype() != y.dtype() || out.dtype() != x.dtype()) {
    throw std::logic_error("[Select] Input or output dtypes do not match the kernel.");
  }
  dispatch(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    select_loop<storage_t<T>>(condition, x, y, out);
  });
}

} // namespace loom::cpu

namespace loom {

void Select::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  cpu::select(inputs[0], inputs[1], inputs[2], outputs[0]);
}

} // namespace loom
