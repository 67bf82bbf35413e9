// Template members of array that need the dtype dispatch machinery.
#pragma once

#include "loom/types/dispatch.h"

namespace loom {

template <typename T>
T cast_element(const void* src, Dtype dtype) {
  return dispatch(dtype, [&](auto tag) -> T {
    using S = typename decltype(tag)::type;
    return convert<T>(*static_cast<const S*>(src));
  });
}

template <typename T>
array::array(const std::vector<T>& values, Shape shape, Dtype dtype)
    : desc_(std::make_shared<ArrayDesc>(std::move(shape), dtype)) {
  if (shape_size(desc_->shape) != values.size()) {
    throw std::invalid_argument("[array] " + std::to_string(values.size()) +
                                " values cannot fill shape " + shape_to_string(desc_->shape) +
                                ".");
  }
  set_data(allocator::allocate(nbytes()));
  dispatch(dtype, [&](auto tag) {
    using D = typename decltype(tag)::type;
    D* out = data<D>();
    for (size_t i = 0; i < values.size(); ++i) out[i] = convert<D>(values[i]);
  });
  set_status(Status::available);
}

template <typename T>
T array::item() {
  if (size() != 1) {
    throw std::invalid_argument(
        "[item] Only length-1 arrays can be converted to Python scalars; this array has shape " +
        shape_to_string(shape()) + ".");
  }
  eval();
  return cast_element<T>(data<char>(), dtype());
}

} // namespace loom
