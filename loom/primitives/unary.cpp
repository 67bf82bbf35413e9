#include "loom/primitives/unary.h"

#include <cmath>
#include <iterator>
#include <memory>

#include "loom/allocator/object_pool.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/primitives/state_util.h"

namespace loom {

namespace {

array cast_to(const array& x, Dtype dtype, Stream s) {
  return x.dtype() == dtype ? x : astype(x, dtype, s);
}

} // namespace

const char* unary_op_name(UnaryOp op) { return ew::info(op).name; }

Dtype unary_output_dtype(UnaryOp op, Dtype input) {
  switch (ew::info(op).yields) {
    case ew::Yields::boolean:
      return bool_;
    case ew::Yields::real:
      return input == complex64 ? float32 : input;
    case ew::Yields::input:
      break;
  }
  return input;
}

array make_unary(UnaryOp op, const array& a, Stream stream) {
  return array(a.shape(), unary_output_dtype(op, a.dtype()),
               std::allocate_shared<Unary>(allocator::PoolAllocator<Unary>(), stream, op), {a});
}

array conj_if_complex(const array& a, Stream stream) {
  return is_complex(a.dtype()) ? make_unary(UnaryOp::Conjugate, a, stream) : a;
}

std::vector<Shape> Unary::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape()};
}

std::vector<array> Unary::vjp(const std::vector<array>& primals,
                              const std::vector<array>& cotangents, const std::vector<int>& argnums,
                              const std::vector<array>& outputs) {
  const array& x = primals[0];
  std::vector<array> grads;
  for (size_t i = 0; i < argnums.size(); ++i) {
    const Stream s = stream();
    array g = ew::derivative(op_, {x, outputs[0], cotangents[0], /*reverse=*/true, s});
    grads.push_back(cast_to(g, x.dtype(), s));
  }
  return grads;
}

std::vector<array> Unary::jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                              const std::vector<int>& argnums) {
  const array& x = primals[0];
  const Stream s = stream();
  // The output is rebuilt (lazily) only for the rules that read it.
  array out = ew::info(op_).derivative_reads_output ? make_unary(op_, x, s) : x;
  array t = ew::derivative(op_, {x, out, tangents[0], /*reverse=*/false, s});
  if (op_ == UnaryOp::Abs) t = cast_to(t, out.dtype(), stream());
  return {t};
}

std::pair<std::vector<array>, std::vector<int>> Unary::vmap(const std::vector<array>& inputs,
                                                            const std::vector<int>& axes) {
  return {{make_unary(op_, inputs[0], stream())}, {axes[0]}};
}

bool Unary::is_equivalent(const Primitive& other) const {
  return same_type_and_state(*this, other);
}

// --- StopGradient ---

std::vector<Shape> StopGradient::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape()};
}

std::vector<array> StopGradient::vjp(const std::vector<array>& primals, const std::vector<array>&,
                                     const std::vector<int>& argnums, const std::vector<array>&) {
  std::vector<array> grads;
  for (size_t i = 0; i < argnums.size(); ++i) grads.push_back(zeros_like(primals[0], stream()));
  return grads;
}

std::vector<array> StopGradient::jvp(const std::vector<array>& primals, const std::vector<array>&,
                                     const std::vector<int>&) {
  return {zeros_like(primals[0], stream())};
}

std::pair<std::vector<array>, std::vector<int>> StopGradient::vmap(const std::vector<array>& inputs,
                                                                   const std::vector<int>& axes) {
  return {{stop_gradient(inputs[0], stream())}, {axes[0]}};
}

bool StopGradient::is_equivalent(const Primitive& other) const {
  return same_type_and_state(*this, other);
}

// One factory per op of the table ("Exp", "LogicalNot", ...): the op is the
// name, so the state is empty.
static const bool loom_registered_unary_ops = [] {
  for (size_t i = 0; i < std::size(ew::kUnaryInfo); ++i) {
    auto op = static_cast<UnaryOp>(i);
    register_primitive(unary_op_name(op), [op](Stream s, const PrimitiveState&) {
      return std::make_shared<Unary>(s, op);
    });
  }
  return true;
}();

LOOM_REGISTER_PRIMITIVE(StopGradient, [](Stream s, const PrimitiveState&) {
  return std::make_shared<StopGradient>(s);
});

} // namespace loom
