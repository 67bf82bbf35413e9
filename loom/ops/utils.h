// Shared argument handling for ops: broadcasting, axes, dtype checks.
#pragma once

#include <string>
#include <vector>

#include "loom/array.h"

namespace loom {

// NumPy broadcasting of two shapes; raises ValueError-style errors naming both.
Shape broadcast_shapes(const Shape& a, const Shape& b);
Shape broadcast_shapes(const std::vector<Shape>& shapes);

// Maps a possibly negative axis into [0, ndim); raises IndexError-style
// errors naming the op: "[sum] Invalid axis 3 for array with 2 dimensions."
int normalize_axis(int axis, int ndim, const char* op);
std::vector<int> normalize_axes(const std::vector<int>& axes, int ndim, const char* op);

// The axes of a reduction, normalised and sorted; repeats raise
// "[op] Duplicate axes detected in reduction." (MLX's words).
std::vector<int> reduction_axes(const array& a, const std::vector<int>& axes, const char* op);
// 0, 1, ..., ndim - 1.
std::vector<int> all_axes(int ndim);

// `a` itself when floating or complex, else `a` cast to float32: integer and
// bool inputs of var/softmax/logsumexp compute in float32 (as unsigned values
// they would wrap in a - max(a)).
array to_inexact(const array& a, StreamOrDevice s);

} // namespace loom
