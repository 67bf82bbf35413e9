// matmul: NumPy shape rules and MLX's dtype rules (inexact types only).
#include "loom/ops/linalg.h"

#include <stdexcept>

#include "loom/ops/creation.h"
#include "loom/ops/utils.h"
#include "loom/primitives/linalg.h"

namespace loom {

array matmul(const array& a_in, const array& b_in, StreamOrDevice s) {
  if (a_in.ndim() == 0 || b_in.ndim() == 0) {
    throw std::invalid_argument(
        "[matmul] Got 0 dimension input. Inputs must have at least one dimension.");
  }
  // The error names the shapes after 1-D promotion, as MLX does.
  Shape a2 = a_in.ndim() == 1 ? Shape{1, a_in.shape(0)} : a_in.shape();
  Shape b2 = b_in.ndim() == 1 ? Shape{b_in.shape(0), 1} : b_in.shape();
  if (a2.back() != b2[b2.size() - 2]) {
    throw std::invalid_argument("[matmul] Last dimension of first input with shape " +
                                shape_to_string(a2) +
                                " must match second to last dimension of second input with shape " +
                                shape_to_string(b2) + ".");
  }
  const Dtype dtype = promote_types(a_in.dtype(), b_in.dtype());
  if (!is_inexact(dtype)) {
    throw std::invalid_argument("[matmul] Only inexact types are supported but " +
                                dtype_name(a_in.dtype()) + " and " + dtype_name(b_in.dtype()) +
                                " were provided which results in " + dtype_name(dtype) +
                                ", which is not a floating point type.");
  }
  Shape out_shape = matmul_shape(a_in.shape(), b_in.shape()); // checks the batch broadcast
  array a = a_in.dtype() == dtype ? a_in : astype(a_in, dtype, s);
  array b = b_in.dtype() == dtype ? b_in : astype(b_in, dtype, s);
  return array(std::move(out_shape), dtype, std::make_shared<Matmul>(to_stream(s)), {a, b});
}

} // namespace loom
