#include "loom/primitives/view.h"

#include <algorithm>
#include <memory>

#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/gather.h"
#include "loom/ops/shape.h"
#include "loom/ops/view.h"

namespace loom {

// View --------------------------------------------------------------------------

std::vector<Shape> View::output_shapes(const std::vector<array>& inputs) {
  Shape shape = inputs[0].shape();
  const int in_size = inputs[0].dtype().size;
  if (in_size != dtype_.size && !shape.empty()) {
    shape.back() = static_cast<int32_t>(static_cast<int64_t>(shape.back()) * in_size / dtype_.size);
  }
  return {shape};
}

// Only a view that keeps the dtype's size and kind passes a gradient (MLX
// differentiates none that changes the dtype).
std::vector<array> View::vjp(const std::vector<array>& primals,
                             const std::vector<array>& cotangents, const std::vector<int>&,
                             const std::vector<array>&) {
  if (primals[0].dtype() != dtype_) not_implemented("vjp");
  return {cotangents[0]};
}

std::vector<array> View::jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                             const std::vector<int>&) {
  if (primals[0].dtype() != dtype_) not_implemented("jvp");
  return {tangents[0]};
}

std::pair<std::vector<array>, std::vector<int>> View::vmap(const std::vector<array>& inputs,
                                                           const std::vector<int>& axes) {
  array x = inputs[0];
  int b = axes[0];
  // The last axis changes length when the item size does: keep the batch off it.
  if (b == x.ndim() - 1 && x.dtype().size != dtype_.size) {
    x = moveaxis(x, b, 0, stream());
    b = 0;
  }
  return {{view(x, dtype_, stream())}, {b}};
}

bool View::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const View*>(&other);
  return o != nullptr && o->dtype_ == dtype_;
}

LOOM_REGISTER_PRIMITIVE(View, [](Stream s, const PrimitiveState& st) {
  return std::make_shared<View>(s, state_get<Dtype>(st, "View", "dtype"));
});

// AsStrided -----------------------------------------------------------------------

std::vector<Shape> AsStrided::output_shapes(const std::vector<array>&) { return {shape_}; }

// Each output element reads one input element: the gradient adds the
// cotangent at those positions (overlapping windows accumulate).
std::vector<array> AsStrided::vjp(const std::vector<array>& primals,
                                  const std::vector<array>& cotangents, const std::vector<int>&,
                                  const std::vector<array>&) {
  Stream s = stream();
  const array& x = primals[0];
  array index = array(static_cast<int64_t>(offset_), int64);
  const int nd = static_cast<int>(shape_.size());
  for (int d = 0; d < nd; ++d) {
    Shape b(nd, 1);
    b[d] = shape_[d];
    array step = multiply(arange(0, shape_[d], 1, s), array(strides_[d], int64), s);
    index = add(index, reshape(step, b, s), s);
  }
  index = reshape(broadcast_to(index, shape_, s), {-1}, s);
  array ct = reshape(cotangents[0], {-1}, s);
  return {scatter_add(zeros_like(x, s), {index}, ct, {0}, s)};
}

std::vector<array> AsStrided::jvp(const std::vector<array>&, const std::vector<array>& tangents,
                                  const std::vector<int>&) {
  return {as_strided(tangents[0], shape_, strides_, offset_, stream())};
}

// A batch of 1-D inputs: the batch becomes a leading axis whose stride is
// one input's length.
std::pair<std::vector<array>, std::vector<int>> AsStrided::vmap(const std::vector<array>& inputs,
                                                                const std::vector<int>& axes) {
  array x = moveaxis(inputs[0], axes[0], 0, stream());
  const int32_t batch = x.shape(0);
  const int64_t n = x.shape(1);
  Shape shape{batch};
  shape.insert(shape.end(), shape_.begin(), shape_.end());
  Strides strides{n};
  strides.insert(strides.end(), strides_.begin(), strides_.end());
  return {{as_strided(x, shape, strides, offset_, stream())}, {0}};
}

bool AsStrided::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const AsStrided*>(&other);
  return o != nullptr && o->shape_ == shape_ && o->strides_ == strides_ && o->offset_ == offset_;
}

PrimitiveState AsStrided::state() const {
  return {{"shape", std::vector<int64_t>(shape_.begin(), shape_.end())},
          {"strides", std::vector<int64_t>(strides_.begin(), strides_.end())},
          {"offset", offset_}};
}

LOOM_REGISTER_PRIMITIVE(AsStrided, [](Stream s, const PrimitiveState& st) {
  auto shape = state_get<std::vector<int64_t>>(st, "AsStrided", "shape");
  auto strides = state_get<std::vector<int64_t>>(st, "AsStrided", "strides");
  return std::make_shared<AsStrided>(s, Shape(shape.begin(), shape.end()),
                                     Strides(strides.begin(), strides.end()),
                                     state_get<int64_t>(st, "AsStrided", "offset"));
});

// Depends -------------------------------------------------------------------------

std::vector<Shape> Depends::output_shapes(const std::vector<array>& inputs) {
  std::vector<Shape> out;
  for (int i = 0; i < count_; ++i) out.push_back(inputs[i].shape());
  return out;
}

std::vector<array> Depends::vjp(const std::vector<array>& primals,
                                const std::vector<array>& cotangents,
                                const std::vector<int>& argnums, const std::vector<array>&) {
  std::vector<array> out;
  for (int i : argnums) {
    out.push_back(i < count_ ? cotangents[i] : zeros_like(primals[i], stream()));
  }
  return out;
}

std::vector<array> Depends::jvp(const std::vector<array>& primals,
                                const std::vector<array>& tangents,
                                const std::vector<int>& argnums) {
  std::vector<array> out;
  for (int i = 0; i < count_; ++i) {
    auto it = std::find(argnums.begin(), argnums.end(), i);
    out.push_back(it == argnums.end() ? zeros_like(primals[i], stream())
                                      : tangents[it - argnums.begin()]);
  }
  return out;
}

std::pair<std::vector<array>, std::vector<int>> Depends::vmap(const std::vector<array>& inputs,
                                                              const std::vector<int>& axes) {
  std::vector<array> passed(inputs.begin(), inputs.begin() + count_);
  std::vector<array> deps(inputs.begin() + count_, inputs.end());
  return {depends(passed, deps), std::vector<int>(axes.begin(), axes.begin() + count_)};
}

bool Depends::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Depends*>(&other);
  return o != nullptr && o->count_ == count_;
}

LOOM_REGISTER_PRIMITIVE(Depends, [](Stream s, const PrimitiveState& st) {
  return std::make_shared<Depends>(s, state_get<int>(st, "Depends", "count"));
});


} // namespace loom
