#include "loom/primitives/random.h"

#include "loom/ops/creation.h"
#include "loom/ops/shape.h"
#include "loom/primitives/state_util.h"

namespace loom {

std::vector<Shape> RandomBits::output_shapes(const std::vector<array>& inputs) {
  const Shape& keys = inputs[0].shape();
  Shape out(keys.begin(), keys.end() - 1);
  out.insert(out.end(), shape_.begin(), shape_.end());
  return {out};
}

// Keys are integers: nothing flows back to them, and samples do not move with
// a tangent.
std::vector<array> RandomBits::vjp(const std::vector<array>& primals, const std::vector<array>&,
                                   const std::vector<int>&, const std::vector<array>&) {
  return {zeros_like(primals[0], stream())};
}

std::vector<array> RandomBits::jvp(const std::vector<array>& primals, const std::vector<array>&,
                                   const std::vector<int>&) {
  return {zeros(output_shapes(primals)[0], dtype_, stream())};
}

// A batch of keys gives a batch of samples, one set per key.
std::pair<std::vector<array>, std::vector<int>> RandomBits::vmap(const std::vector<array>& inputs,
                                                                 const std::vector<int>& axes) {
  array keys = inputs[0];
  if (axes[0] > 0) keys = moveaxis(keys, axes[0], 0, stream());
  auto prim = std::make_shared<RandomBits>(stream(), shape_, dist_, dtype_);
  Shape shape = prim->output_shapes({keys})[0];
  return {{array(std::move(shape), dtype_, prim, {keys})}, {axes[0] >= 0 ? 0 : -1}};
}

bool RandomBits::is_equivalent(const Primitive& other) const {
  return same_type_and_state(*this, other);
}

const char* RandomBits::name() const {
  switch (dist_) {
    case RandomDistribution::uniform:
      return "RandomUniform";
    case RandomDistribution::normal:
      return "RandomNormal";
    default:
      return "RandomBits";
  }
}

// The distribution is the name ("RandomUniform", ...).
PrimitiveState RandomBits::state() const {
  return {{"shape", state_ints(shape_)}, {"dtype", dtype_}};
}

static const bool loom_registered_random = [] {
  using D = RandomDistribution;
  for (auto [dist, name] : {std::pair{D::bits, "RandomBits"},
                            {D::uniform, "RandomUniform"},
                            {D::normal, "RandomNormal"}}) {
    register_primitive(
        name, [dist = dist, name = std::string(name)](Stream s, const PrimitiveState& st) {
          return std::make_shared<RandomBits>(s, state_get<Shape>(st, name, "shape"), dist,
                                              state_get<Dtype>(st, name, "dtype"));
        });
  }
  return true;
}();

} // namespace loom
