#include "loom/primitives/binary.h"

#include <iterator>
#include <memory>

#include "loom/allocator/object_pool.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/shape.h"
#include "loom/ops/utils.h"
#include "loom/primitives/state_util.h"
#include "loom/primitives/unary.h"

namespace loom {

namespace {

array cast_to(const array& x, Dtype dtype, Stream s) {
  return x.dtype() == dtype ? x : astype(x, dtype, s);
}

} // namespace

const char* binary_op_name(BinaryOp op) { return ew::info(op).name; }

bool binary_op_is_predicate(BinaryOp op) { return ew::info(op).yields == ew::Yields::boolean; }

Dtype binary_output_dtype(BinaryOp op, Dtype input) {
  return binary_op_is_predicate(op) ? bool_ : input;
}

array make_binary(BinaryOp op, const array& a, const array& b, Stream stream) {
  return array(a.shape(), binary_output_dtype(op, a.dtype()),
               std::allocate_shared<Binary>(allocator::PoolAllocator<Binary>(), stream, op),
               {a, b});
}

int align_batched_inputs(std::vector<array>& inputs, const std::vector<int>& axes, Stream stream) {
  int target = -1;
  for (int ax : axes) {
    if (ax >= 0) {
      target = ax;
      break;
    }
  }
  if (target < 0) return -1;
  std::vector<Shape> shapes;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (axes[i] < 0) {
      inputs[i] = expand_dims(inputs[i], target, stream);
    } else if (axes[i] != target) {
      inputs[i] = moveaxis(inputs[i], axes[i], target, stream);
    }
    shapes.push_back(inputs[i].shape());
  }
  Shape shape = broadcast_shapes(shapes);
  for (auto& x : inputs) {
    if (x.shape() != shape) x = broadcast_to(x, shape, stream);
  }
  return target;
}

std::vector<Shape> Binary::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape()};
}

std::vector<array> Binary::vjp(const std::vector<array>& primals,
                               const std::vector<array>& cotangents,
                               const std::vector<int>& argnums, const std::vector<array>& outputs) {
  std::vector<array> grads;
  for (int arg : argnums) {
    const Stream s = stream();
    array g = ew::derivative(op_, {arg, primals[0], primals[1], outputs[0], cotangents[0],
                                   /*reverse=*/true, s});
    grads.push_back(cast_to(g, primals[arg].dtype(), stream()));
  }
  return grads;
}

std::vector<array> Binary::jvp(const std::vector<array>& primals,
                               const std::vector<array>& tangents,
                               const std::vector<int>& argnums) {
  const array& a = primals[0];
  const array& b = primals[1];
  if (binary_op_is_predicate(op_)) return {zeros_like(primals[argnums[0]], stream())};
  // Rebuilt lazily: only evaluated when the rule reads it.
  const Stream s = stream();
  array out = ew::info(op_).derivative_reads_output ? make_binary(op_, a, b, s) : a;
  std::vector<array> terms;
  for (size_t i = 0; i < argnums.size(); ++i) {
    terms.push_back(
        ew::derivative(op_, {argnums[i], a, b, out, tangents[i], /*reverse=*/false, s}));
  }
  array t = terms[0];
  for (size_t i = 1; i < terms.size(); ++i) t = add(t, terms[i], stream());
  return {cast_to(t, binary_output_dtype(op_, a.dtype()), stream())};
}

std::pair<std::vector<array>, std::vector<int>> Binary::vmap(const std::vector<array>& inputs,
                                                             const std::vector<int>& axes) {
  std::vector<array> in = inputs;
  int axis = align_batched_inputs(in, axes, stream());
  return {{make_binary(op_, in[0], in[1], stream())}, {axis}};
}

bool Binary::is_equivalent(const Primitive& other) const {
  return same_type_and_state(*this, other);
}

// One factory per op of the table ("Add", "Less", ...).
static const bool loom_registered_binary_ops = [] {
  for (size_t i = 0; i < std::size(ew::kBinaryInfo); ++i) {
    auto op = static_cast<BinaryOp>(i);
    register_primitive(binary_op_name(op), [op](Stream s, const PrimitiveState&) {
      return std::make_shared<Binary>(s, op);
    });
  }
  return true;
}();

} // namespace loom
