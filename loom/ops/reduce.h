// Reductions over axes (all axes when none are given).
#pragma once

#include <vector>

#include "loom/array.h"

namespace loom {

array sum(const array& a, const std::vector<int>& axes, bool keepdims = false,
          StreamOrDevice s = {});
array sum(const array& a, bool keepdims = false, StreamOrDevice s = {});
array sum(const array& a, int axis, bool keepdims = false, StreamOrDevice s = {});
array mean(const array& a, const std::vector<int>& axes, bool keepdims = false,
           StreamOrDevice s = {});
array mean(const array& a, bool keepdims = false, StreamOrDevice s = {});
array mean(const array& a, int axis, bool keepdims = false, StreamOrDevice s = {});
array max(const array& a, const std::vector<int>& axes, bool keepdims = false,
          StreamOrDevice s = {});
array max(const array& a, bool keepdims = false, StreamOrDevice s = {});
array max(const array& a, int axis, bool keepdims = false, StreamOrDevice s = {});
array min(const array& a, const std::vector<int>& axes, bool keepdims = false,
          StreamOrDevice s = {});
array min(const array& a, bool keepdims = false, StreamOrDevice s = {});
array min(const array& a, int axis, bool keepdims = false, StreamOrDevice s = {});
array prod(const array& a, const std::vector<int>& axes, bool keepdims = false,
           StreamOrDevice s = {});
array prod(const array& a, bool keepdims = false, StreamOrDevice s = {});
array prod(const array& a, int axis, bool keepdims = false, StreamOrDevice s = {});
array all(const array& a, const std::vector<int>& axes, bool keepdims = false,
          StreamOrDevice s = {});
array all(const array& a, bool keepdims = false, StreamOrDevice s = {});
array all(const array& a, int axis, bool keepdims = false, StreamOrDevice s = {});
array any(const array& a, const std::vector<int>& axes, bool keepdims = false,
          StreamOrDevice s = {});
array any(const array& a, bool keepdims = false, StreamOrDevice s = {});
array any(const array& a, int axis, bool keepdims = false, StreamOrDevice s = {});
// Index of the extreme along one axis (flattened when axis is absent), uint32.
array argmax(const array& a, int axis, bool keepdims = false, StreamOrDevice s = {});
array argmax(const array& a, bool keepdims = false, StreamOrDevice s = {});
array argmin(const array& a, int axis, bool keepdims = false, StreamOrDevice s = {});
array argmin(const array& a, bool keepdims = false, StreamOrDevice s = {});

// --- Composites: built from the reductions above ---

// Variance with divisor N - ddof; complex inputs give the real variance of |a - mean|.
array var(const array& a, const std::vector<int>& axes, bool keepdims = false, int ddof = 0,
          StreamOrDevice s = {});
array var(const array& a, bool keepdims = false, int ddof = 0, StreamOrDevice s = {});
array std(const array& a, const std::vector<int>& axes, bool keepdims = false, int ddof = 0,
          StreamOrDevice s = {});
array std(const array& a, bool keepdims = false, int ddof = 0, StreamOrDevice s = {});
// The number of non-zero elements (int32, a sum of bools).
array count_nonzero(const array& a, const std::vector<int>& axes, bool keepdims = false,
                    StreamOrDevice s = {});
array count_nonzero(const array& a, bool keepdims = false, StreamOrDevice s = {});

} // namespace loom
