// Sorting and selection along an axis (MLX's names and rules): ascending,
// NaN last, argsort stable, indices as uint32. partition/argpartition/topk
// leave the order within each side of the kth element unspecified.
#pragma once

#include <optional>
#include <vector>

#include "loom/array.h"

namespace loom {

array sort(const array& a, int axis, StreamOrDevice s = {});
array sort(const array& a, StreamOrDevice s = {}); // flattened
array argsort(const array& a, int axis, StreamOrDevice s = {});
array argsort(const array& a, StreamOrDevice s = {}); // flattened
array partition(const array& a, int kth, int axis, StreamOrDevice s = {});
array partition(const array& a, int kth, StreamOrDevice s = {}); // flattened
array argpartition(const array& a, int kth, int axis, StreamOrDevice s = {});
array argpartition(const array& a, int kth, StreamOrDevice s = {}); // flattened
// The k largest elements along the axis (in no particular order).
array topk(const array& a, int k, int axis, StreamOrDevice s = {});
array topk(const array& a, int k, StreamOrDevice s = {}); // flattened

// Insertion points of `values` into the 1-D ascending `sorted` (uint32, shape
// of values): the count of elements < value (left) or <= value (right).
array searchsorted(const array& sorted, const array& values, bool right = false,
                   StreamOrDevice s = {});

// MLX's unique: the `size` smallest distinct elements of the flattened array
// (each NaN distinct), padded with `fill_value` (default: the smallest
// element), and on request the index of each one's first occurrence
// (uint32), the inverse (uint32, a's shape, clamped to size - 1 when
// truncated) and the counts (int32, 0 for padding). Built from argsort and
// gather/scatter: the output shape never depends on the values, so nothing is
// evaluated. Returns values first, then the requested arrays in that order.
std::vector<array> unique(const array& a, int size, bool return_index = false,
                          bool return_inverse = false, bool return_counts = false,
                          std::optional<array> fill_value = std::nullopt, StreamOrDevice s = {});

// The median over `axes` (all when empty): the middle of the sorted values,
// the mean of the two middle ones for an even count; NaN if any is NaN.
// Floating inputs keep their dtype, others give float32 (as MLX).
array median(const array& a, std::vector<int> axes, bool keepdims = false, StreamOrDevice s = {});
array median(const array& a, bool keepdims = false, StreamOrDevice s = {});

// (min, max) over `axes` (all when empty), as MLX's minmax.
std::pair<array, array> minmax(const array& a, std::vector<int> axes, bool keepdims = false,
                               StreamOrDevice s = {});

} // namespace loom
