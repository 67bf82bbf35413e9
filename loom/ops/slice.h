// Basic slicing (the Slice and SliceUpdate primitives). Slices with array
// start indices are in ops/gather.h: they lower to gather and scatter.
#pragma once

#include "loom/array.h"

namespace loom {

// Basic slicing: start/stop/step per axis (already normalised by the caller:
// 0 <= start, stop within [-1, dim], step != 0), a view when possible.
array slice(const array& a, Shape start, Shape stop, Shape strides, StreamOrDevice s = {});
// Writes `update` into the region of `a` selected by a slice; returns a new array.
array slice_update(const array& a, const array& update, Shape start, Shape stop, Shape strides,
                   StreamOrDevice s = {});

} // namespace loom
