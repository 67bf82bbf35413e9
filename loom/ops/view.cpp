#include "loom/ops/view.h"

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>

#include "loom/ops/shape.h"
#include "loom/primitives/view.h"

namespace loom {

array view(const array& a, Dtype dtype, StreamOrDevice s) {
  if (a.dtype() == dtype) return a;
  const int in_size = a.dtype().size;
  const int out_size = dtype.size;
  Shape shape = a.shape();
  if (in_size != out_size) {
    if (a.ndim() == 0) {
      throw std::invalid_argument(
          "[view] Changing the type of a scalar is only allowed for types with the same size.");
    }
    const int64_t bytes = static_cast<int64_t>(shape.back()) * in_size;
    if (in_size < out_size && bytes % out_size != 0) {
      throw std::invalid_argument(
          "[view] When viewing as a larger dtype, the size in bytes of the last axis must be a "
          "multiple of the requested type size.");
    }
    shape.back() = static_cast<int32_t>(bytes / out_size);
  }
  return array(std::move(shape), dtype, std::make_shared<View>(to_stream(s), dtype), {a});
}

array as_strided(const array& a, std::optional<Shape> shape, std::optional<Strides> strides,
                 int64_t offset, StreamOrDevice s) {
  Shape sh = shape ? *shape : a.shape();
  Strides st;
  if (strides) {
    st = *strides;
  } else {
    st.assign(sh.size(), 1);
    for (int d = static_cast<int>(sh.size()) - 2; d >= 0; --d) {
      st[d] = st[d + 1] * std::max<int64_t>(sh[d + 1], 1);
    }
  }
  if (st.size() != sh.size()) {
    throw std::invalid_argument("[as_strided] Got " + std::to_string(st.size()) +
                                " strides for shape " + shape_to_string(sh) + ".");
  }
  // The window must stay inside the array (MLX reads past it silently).
  int64_t lo = offset, hi = offset, count = 1;
  for (size_t d = 0; d < sh.size(); ++d) {
    if (sh[d] < 0) {
      throw std::invalid_argument("[as_strided] Negative dimension in shape " +
                                  shape_to_string(sh) + ".");
    }
    count *= sh[d];
    const int64_t reach = (static_cast<int64_t>(sh[d]) - 1) * st[d];
    (reach < 0 ? lo : hi) += reach;
  }
  if (count > 0 && (lo < 0 || hi >= static_cast<int64_t>(a.size()))) {
    throw std::invalid_argument("[as_strided] A window of shape " + shape_to_string(sh) +
                                " with the given strides and offset " + std::to_string(offset) +
                                " reaches elements [" + std::to_string(lo) + ", " +
                                std::to_string(hi) + "] outside an array of " +
                                std::to_string(a.size()) + " elements.");
  }
  Stream stream = to_stream(s);
  array flat = reshape(a, {-1}, stream);
  return array(sh, a.dtype(), std::make_shared<AsStrided>(stream, sh, st, offset), {flat});
}

std::vector<array> depends(const std::vector<array>& inputs,
                           const std::vector<array>& dependencies) {
  if (inputs.empty()) return {};
  std::vector<Shape> shapes;
  std::vector<Dtype> dtypes;
  for (auto& x : inputs) {
    shapes.push_back(x.shape());
    dtypes.push_back(x.dtype());
  }
  std::vector<array> all = inputs;
  all.insert(all.end(), dependencies.begin(), dependencies.end());
  auto prim = std::make_shared<Depends>(to_stream({}), static_cast<int>(inputs.size()));
  return array::make_arrays(std::move(shapes), dtypes, prim, std::move(all));
}


} // namespace loom
