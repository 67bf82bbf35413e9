#include "loom/primitives/creation.h"

#include <cmath>
#include <limits>
#include <type_traits>

#include "loom/ops/creation.h"
#include "loom/primitives/state_util.h"
#include "loom/types/dispatch.h"

namespace loom {

// --- Full -----------------------------------------------------------------------

std::vector<Shape> Full::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape()};
}

std::vector<array> Full::vjp(const std::vector<array>&, const std::vector<array>& cotangents,
                             const std::vector<int>&, const std::vector<array>&) {
  return {cotangents[0]};
}

std::vector<array> Full::jvp(const std::vector<array>&, const std::vector<array>& tangents,
                             const std::vector<int>&) {
  return {tangents[0]};
}

std::pair<std::vector<array>, std::vector<int>> Full::vmap(const std::vector<array>& inputs,
                                                           const std::vector<int>& axes) {
  const array& x = inputs[0];
  return {{array(x.shape(), x.dtype(), std::make_shared<Full>(stream()), {x})}, {axes[0]}};
}

bool Full::is_equivalent(const Primitive& other) const { return same_type_and_state(*this, other); }

// --- Arange, Linspace, Eye: no inputs, so nothing to differentiate or map -------

namespace {

// Truncation toward zero, saturating instead of overflowing (arange bounds
// are finite but may exceed the integer range).
int64_t truncate_to_int64(double v) {
  if (v >= 9223372036854775807.0) return std::numeric_limits<int64_t>::max();
  if (v <= -9223372036854775808.0) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

} // namespace

// start' = T(start), step' = T(start + step) - start' (NumPy's and MLX's
// rule), both sign-extended to uint64 so that the product wraps as T does.
Arange::IntegerProgression Arange::integer_progression() const {
  IntegerProgression p{0, 0};
  dispatch(dtype_, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      const T first = static_cast<T>(truncate_to_int64(start_));
      const T second = static_cast<T>(truncate_to_int64(start_ + step_));
      p.base = static_cast<uint64_t>(static_cast<int64_t>(first));
      p.delta = static_cast<uint64_t>(static_cast<int64_t>(static_cast<T>(second - first)));
    }
  });
  return p;
}

std::vector<Shape> Arange::output_shapes(const std::vector<array>&) { return {{size_}}; }

std::vector<array> Arange::vjp(const std::vector<array>&, const std::vector<array>&,
                               const std::vector<int>&, const std::vector<array>&) {
  return {};
}

std::vector<array> Arange::jvp(const std::vector<array>&, const std::vector<array>&,
                               const std::vector<int>&) {
  return {zeros({size_}, dtype_, stream())};
}

std::pair<std::vector<array>, std::vector<int>> Arange::vmap(const std::vector<array>&,
                                                             const std::vector<int>&) {
  return {{array({size_}, dtype_,
                 std::make_shared<Arange>(stream(), start_, stop_, step_, size_, dtype_), {})},
          {-1}};
}

bool Arange::is_equivalent(const Primitive& other) const {
  return same_type_and_state(*this, other);
}

std::vector<Shape> Linspace::output_shapes(const std::vector<array>&) { return {{num_}}; }

std::vector<array> Linspace::vjp(const std::vector<array>&, const std::vector<array>&,
                                 const std::vector<int>&, const std::vector<array>&) {
  return {};
}

std::vector<array> Linspace::jvp(const std::vector<array>&, const std::vector<array>&,
                                 const std::vector<int>&) {
  return {zeros({num_}, dtype_, stream())};
}

std::pair<std::vector<array>, std::vector<int>> Linspace::vmap(const std::vector<array>&,
                                                               const std::vector<int>&) {
  return {{array({num_}, dtype_, std::make_shared<Linspace>(stream(), start_, stop_, num_, dtype_),
                 {})},
          {-1}};
}

bool Linspace::is_equivalent(const Primitive& other) const {
  return same_type_and_state(*this, other);
}

std::vector<Shape> Eye::output_shapes(const std::vector<array>&) { return {{n_, m_}}; }

std::vector<array> Eye::vjp(const std::vector<array>&, const std::vector<array>&,
                            const std::vector<int>&, const std::vector<array>&) {
  return {};
}

std::vector<array> Eye::jvp(const std::vector<array>&, const std::vector<array>&,
                            const std::vector<int>&) {
  return {zeros({n_, m_}, dtype_, stream())};
}

