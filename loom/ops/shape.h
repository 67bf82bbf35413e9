// Shape manipulation and indexing. Views (reshape of contiguous data,
// transpose, broadcast, slices) share their input's buffer.
#pragma once

#include <vector>

#include "loom/array.h"

namespace loom {

array reshape(const array& a, Shape shape, StreamOrDevice s = {}); // one -1 allowed
array flatten(const array& a, int start_axis = 0, int end_axis = -1, StreamOrDevice s = {});
array transpose(const array& a, std::vector<int> axes, StreamOrDevice s = {});
array transpose(const array& a, StreamOrDevice s = {}); // reverses the axes
array swapaxes(const array& a, int axis1, int axis2, StreamOrDevice s = {});
array moveaxis(const array& a, int source, int destination, StreamOrDevice s = {});
array broadcast_to(const array& a, const Shape& shape, StreamOrDevice s = {});
std::vector<array> broadcast_arrays(const std::vector<array>& inputs, StreamOrDevice s = {});
array expand_dims(const array& a, const std::vector<int>& axes, StreamOrDevice s = {});
array expand_dims(const array& a, int axis, StreamOrDevice s = {});
array squeeze(const array& a, const std::vector<int>& axes, StreamOrDevice s = {});
array squeeze(const array& a, StreamOrDevice s = {}); // all size-1 axes

// Basic slicing: start/stop/step per axis (already normalised by the caller:
// 0 <= start, stop within [-1, dim], step != 0), a view when possible.
array slice(const array& a, Shape start, Shape stop, Shape strides, StreamOrDevice s = {});
// Writes `update` into the region of `a` selected by a slice; returns a new array.
array slice_update(const array& a, const array& update, Shape start, Shape stop, Shape strides,
                   StreamOrDevice s = {});

array concatenate(const std::vector<array>& arrays, int axis = 0, StreamOrDevice s = {});
array concatenate(const std::vector<array>& arrays, StreamOrDevice s); // flattened
array stack(const std::vector<array>& arrays, int axis = 0, StreamOrDevice s = {});
// ONE multi-output node: equal sections, or split at the given indices.
std::vector<array> split(const array& a, int num_splits, int axis = 0, StreamOrDevice s = {});
std::vector<array> split(const array& a, const Shape& indices, int axis = 0,
                         StreamOrDevice s = {});

} // namespace loom
