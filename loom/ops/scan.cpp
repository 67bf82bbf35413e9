// Cumulative reductions: axis handling, MLX's result dtypes.
#include "loom/ops/scan.h"

#include <sstream>
#include <stdexcept>

#include "loom/ops/creation.h"
#include "loom/ops/shape.h"
#include "loom/primitives/scan.h"

namespace loom {

namespace {

array make_scan(const array& a, Scan::ReduceType type, std::optional<int> axis, bool reverse,
                bool inclusive, const char* op, StreamOrDevice s) {
  array x = a;
  int ax = 0;
  if (!axis) {
    x = reshape(a, {-1}, s);
  } else {
    ax = *axis;
    if (ax < -a.ndim() || ax >= a.ndim()) {
      std::ostringstream msg;
      msg << "[" << op << "] Axis " << ax << " is out of bounds for array with " << a.ndim()
          << " dimensions.";
      throw std::out_of_range(msg.str());
    }
    if (ax < 0) ax += a.ndim();
  }
  Dtype dtype = x.dtype();
  if (type == Scan::ReduceType::sum || type == Scan::ReduceType::prod) {
    // MLX: a sum of booleans counts (int32); a product of booleans is `and`.
    if (dtype == bool_ && type == Scan::ReduceType::sum) dtype = int32;
  } else if (type == Scan::ReduceType::logaddexp) {
    if (!is_inexact(dtype)) dtype = float32;
    if (is_complex(dtype)) {
      throw std::invalid_argument("[logcumsumexp] Not supported for complex64 input.");
    }
  } else if (is_complex(dtype)) {
    throw std::invalid_argument(std::string("[") + op + "] complex64 arrays have no order.");
  }
  if (dtype != x.dtype()) x = astype(x, dtype, s);
  Shape shape = x.shape();
  return array(std::move(shape), dtype,
               std::make_shared<Scan>(to_stream(s), type, ax, reverse, inclusive), {x});
}

} // namespace

array cumsum(const array& a, std::optional<int> axis, bool reverse, bool inclusive,
             StreamOrDevice s) {
  return make_scan(a, Scan::ReduceType::sum, axis, reverse, inclusive, "cumsum", s);
}
array cumprod(const array& a, std::optional<int> axis, bool reverse, bool inclusive,
              StreamOrDevice s) {
  return make_scan(a, Scan::ReduceType::prod, axis, reverse, inclusive, "cumprod", s);
}
array cummax(const array& a, std::optional<int> axis, bool reverse, bool inclusive,
             StreamOrDevice s) {
  return make_scan(a, Scan::ReduceType::max, axis, reverse, inclusive, "cummax", s);
}
array cummin(const array& a, std::optional<int> axis, bool reverse, bool inclusive,
             StreamOrDevice s) {
  return make_scan(a, Scan::ReduceType::min, axis, reverse, inclusive, "cummin", s);
}
array logcumsumexp(const array& a, std::optional<int> axis, bool reverse, bool inclusive,
                   StreamOrDevice s) {
  return make_scan(a, Scan::ReduceType::logaddexp, axis, reverse, inclusive, "logcumsumexp", s);
}

} // namespace loom
