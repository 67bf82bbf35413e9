// Basic slicing: the Slice and SliceUpdate primitives (primitives/slice.h).
// Slices with array start indices lower to gather/scatter (ops/gather.cpp).
#include "loom/ops/slice.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "loom/ops/creation.h"
#include "loom/ops/shape.h"
#include "loom/primitives/slice.h"

namespace loom {

namespace {

int32_t slice_length(int32_t start, int32_t stop, int32_t step) {
  if (step > 0) return stop > start ? (stop - start + step - 1) / step : 0;
  return start > stop ? (start - stop - step - 1) / (-step) : 0;
}

// Validates a slice specification and returns the selected region's shape.
Shape slice_shape(const char* op, const array& a, Shape& start, Shape& stop, const Shape& strides) {
  const size_t nd = a.ndim();
  if (start.size() != nd || stop.size() != nd || strides.size() != nd) {
    std::ostringstream msg;
    msg << "[" << op << "] Invalid number of start, stop or stride values (" << start.size() << ", "
        << stop.size() << ", " << strides.size() << ") for array with " << nd << " dimensions.";
    throw std::invalid_argument(msg.str());
  }
  Shape out(nd);
  for (size_t d = 0; d < nd; ++d) {
    const int32_t dim = a.shape()[d];
    if (strides[d] == 0) {
      throw std::invalid_argument(std::string("[") + op + "] Slice step cannot be zero.");
    }
    // Accept un-normalised bounds the NumPy way instead of reading out of range.
    auto clamp = [&](int32_t v, bool is_start) {
      if (v < 0 && !(strides[d] < 0 && !is_start && v == -1)) v += dim;
      if (strides[d] > 0) return std::clamp(v, 0, dim);
      return std::clamp(v, -1, dim - 1);
    };
    start[d] = clamp(start[d], true);
    stop[d] = clamp(stop[d], false);
    out[d] = slice_length(start[d], stop[d], strides[d]);
  }
  return out;
}

} // namespace

array slice(const array& a, Shape start, Shape stop, Shape strides, StreamOrDevice s) {
  Shape shape = slice_shape("slice", a, start, stop, strides);
  bool whole = shape == a.shape();
  for (size_t d = 0; whole && d < strides.size(); ++d) {
    whole = strides[d] == 1 || a.shape()[d] <= 1;
  }
  if (whole) return a;
  return array(
      std::move(shape), a.dtype(),
      std::make_shared<Slice>(to_stream(s), std::move(start), std::move(stop), std::move(strides)),
      {a});
}

array slice_update(const array& a, const array& update, Shape start, Shape stop, Shape strides,
                   StreamOrDevice s) {
  Shape region = slice_shape("slice_update", a, start, stop, strides);
  Stream stream = to_stream(s);
  array upd = broadcast_to(astype(update, a.dtype(), stream), region, stream);
  return array(
      a.shape(), a.dtype(),
      std::make_shared<SliceUpdate>(stream, std::move(start), std::move(stop), std::move(strides)),
      {a, upd});
}

} // namespace loom
