// Ops that reinterpret memory: dtype views, strided windows, dependencies,
// and the float8 (e4m3) conversions.
#pragma once

#include <optional>
#include <vector>

#include "loom/array.h"

namespace loom {

// The bytes of `a` (in C order) as `dtype`; the last axis scales by the
// ratio of item sizes.
array view(const array& a, Dtype dtype, StreamOrDevice s = {});
// A window over the elements of `a` in C order: shape and strides in
// elements (default: a's shape, packed), starting `offset` elements in.
// Unlike MLX, a window reaching outside the array raises.
array as_strided(const array& a, std::optional<Shape> shape = std::nullopt,
                 std::optional<Strides> strides = std::nullopt, int64_t offset = 0,
                 StreamOrDevice s = {});
// `inputs` unchanged, but evaluated only after `dependencies`.
std::vector<array> depends(const std::vector<array>& inputs,
                           const std::vector<array>& dependencies);

} // namespace loom
