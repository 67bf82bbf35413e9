// Reading the elements of an evaluated array in logical (row-major) order,
// whatever its strides: printing, tolist and exports all go through here.
#pragma once

#include <cstdint>
#include <vector>

#include "loom/array.h"

namespace loom::bindings {

// Calls f(const T&) for every element of `a` (already evaluated) in row-major
// order. Strides are in elements and may be zero (broadcast) or negative.
template <typename T, typename F>
void for_each_element(const array& a, F&& f) {
  size_t n = a.size();
  if (n == 0) return;
  const T* base = a.data<T>();
  if (a.flags().row_contiguous) {
    for (size_t i = 0; i < n; ++i) f(base[i]);
    return;
  }
  int nd = a.ndim();
  const auto& shape = a.shape();
  const auto& strides = a.strides();
  int64_t inner = shape[nd - 1];
  int64_t inner_stride = strides[nd - 1];
  std::vector<int32_t> idx(nd, 0);
  int64_t offset = 0;
  for (size_t done = 0; done < n; done += inner) {
    const T* p = base + offset;
    for (int64_t i = 0; i < inner; ++i) f(p[i * inner_stride]);
    // Advance the odometer over the outer dimensions.
    for (int d = nd - 2; d >= 0; --d) {
      if (++idx[d] < shape[d]) {
        offset += strides[d];
        break;
      }
      offset -= static_cast<int64_t>(idx[d] - 1) * strides[d];
      idx[d] = 0;
    }
  }
}

} // namespace loom::bindings
