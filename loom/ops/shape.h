// Shape manipulation and indexing. Views (reshape of contiguous data,
// transpose, broadcast, slices) share their input's buffer.
#pragma once

#include <string>
#include <utility>
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

array concatenate(const std::vector<array>& arrays, int axis = 0, StreamOrDevice s = {});
array concatenate(const std::vector<array>& arrays, StreamOrDevice s); // flattened
array stack(const std::vector<array>& arrays, int axis = 0, StreamOrDevice s = {});
// ONE multi-output node: equal sections, or split at the given indices.
std::vector<array> split(const array& a, int num_splits, int axis = 0, StreamOrDevice s = {});
std::vector<array> split(const array& a, const Shape& indices, int axis = 0, StreamOrDevice s = {});

// --- Composites: built from the ops above ---

// Reverses the given axes.
array flip(const array& a, const std::vector<int>& axes, StreamOrDevice s = {});
array flip(const array& a, StreamOrDevice s = {}); // every axis
// Shifts elements along axes, wrapping around; one shift for all axes or one each.
array roll(const array& a, const std::vector<int>& shifts, const std::vector<int>& axes,
           StreamOrDevice s = {});
array roll(const array& a, int shift, StreamOrDevice s = {}); // of the flattened array
// Pads each axis by (before, after): mode "constant" (with `value`), "edge",
// "reflect" (mirror without the edge) or "symmetric" (mirror with it).
array pad(const array& a, const std::vector<std::pair<int, int>>& widths,
          const array& value = array(0), const std::string& mode = "constant",
          StreamOrDevice s = {});
array tile(const array& a, std::vector<int> reps, StreamOrDevice s = {});
// Each element `repeats` times along `axis` (of the flattened array without one).
array repeat(const array& a, int repeats, int axis, StreamOrDevice s = {});
array repeat(const array& a, int repeats, StreamOrDevice s = {});
// Zeros above (tril) or below (triu) the k-th diagonal of the last two axes.
array tril(const array& a, int k = 0, StreamOrDevice s = {});
array triu(const array& a, int k = 0, StreamOrDevice s = {});
array atleast_1d(const array& a, StreamOrDevice s = {});
array atleast_2d(const array& a, StreamOrDevice s = {});
array atleast_3d(const array& a, StreamOrDevice s = {});
// The slices along an axis, without it (none for a zero-length axis).
std::vector<array> unstack(const array& a, int axis = 0, StreamOrDevice s = {});
// Splits one axis into `shape` (one entry may be -1).
array unflatten(const array& a, int axis, const Shape& shape, StreamOrDevice s = {});
// The n-th discrete difference along an axis.
array diff(const array& a, int n = 1, int axis = -1, StreamOrDevice s = {});
// Coordinate arrays; indexing "xy" (Cartesian) or "ij" (matrix).
std::vector<array> meshgrid(const std::vector<array>& arrays, bool sparse = false,
                            const std::string& indexing = "xy", StreamOrDevice s = {});
// Swaps the last two axes (at least 2-D).
array matrix_transpose(const array& a, StreamOrDevice s = {});

} // namespace loom
