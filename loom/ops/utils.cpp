#include "loom/ops/utils.h"

#include <algorithm>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include "loom/ops/creation.h"

namespace loom {

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1) {
      throw std::invalid_argument("[broadcast_shapes] Shapes " + shape_to_string(a) + " and " +
                                  shape_to_string(b) + " cannot be broadcast.");
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Shape broadcast_shapes(const std::vector<Shape>& shapes) {
  if (shapes.empty()) return {};
  Shape out = shapes[0];
  for (size_t i = 1; i < shapes.size(); ++i) out = broadcast_shapes(out, shapes[i]);
  return out;
}

int normalize_axis(int axis, int ndim, const char* op) {
  int a = axis < 0 ? axis + ndim : axis;
  if (a < 0 || a >= ndim) {
    std::ostringstream msg;
    msg << "[" << op << "] Invalid axis " << axis << " for array with " << ndim << " dimensions.";
    throw std::out_of_range(msg.str());
  }
  return a;
}

std::vector<int> normalize_axes(const std::vector<int>& axes, int ndim, const char* op) {
  std::vector<int> out;
  out.reserve(axes.size());
  for (int ax : axes) out.push_back(normalize_axis(ax, ndim, op));
  std::vector<int> sorted = out;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    throw std::invalid_argument(std::string("[") + op + "] Received duplicate axes.");
  }
  return out;
}

std::vector<int> reduction_axes(const array& a, const std::vector<int>& axes, const char* op) {
  std::vector<int> out;
  out.reserve(axes.size());
  for (int ax : axes) out.push_back(normalize_axis(ax, a.ndim(), op));
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end()) {
    throw std::invalid_argument(std::string("[") + op + "] Duplicate axes detected in reduction.");
  }
  return out;
}

std::vector<int> all_axes(int ndim) {
  std::vector<int> axes(ndim);
  std::iota(axes.begin(), axes.end(), 0);
  return axes;
}

array to_inexact(const array& a, StreamOrDevice s) {
  return is_inexact(a.dtype()) ? a : astype(a, float32, s);
}

} // namespace loom
