// Values of an array's shape computed when the graph runs (primitives/
// shape_info.h): what a shapeless trace must use instead of reading the
// traced shape.
#pragma once

#include <vector>

#include "loom/array.h"

namespace loom {

// The number of elements of `a` over `axes` (or its inverse) as a scalar of
// `dtype`. Outside a shapeless trace it is a constant.
array number_of_elements(const array& a, const std::vector<int>& axes, bool inverted, Dtype dtype,
                         StreamOrDevice s = {});

} // namespace loom
