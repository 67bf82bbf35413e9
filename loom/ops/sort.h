// Sorting and selection along an axis (MLX's names and rules): ascending,
// NaN last, argsort stable, indices as uint32. partition/argpartition/topk
// leave the order within each side of the kth element unspecified.
#pragma once

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

} // namespace loom
