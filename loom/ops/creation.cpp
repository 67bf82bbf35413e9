#include "loom/ops/creation.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "loom/ops/elementwise.h"
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

// --- composites ---

Dtype arange_dtype(bool any_float, bool needs_int64) {
  if (any_float) return float32;
  return needs_int64 ? int64 : int32;
}

array arange(int64_t start, int64_t stop, int64_t step, StreamOrDevice s) {
  auto wide = [](int64_t v) {
    return v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max();
  };
  Dtype d = arange_dtype(false, wide(start) || wide(stop) || wide(step));
  return arange(static_cast<double>(start), static_cast<double>(stop), static_cast<double>(step), d,
                s);
}

array linspace(double start, double stop, int num, bool endpoint, Dtype dtype, StreamOrDevice s) {
  if (!endpoint && num > 0) stop = start + (stop - start) * (num - 1) / num;
  return linspace(start, stop, num, dtype, s);
}

array tri(int n, int m, int k, Dtype dtype, StreamOrDevice s) {
  // Negative sizes give an empty matrix, as in MLX (tri(-2, 3) is (0, 3)).
  n = std::max(n, 0);
  m = std::max(m, 0);
  array rows = reshape(arange(0.0, n, 1.0, int32, s), {n, 1}, s);
  array cols = reshape(arange(0.0, m, 1.0, int32, s), {1, m}, s);
  return astype(less_equal(cols, add(rows, array(k), s), s), dtype, s);
}

array contiguous(const array& a, bool allow_col_major, StreamOrDevice s) {
  // Layout flags are known only once the array is evaluated.
  if (a.is_available() && !a.has_node() &&
      (a.flags().row_contiguous || (allow_col_major && a.flags().col_contiguous))) {
    return a;
  }
  return copy(a, s);
}

namespace {

// Generalised cosine windows: sum_k (-1)^k c_k cos(2 pi k i / (m - 1)); the
// Bartlett window is the triangle 1 - |2 i / (m - 1) - 1|.
array window(int m, const std::vector<double>& coeffs, bool bartlett) {
  int len = std::max(m, 0);
  std::vector<float> values(len);
  for (int i = 0; i < len; ++i) {
    double v = 1.0;
    if (m > 1 && bartlett) {
      v = 1.0 - std::abs(2.0 * i / (m - 1) - 1.0);
    } else if (m > 1) {
      v = 0;
      for (size_t k = 0; k < coeffs.size(); ++k) {
        double term = coeffs[k] * std::cos(2.0 * M_PI * k * i / (m - 1));
        v += k % 2 == 1 ? -term : term;
      }
    }
    values[i] = static_cast<float>(std::max(v, 0.0)); // rounding can dip below 0
  }
  return array(values, {len}, float32);
}

} // namespace

array hanning(int m, StreamOrDevice) { return window(m, {0.5, 0.5}, false); }
array hamming(int m, StreamOrDevice) { return window(m, {0.54, 0.46}, false); }
array blackman(int m, StreamOrDevice) { return window(m, {0.42, 0.5, 0.08}, false); }
array bartlett(int m, StreamOrDevice) { return window(m, {}, true); }

} // namespace loom
