// Iteration over N arrays that share a shape but not a layout. Dimensions
// that are contiguous in every operand are merged, so the common cases run
// as one flat loop.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "loom/array.h"

namespace loom::cpu {

template <size_t N>
struct StridedLayout {
  Shape shape;                   // collapsed shape (at least one dimension)
  std::array<Strides, N> strides; // in elements
};

// Merges adjacent dimensions i, i+1 when every operand has
// stride[i] == stride[i+1] * shape[i+1]; drops size-1 dimensions.
template <size_t N>
StridedLayout<N> collapse(const Shape& shape, const std::array<Strides, N>& strides) {
  StridedLayout<N> out;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = !out.shape.empty();
    if (merge) {
      for (size_t k = 0; k < N; ++k) {
        if (out.strides[k].back() != strides[k][d] * shape[d]) {
          merge = false;
          break;
        }
      }
    }
    if (merge) {
      out.shape.back() *= shape[d];
      for (size_t k = 0; k < N; ++k) out.strides[k].back() = strides[k][d];
    } else {
      out.shape.push_back(shape[d]);
      for (size_t k = 0; k < N; ++k) out.strides[k].push_back(strides[k][d]);
    }
  }
  if (out.shape.empty()) {
    out.shape.push_back(1);
    for (size_t k = 0; k < N; ++k) out.strides[k].push_back(0);
  }
  return out;
}

// Visits the flat index range [begin, end) of `layout` as runs along the last
// dimension: f(offsets, count, inner_strides), offsets in elements.
template <size_t N, typename F>
void for_each_run(const StridedLayout<N>& layout, size_t begin, size_t end, F&& f) {
  const int nd = static_cast<int>(layout.shape.size());
  const int64_t inner = layout.shape[nd - 1];
  std::array<int64_t, N> inner_strides;
  for (size_t k = 0; k < N; ++k) inner_strides[k] = layout.strides[k][nd - 1];

  // Multi-index of `begin` and the offsets it maps to.
  std::vector<int64_t> idx(nd, 0);
  std::array<int64_t, N> off{};
  size_t rem = begin;
  for (int d = nd - 1; d >= 0; --d) {
    idx[d] = static_cast<int64_t>(rem % layout.shape[d]);
    rem /= layout.shape[d];
    for (size_t k = 0; k < N; ++k) off[k] += idx[d] * layout.strides[k][d];
  }
  size_t pos = begin;
  while (pos < end) {
    int64_t count = std::min<int64_t>(inner - idx[nd - 1], static_cast<int64_t>(end - pos));
    f(off, count, inner_strides);
    pos += count;
    // Advance to the next run.
    for (size_t k = 0; k < N; ++k) off[k] += count * inner_strides[k];
    idx[nd - 1] += count;
    for (int d = nd - 1; d > 0 && idx[d] == layout.shape[d]; --d) {
      for (size_t k = 0; k < N; ++k) off[k] -= idx[d] * layout.strides[k][d];
      idx[d] = 0;
      idx[d - 1] += 1;
      for (size_t k = 0; k < N; ++k) off[k] += layout.strides[k][d - 1];
    }
  }
}

// Strides of `a` broadcast to `shape` (size-1 or missing dimensions get 0).
Strides broadcast_strides(const array& a, const Shape& shape);

} // namespace loom::cpu
