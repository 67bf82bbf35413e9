#include "loom/primitives/creation.h"

#include <cmath>

#include "loom/ops/creation.h"

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

bool Full::is_equivalent(const Primitive& other) const {
  return dynamic_cast<const Full*>(&other) != nullptr;
}

// --- Arange, Linspace, Eye: no inputs, so nothing to differentiate or map -------

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
  auto* o = dynamic_cast<const Arange*>(&other);
  return o && o->start_ == start_ && o->stop_ == stop_ && o->step_ == step_ && o->size_ == size_ &&
         o->dtype_ == dtype_;
}

void Arange::print_params(std::ostream& os) const {
  os << "start=" << start_ << ", stop=" << stop_ << ", step=" << step_;
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
  auto* o = dynamic_cast<const Linspace*>(&other);
  return o && o->start_ == start_ && o->stop_ == stop_ && o->num_ == num_ && o->dtype_ == dtype_;
}

void Linspace::print_params(std::ostream& os) const {
  os << "start=" << start_ << ", stop=" << stop_ << ", num=" << num_;
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

bool Eye::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Eye*>(&other);
  return o && o->n_ == n_ && o->m_ == m_ && o->k_ == k_ && o->dtype_ == dtype_;
}

void Eye::print_params(std::ostream& os) const { os << "n=" << n_ << ", m=" << m_ << ", k=" << k_; }

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
  auto* o = dynamic_cast<const AsType*>(&other);
  return o && o->dtype_ == dtype_;
}

void AsType::print_params(std::ostream& os) const { os << "dtype=" << dtype_; }

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

} // namespace loom
