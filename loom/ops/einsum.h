// einsum: Einstein summation lowered to diagonals, sums, transposes,
// reshapes and batched matrix products, in the contraction order of a
// greedy path (NumPy's and MLX's greedy rule).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "loom/array.h"

namespace loom {

array einsum(const std::string& subscripts, const std::vector<array>& operands,
             StreamOrDevice s = {});

// The contraction order (pairs of positions in the shrinking operand list,
// the result appended last) and MLX's report of it.
std::pair<std::vector<std::vector<int>>, std::string> einsum_path(
    const std::string& subscripts, const std::vector<array>& operands);

} // namespace loom
