// Markers: identity nodes through which a transform's inputs enter the
// traced graph.
#pragma once

#include "loom/array.h"

namespace loom::transforms {

array make_marker(const array& a);

} // namespace loom::transforms
