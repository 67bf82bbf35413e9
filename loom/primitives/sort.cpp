#include "loom/primitives/sort.h"

#include "loom/ops/creation.h"
#include "loom/ops/gather.h"
#include "loom/ops/sort.h"
#include "loom/primitives/state_util.h"

namespace loom {

const char* Sort::name() const {
  switch (kind_) {
    case Kind::values:
      return "Sort";
    case Kind::indices:
      return "ArgSort";
    case Kind::partition_indices:
      return "ArgPartition";
    case Kind::top_indices:
      return "ArgTopK";
  }
  return "Sort";
}

std::vector<Shape> Sort::output_shapes(const std::vector<array>& inputs) {
  Shape shape = inputs[0].shape();
  if (kind_ == Kind::top_indices) shape[axis_] = kth_;
  return {shape};
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
  if (kind_ != Kind::values) return {zeros(output_shapes(primals)[0], uint32, stream())};
  return {take_along_axis(tangents[0], argsort(primals[0], axis_, stream()), axis_, stream())};
}

std::pair<std::vector<array>, std::vector<int>> Sort::vmap(const std::vector<array>& inputs,
                                                           const std::vector<int>& axes) {
  int b = axes[0];
  int axis = b >= 0 && axis_ >= b ? axis_ + 1 : axis_;
  auto batched = std::make_shared<Sort>(stream(), kind_, axis, kth_);
  Dtype dtype = kind_ == Kind::values ? inputs[0].dtype() : uint32;
  Shape shape = batched->output_shapes(inputs)[0];
  return {{array(std::move(shape), dtype, std::move(batched), {inputs[0]})}, {b}};
}

bool Sort::is_equivalent(const Primitive& other) const { return same_type_and_state(*this, other); }

// --- SearchSorted ---------------------------------------------------------------

std::vector<Shape> SearchSorted::output_shapes(const std::vector<array>& inputs) {
  return {inputs[1].shape()};
}

std::vector<array> SearchSorted::vjp(const std::vector<array>& primals, const std::vector<array>&,
                                     const std::vector<int>& argnums, const std::vector<array>&) {
  // Piecewise constant in both inputs.
  std::vector<array> out;
  for (int arg : argnums) out.push_back(zeros_like(primals[arg], stream()));
  return out;
}

std::vector<array> SearchSorted::jvp(const std::vector<array>& primals, const std::vector<array>&,
                                     const std::vector<int>&) {
  return {zeros(primals[1].shape(), uint32, stream())};
}

std::pair<std::vector<array>, std::vector<int>> SearchSorted::vmap(const std::vector<array>& inputs,
                                                                   const std::vector<int>& axes) {
  if (axes[0] >= 0) {
    throw std::invalid_argument(
        "[searchsorted] vmap over the sorted sequence is not supported (it must be 1-D); map "
        "over the values instead.");
  }
  return {{searchsorted(inputs[0], inputs[1], right_, stream())}, {axes[1]}};
}

bool SearchSorted::is_equivalent(const Primitive& other) const {
  return same_type_and_state(*this, other);
}

// --- state and factories ------------------------------------------------------

// The kind is the name ("Sort", "ArgSort", "ArgPartition", "ArgTopK"); kth
// matters for ArgPartition and ArgTopK only.
PrimitiveState Sort::state() const { return {{"axis", int64_t{axis_}}, {"kth", int64_t{kth_}}}; }
PrimitiveState SearchSorted::state() const {
  return {{"side", std::string(right_ ? "right" : "left")}};
}

static const bool loom_registered_sorts = [] {
  using K = Sort::Kind;
  for (auto [kind, name] : {std::pair{K::values, "Sort"},
                            {K::indices, "ArgSort"},
                            {K::partition_indices, "ArgPartition"},
                            {K::top_indices, "ArgTopK"}}) {
    register_primitive(name,
                       [kind = kind, name = std::string(name)](Stream s, const PrimitiveState& st) {
                         return std::make_shared<Sort>(s, kind, state_get<int>(st, name, "axis"),
                                                       state_get<int>(st, name, "kth"));
                       });
  }
  return true;
}();

LOOM_REGISTER_PRIMITIVE(SearchSorted, [](Stream s, const PrimitiveState& st) {
  std::string side = state_get<std::string>(st, "SearchSorted", "side");
  if (side != "left" && side != "right") {
    throw std::invalid_argument("[SearchSorted] side must be 'left' or 'right', not '" + side +
                                "'.");
  }
  return std::make_shared<SearchSorted>(s, side == "right");
});

} // namespace loom
