// Indexing with arrays: gather/scatter and the ops built on them (take,
// take_along_axis, put_along_axis, slices with array start indices).
// Negative indices count from the end; indices outside the axis raise at
// evaluation (see primitives/gather.h).
#pragma once

#include <optional>
#include <vector>

#include "loom/array.h"

namespace loom {

// indices[j] (integer arrays, broadcast together to shape I) index axis
// axes[j] of a; the result has shape I + (the other axes of a, in order).
array gather(const array& a, const std::vector<array>& indices, const std::vector<int>& axes,
             StreamOrDevice s = {});

// a with the blocks addressed as in gather replaced by (scatter) or combined
// with (scatter_add, ...) `updates`, broadcast to I + (the other axes of a).
// Repeated indices accumulate in the combining forms; in scatter the last
// write wins.
array scatter(const array& a, const std::vector<array>& indices, const array& updates,
              const std::vector<int>& axes, StreamOrDevice s = {});
array scatter_add(const array& a, const std::vector<array>& indices, const array& updates,
                  const std::vector<int>& axes, StreamOrDevice s = {});
array scatter_prod(const array& a, const std::vector<array>& indices, const array& updates,
                   const std::vector<int>& axes, StreamOrDevice s = {});
array scatter_max(const array& a, const std::vector<array>& indices, const array& updates,
                  const std::vector<int>& axes, StreamOrDevice s = {});
array scatter_min(const array& a, const std::vector<array>& indices, const array& updates,
                  const std::vector<int>& axes, StreamOrDevice s = {});

// MLX's take: the elements at `indices` along `axis` (shape a.shape[:axis] +
// indices.shape + a.shape[axis+1:]), or of the flattened array.
array take(const array& a, const array& indices, int axis, StreamOrDevice s = {});
array take(const array& a, const array& indices, StreamOrDevice s = {});
// indices has a's rank and broadcasts with it on every axis but `axis`.
array take_along_axis(const array& a, const array& indices, int axis, StreamOrDevice s = {});
array take_along_axis(const array& a, const array& indices, StreamOrDevice s = {}); // flattened
array put_along_axis(const array& a, const array& indices, const array& values, int axis,
                     StreamOrDevice s = {});
array put_along_axis(const array& a, const array& indices, const array& values,
                     StreamOrDevice s = {}); // flattened

// a with `values` added at `indices` along `axis` (as put_along_axis, but
// repeated indices accumulate).
array scatter_add_axis(const array& a, const array& indices, const array& values, int axis,
                       StreamOrDevice s = {});

// Slices whose start is an array (read at evaluation, never when the graph is
// built, so they work under vmap and compile). slice: axes[i] starts at
// start_indices[i]; slice_size is the full output shape (one entry per axis
// of a), as in MLX; axes not listed start at 0. Starts are clamped so the
// slice lies inside the array.
array slice(const array& a, const array& start_indices, std::vector<int> axes,
            const Shape& slice_size, StreamOrDevice s = {});
array slice_update(const array& a, const array& update, const array& start_indices,
                   std::vector<int> axes, StreamOrDevice s = {});

} // namespace loom

namespace loom {

// The diagonal at `offset` of the plane (axis1, axis2), moved to the last
// axis (NumPy's and MLX's layout); a gather, so it differentiates by scatter.
array diagonal(const array& a, int offset = 0, int axis1 = 0, int axis2 = 1, StreamOrDevice s = {});
// 1-D input: the square matrix with `a` on its k-th diagonal; 2-D: its k-th diagonal.
array diag(const array& a, int k = 0, StreamOrDevice s = {});
// The sum of the diagonal (in `dtype` when given, else the sum's dtype).
array trace(const array& a, int offset = 0, int axis1 = 0, int axis2 = 1,
            std::optional<Dtype> dtype = std::nullopt, StreamOrDevice s = {});

} // namespace loom
