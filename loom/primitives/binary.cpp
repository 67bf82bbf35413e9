#include "loom/primitives/binary.h"

#include <memory>

#include "loom/backend/cpu/elementwise.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/shape.h"
#include "loom/ops/utils.h"
#include "loom/primitives/unary.h"

namespace loom {

namespace {

array cast_to(const array& x, Dtype dtype, Stream s) {
  return x.dtype() == dtype ? x : astype(x, dtype, s);
}

bool needs_output(BinaryOp op) { return op == BinaryOp::Divide || op == BinaryOp::Power; }

// g times the partial derivative of `op` with respect to input `arg`
// (conjugated for reverse mode, MLX's convention for complex inputs).
// `out` is op(a, b); only Divide and Power read it.
array chain_rule(BinaryOp op, int arg, const array& a, const array& b, const array& out,
                 const array& g, bool conj_derivative, Stream s) {
  auto d = [&](const array& v) { return conj_derivative ? conj_if_complex(v, s) : v; };
  auto zero = [&](const array& like) { return array(0.0, like.dtype()); };
  switch (op) {
    case BinaryOp::Add:
      return g;
    case BinaryOp::Subtract:
      return arg == 0 ? g : negative(g, s);
    case BinaryOp::Multiply:
      return multiply(g, d(arg == 0 ? b : a), s);
    case BinaryOp::Divide:
      if (arg == 0) return divide(g, d(b), s);
      return negative(multiply(g, d(divide(out, b, s)), s), s);
    case BinaryOp::Remainder:
      // a mod b = a - b * floor(a / b): piecewise linear in both.
      if (arg == 0) return g;
      return negative(multiply(g, floor_divide(a, b, s), s), s);
    case BinaryOp::Power: {
      if (arg == 0) {
        array one(1.0, b.dtype());
        return multiply(g, d(multiply(b, power(a, subtract(b, one, s), s), s)), s);
      }
      // d/db a^b = a^b log(a); taken as 0 where a^b is 0 (a = 0, b > 0),
      // where the product would otherwise be 0 * -inf.
      array t = multiply(out, log(a, s), s);
      array zero_out = equal(out, array(0.0, out.dtype()), s);
      return multiply(g, d(where(zero_out, zero(t), t, s)), s);
    }
    case BinaryOp::Maximum: {
      // Ties send the gradient to b, as in MLX.
      array a_wins = greater(a, b, s);
      return arg == 0 ? where(a_wins, g, zero(g), s) : where(a_wins, zero(g), g, s);
    }
    case BinaryOp::Minimum: {
      array a_wins = less(a, b, s);
      return arg == 0 ? where(a_wins, g, zero(g), s) : where(a_wins, zero(g), g, s);
    }
    default:
      // Comparisons, logic, bitwise ops and floor_divide are piecewise
      // constant: zero gradient.
      return zeros_like(arg == 0 ? a : b, s);
  }
}

} // namespace

const char* binary_op_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add:
      return "Add";
    case BinaryOp::Subtract:
      return "Subtract";
    case BinaryOp::Multiply:
      return "Multiply";
    case BinaryOp::Divide:
      return "Divide";
    case BinaryOp::FloorDivide:
      return "FloorDivide";
    case BinaryOp::Remainder:
      return "Remainder";
    case BinaryOp::Power:
      return "Power";
    case BinaryOp::Maximum:
      return "Maximum";
    case BinaryOp::Minimum:
      return "Minimum";
    case BinaryOp::Equal:
      return "Equal";
    case BinaryOp::NotEqual:
      return "NotEqual";
    case BinaryOp::Less:
      return "Less";
    case BinaryOp::LessEqual:
      return "LessEqual";
    case BinaryOp::Greater:
      return "Greater";
    case BinaryOp::GreaterEqual:
      return "GreaterEqual";
    case BinaryOp::LogicalAnd:
      return "LogicalAnd";
    case BinaryOp::LogicalOr:
      return "LogicalOr";
    case BinaryOp::BitwiseAnd:
      return "BitwiseAnd";
    case BinaryOp::BitwiseOr:
      return "BitwiseOr";
    case BinaryOp::BitwiseXor:
      return "BitwiseXor";
    case BinaryOp::LeftShift:
      return "LeftShift";
    case BinaryOp::RightShift:
      return "RightShift";
  }
  return "Binary";
}

bool binary_op_is_predicate(BinaryOp op) {
  switch (op) {
    case BinaryOp::Equal:
    case BinaryOp::NotEqual:
    case BinaryOp::Less:
    case BinaryOp::LessEqual:
    case BinaryOp::Greater:
    case BinaryOp::GreaterEqual:
    case BinaryOp::LogicalAnd:
    case BinaryOp::LogicalOr:
      return true;
    default:
      return false;
  }
}

Dtype binary_output_dtype(BinaryOp op, Dtype input) {
  return binary_op_is_predicate(op) ? bool_ : input;
}

array make_binary(BinaryOp op, const array& a, const array& b, Stream stream) {
  return array(a.shape(), binary_output_dtype(op, a.dtype()), std::make_shared<Binary>(stream, op),
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

void Binary::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  cpu::binary(op_, inputs[0], inputs[1], outputs[0]);
}

std::vector<Shape> Binary::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape()};
}

std::vector<array> Binary::vjp(const std::vector<array>& primals,
                               const std::vector<array>& cotangents,
                               const std::vector<int>& argnums, const std::vector<array>& outputs) {
  std::vector<array> grads;
  for (int arg : argnums) {
    array g =
        chain_rule(op_, arg, primals[0], primals[1], outputs[0], cotangents[0], true, stream());
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
  array out = needs_output(op_) ? make_binary(op_, a, b, stream()) : a;
  std::vector<array> terms;
  for (size_t i = 0; i < argnums.size(); ++i) {
    terms.push_back(chain_rule(op_, argnums[i], a, b, out, tangents[i], false, stream()));
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
  auto* o = dynamic_cast<const Binary*>(&other);
  return o != nullptr && o->op_ == op_;
}

} // namespace loom
