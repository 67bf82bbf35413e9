#include "loom/primitives/softmax.h"

#include <memory>
#include <ostream>

#include "loom/ops/elementwise.h"
#include "loom/ops/reduce.h"
#include "loom/ops/softmax.h"
#include "loom/ops/shape.h"
#include "loom/primitives/state_util.h"

namespace loom {

array make_softmax(const array& a, bool precise, Stream stream) {
  return array(a.shape(), a.dtype(), std::make_shared<Softmax>(stream, precise), {a});
}

std::vector<Shape> Softmax::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape()};
}

namespace {

// d softmax(x) . t = y * (t - sum(t * y)) over the last axis.
array softmax_derivative(const array& y, const array& t, Stream s) {
  array dot = sum(multiply(t, y, s), std::vector<int>{-1}, true, s);
  return multiply(y, subtract(t, dot, s), s);
}

} // namespace

std::vector<array> Softmax::vjp(const std::vector<array>&, const std::vector<array>& cotangents,
                                const std::vector<int>&, const std::vector<array>& outputs) {
  return {softmax_derivative(outputs[0], cotangents[0], stream())};
}

std::vector<array> Softmax::jvp(const std::vector<array>& primals,
                                const std::vector<array>& tangents, const std::vector<int>&) {
  array y = make_softmax(primals[0], precise_, stream());
  return {softmax_derivative(y, tangents[0], stream())};
}

std::pair<std::vector<array>, std::vector<int>> Softmax::vmap(const std::vector<array>& inputs,
                                                              const std::vector<int>& axes) {
  const array& x = inputs[0];
  const int b = axes[0];
  // The batch axis must not be the last one, which the op normalises over.
  if (b == x.ndim() - 1) {
    return {{make_softmax(moveaxis(x, b, 0, stream()), precise_, stream())}, {0}};
  }
  return {{make_softmax(x, precise_, stream())}, {b}};
}

array make_logsumexp(const array& a, Stream stream) {
  Shape shape(a.shape().begin(), a.shape().end() - 1);
  return array(std::move(shape), a.dtype(), std::make_shared<LogSumExp>(stream), {a});
}

std::vector<Shape> LogSumExp::output_shapes(const std::vector<array>& inputs) {
  const Shape& in = inputs[0].shape();
  return {Shape(in.begin(), in.end() - 1)};
}

// d lse / dx = softmax(x) = exp(x - lse).
std::vector<array> LogSumExp::vjp(const std::vector<array>& primals,
                                  const std::vector<array>& cotangents, const std::vector<int>&,
                                  const std::vector<array>& outputs) {
  Stream s = stream();
  array p = exp(subtract(primals[0], expand_dims(outputs[0], -1, s), s), s);
  return {multiply(expand_dims(cotangents[0], -1, s), p, s)};
}

std::vector<array> LogSumExp::jvp(const std::vector<array>& primals,
                                  const std::vector<array>& tangents, const std::vector<int>&) {
  Stream s = stream();
  array p = make_softmax(primals[0], false, s);
  return {sum(multiply(tangents[0], p, s), std::vector<int>{-1}, false, s)};
}

std::pair<std::vector<array>, std::vector<int>> LogSumExp::vmap(const std::vector<array>& inputs,
                                                                const std::vector<int>& axes) {
  const array& x = inputs[0];
  const int b = axes[0];
  if (b == x.ndim() - 1) return {{make_logsumexp(moveaxis(x, b, 0, stream()), stream())}, {0}};
  return {{make_logsumexp(x, stream())}, {b}};
}

bool Softmax::is_equivalent(const Primitive& other) const {
  return same_type_and_state(*this, other);
}

PrimitiveState Softmax::state() const { return {{"precise", precise_}}; }

LOOM_REGISTER_PRIMITIVE(Softmax, [](Stream s, const PrimitiveState& st) {
  return std::make_shared<Softmax>(s, state_get<bool>(st, "Softmax", "precise"));
});
LOOM_REGISTER_PRIMITIVE(LogSumExp, [](Stream s, const PrimitiveState&) {
  return std::make_shared<LogSumExp>(s);
});

} // namespace loom
