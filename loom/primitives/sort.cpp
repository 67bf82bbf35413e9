#include "loom/primitives/sort.h"

#include "loom/ops/creation.h"
#include "loom/ops/indexing.h"
#include "loom/ops/sort.h"

namespace loom {

const char* Sort::name() const {
  switch (kind_) {
    case Kind::values:
      return "Sort";
    case Kind::indices:
      return "ArgSort";
    case Kind::partition_indices:
      return "ArgPartition";
  }
  return "Sort";
}

std::vector<Shape> Sort::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape()};
}

std::vector<array> Sort::vjp(const std::vector<array>& primals,
                             const std::vector<array>& cotangents, const std::vector<int>&,
                             const std::vector<array>&) {
  if (kind_ != Kind::values) return {zeros_like(primals[0], stream())};
  // The sorted values are a permutation of the input: send each cotangent
  // back to where its value came from.
  array perm = argsort(primals[0], axis_, stream());
  return {put_along_axis(zeros_like(primals[0], stream()), perm, cotangents[0], axis_, stream())};
}

std::vector<array> Sort::jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                             const std::vector<int>&) {
  if (kind_ != Kind::values) return {zeros(primals[0].shape(), uint32, stream())};
  return {take_along_axis(tangents[0], argsort(primals[0], axis_, stream()), axis_, stream())};
}

std::pair<std::vector<array>, std::vector<int>> Sort::vmap(const std::vector<array>& inputs,
                                                           const std::vector<int>& axes) {
  int b = axes[0];
  int axis = b >= 0 && axis_ >= b ? axis_ + 1 : axis_;
  auto batched = std::make_shared<Sort>(stream(), kind_, axis, kth_);
  Dtype dtype = kind_ == Kind::values ? inputs[0].dtype() : uint32;
  return {{array(inputs[0].shape(), dtype, std::move(batched), {inputs[0]})}, {b}};
}

bool Sort::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Sort*>(&other);
  return o && o->kind_ == kind_ && o->axis_ == axis_ && o->kth_ == kth_;
}

void Sort::print_params(std::ostream& os) const {
  os << "axis=" << axis_;
  if (kind_ == Kind::partition_indices) os << ", kth=" << kth_;
}

} // namespace loom
