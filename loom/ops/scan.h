// Cumulative reductions along an axis, as MLX: `axis` absent means the
// flattened array; `reverse` scans from the end; `inclusive=false` shifts by
// one (the first output is the identity). Result dtypes: cumsum of bool is
// int32, otherwise cumsum/cumprod/cummax/cummin keep the input's dtype; logcumsumexp is
// floating (integers give float32).
#pragma once

#include <optional>

#include "loom/array.h"

namespace loom {

array cumsum(const array& a, std::optional<int> axis = std::nullopt, bool reverse = false,
             bool inclusive = true, StreamOrDevice s = {});
array cumprod(const array& a, std::optional<int> axis = std::nullopt, bool reverse = false,
              bool inclusive = true, StreamOrDevice s = {});
array cummax(const array& a, std::optional<int> axis = std::nullopt, bool reverse = false,
             bool inclusive = true, StreamOrDevice s = {});
array cummin(const array& a, std::optional<int> axis = std::nullopt, bool reverse = false,
             bool inclusive = true, StreamOrDevice s = {});
array logcumsumexp(const array& a, std::optional<int> axis = std::nullopt, bool reverse = false,
                   bool inclusive = true, StreamOrDevice s = {});

} // namespace loom
