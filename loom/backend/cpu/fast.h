// Helpers the CPU kernels of mx.fast share (fast.cpp: normalisations, RoPE,
// cross entropy, the delta rule; fast_attention.cpp: attention).
#pragma once

#include <cmath>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "loom/array.h"
#include "loom/backend/cpu/copy.h"
#include "loom/primitives/elementwise_scalar.h"
#include "loom/types/dispatch.h"

namespace loom::cpu::fast_kernels {

template <typename T>
using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename C>
C exp_of(C v) {
  if constexpr (std::is_same_v<C, float>) {
    return scalar::exp_f32(v);
  } else {
    return std::exp(v);
  }
}

inline size_t row_grain(size_t n) {
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

} // namespace loom::cpu::fast_kernels