std::pair<std::vector<array>, std::vector<int>> Eye::vmap(const std::vector<array>&,
                                                          const std::vector<int>&) {
  return {{array({n_, m_}, dtype_, std::make_shared<Eye>(stream(), n_, m_, k_, dtype_), {})}, {-1}};
}

bool Eye::is_equivalent(const Primitive& other) const { return same_type_and_state(*this, other); }

// --- AsType -------------------------------------------------------------------

std::vector<Shape> AsType::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape()};
}

std::vector<array> AsType::vjp(const std::vector<array>& primals,
                               const std::vector<array>& cotangents, const std::vector<int>&,
                               const std::vector<array>&) {
  return {astype(cotangents[0], primals[0].dtype(), stream())};
}

std::vector<array> AsType::jvp(const std::vector<array>&, const std::vector<array>& tangents,
                               const std::vector<int>&) {
  return {astype(tangents[0], dtype_, stream())};
}

std::pair<std::vector<array>, std::vector<int>> AsType::vmap(const std::vector<array>& inputs,
                                                             const std::vector<int>& axes) {
  return {{astype(inputs[0], dtype_, stream())}, {axes[0]}};
}

bool AsType::is_equivalent(const Primitive& other) const {
  return same_type_and_state(*this, other);
}

// --- Copy ---------------------------------------------------------------------

std::vector<Shape> Copy::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape()};
}

std::vector<array> Copy::vjp(const std::vector<array>&, const std::vector<array>& cotangents,
                             const std::vector<int>&, const std::vector<array>&) {
  return {cotangents[0]};
}

std::vector<array> Copy::jvp(const std::vector<array>&, const std::vector<array>& tangents,
                             const std::vector<int>&) {
  return {tangents[0]};
}

std::pair<std::vector<array>, std::vector<int>> Copy::vmap(const std::vector<array>& inputs,
                                                           const std::vector<int>& axes) {
  return {{copy(inputs[0], stream())}, {axes[0]}};
}

// --- state and factories ------------------------------------------------------

PrimitiveState Arange::state() const {
  return {{"start", start_},
          {"stop", stop_},
          {"step", step_},
          {"size", int64_t{size_}},
          {"dtype", dtype_}};
}
PrimitiveState Linspace::state() const {
  return {{"start", start_}, {"stop", stop_}, {"num", int64_t{num_}}, {"dtype", dtype_}};
}
PrimitiveState Eye::state() const {
  return {{"n", int64_t{n_}}, {"m", int64_t{m_}}, {"k", int64_t{k_}}, {"dtype", dtype_}};
}
PrimitiveState AsType::state() const { return {{"dtype", dtype_}}; }

LOOM_REGISTER_PRIMITIVE(Full,
                        [](Stream s, const PrimitiveState&) { return std::make_shared<Full>(s); });
LOOM_REGISTER_PRIMITIVE(Arange, [](Stream s, const PrimitiveState& st) {
  return std::make_shared<Arange>(
      s, state_get<double>(st, "Arange", "start"), state_get<double>(st, "Arange", "stop"),
      state_get<double>(st, "Arange", "step"), state_get<int32_t>(st, "Arange", "size"),
      state_get<Dtype>(st, "Arange", "dtype"));
});
LOOM_REGISTER_PRIMITIVE(Linspace, [](Stream s, const PrimitiveState& st) {
  return std::make_shared<Linspace>(
      s, state_get<double>(st, "Linspace", "start"), state_get<double>(st, "Linspace", "stop"),
      state_get<int>(st, "Linspace", "num"), state_get<Dtype>(st, "Linspace", "dtype"));
});
LOOM_REGISTER_PRIMITIVE(Eye, [](Stream s, const PrimitiveState& st) {
  return std::make_shared<Eye>(s, state_get<int>(st, "Eye", "n"), state_get<int>(st, "Eye", "m"),
                               state_get<int>(st, "Eye", "k"),
                               state_get<Dtype>(st, "Eye", "dtype"));
});
LOOM_REGISTER_PRIMITIVE(AsType, [](Stream s, const PrimitiveState& st) {
  return std::make_shared<AsType>(s, state_get<Dtype>(st, "AsType", "dtype"));
});
LOOM_REGISTER_PRIMITIVE(Copy,
                        [](Stream s, const PrimitiveState&) { return std::make_shared<Copy>(s); });

} // namespace loom
