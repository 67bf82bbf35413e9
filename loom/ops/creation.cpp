#include "loom/ops/creation.h"

#include <cmath>
#include <limits>
#include <stdexcept>

#include "loom/ops/shape.h"
#include "loom/primitives/creation.h"
#include "loom/primitives/shape.h"

namespace loom {

array full(Shape shape, const array& value, Dtype dtype, StreamOrDevice s) {
  for (auto d : shape) {
    if (d < 0) throw std::invalid_argument("[full] Negative dimensions not allowed.");
  }
  Stream stream = to_stream(s);
  array v = broadcast_to(astype(value, dtype, stream), shape, stream);
  return array(std::move(shape), dtype, std::make_shared<Full>(stream), {v});
}

array full(Shape shape, const array& value, StreamOrDevice s) {
  return full(std::move(shape), value, value.dtype(), s);
}

array zeros(const Shape& shape, Dtype dtype, StreamOrDevice s) {
  return full(shape, array(false, dtype), dtype, s);
}

array ones(const Shape& shape, Dtype dtype, StreamOrDevice s) {
  return full(shape, array(true, dtype), dtype, s);
}

array zeros_like(const array& a, StreamOrDevice s) { return zeros(a.shape(), a.dtype(), s); }

array ones_like(const array& a, StreamOrDevice s) { return ones(a.shape(), a.dtype(), s); }

array full_like(const array& a, const array& value, StreamOrDevice s) {
  return full(a.shape(), value, a.dtype(), s);
}

array arange(double start, double stop, double step, Dtype dtype, StreamOrDevice s) {
  if (dtype == bool_) throw std::invalid_argument("bool not supported for arange.");
  if (std::isnan(start) || std::isnan(stop) || std::isnan(step) || std::isinf(start) ||
      std::isinf(stop)) {
    throw std::invalid_argument("[arange] Cannot compute length.");
  }
  if (step == 0) throw std::invalid_argument("[arange] step must be nonzero.");
  double length;
  if (std::isinf(step)) {
    // One element when the (infinite) step points from start toward stop.
    length = (step > 0 ? stop > start : stop < start) ? 1.0 : 0.0;
  } else {
    length = std::ceil((stop - start) / step);
  }
  if (length > static_cast<double>(std::numeric_limits<int32_t>::max())) {
    throw std::invalid_argument("[arange] Maximum size exceeded.");
  }
  int32_t size = length > 0 ? static_cast<int32_t>(length) : 0;
  return array({size}, dtype,
               std::make_shared<Arange>(to_stream(s), start, stop, step, size, dtype), {});
}

array linspace(double start, double stop, int num, Dtype dtype, StreamOrDevice s) {
  if (num < 0) {
    throw std::invalid_argument("[linspace] number of samples, " + std::to_string(num) +
                                ", must be non-negative.");
  }
  return array({num}, dtype, std::make_shared<Linspace>(to_stream(s), start, stop, num, dtype), {});
}

array eye(int n, int m, int k, Dtype dtype, StreamOrDevice s) {
  if (n < 0 || m < 0) throw std::invalid_argument("[eye] N and M must be positive integers.");
  return array({n, m}, dtype, std::make_shared<Eye>(to_stream(s), n, m, k, dtype), {});
}

array identity(int n, Dtype dtype, StreamOrDevice s) { return eye(n, n, 0, dtype, s); }

array copy(const array& a, StreamOrDevice s) {
  return array(a.shape(), a.dtype(), std::make_shared<Copy>(to_stream(s)), {a});
}

array astype(const array& a, Dtype dtype, StreamOrDevice s) {
  if (a.dtype() == dtype) return a;
  return array(a.shape(), dtype, std::make_shared<AsType>(to_stream(s), dtype), {a});
}

} // namespace loom
