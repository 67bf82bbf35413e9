#include "loom/primitives/unary.h"

#include <cmath>
#include <memory>

#include "loom/backend/cpu/elementwise.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"

namespace loom {

namespace {

array cast_to(const array& x, Dtype dtype, Stream s) {
  return x.dtype() == dtype ? x : astype(x, dtype, s);
}

// g * f'(x), or g * conj(f'(x)) for reverse mode (MLX's convention for
// complex inputs). `out` is f(x).
array chain_rule(UnaryOp op, const array& x, const array& out, const array& g, bool conj_derivative,
                 Stream s) {
  auto d = [&](const array& v) { return conj_derivative ? conj_if_complex(v, s) : v; };
  const Dtype dt = x.dtype();
  switch (op) {
    case UnaryOp::Negative:
      return negative(g, s);
    case UnaryOp::Conjugate:
      return conj_if_complex(g, s);
    case UnaryOp::Abs:
      // sign(x) is also d|z|/dz-bar for complex z; forward mode keeps the
      // real part of conj(sign(z)) * t, the directional derivative of |z|.
      return conj_derivative ? multiply(g, sign(x, s), s)
                             : multiply(g, conj_if_complex(sign(x, s), s), s);
    case UnaryOp::Square:
      return multiply(g, d(multiply(x, array(2.0, dt), s)), s);
    case UnaryOp::Sqrt:
      return divide(g, d(multiply(out, array(2.0, dt), s)), s);
    case UnaryOp::Rsqrt:
      return multiply(g, d(divide(multiply(out, array(-0.5, dt), s), x, s)), s);
    case UnaryOp::Reciprocal:
      return multiply(g, d(negative(square(out, s), s)), s);
    case UnaryOp::Exp:
      return multiply(g, d(out), s);
    case UnaryOp::Log:
      return divide(g, d(x), s);
    case UnaryOp::Sin:
      return multiply(g, d(cos(x, s)), s);
    case UnaryOp::Cos:
      return multiply(g, d(negative(sin(x, s), s)), s);
    case UnaryOp::Tanh: {
      if (is_complex(dt)) return multiply(g, d(subtract(array(1.0, dt), square(out, s), s)), s);
      // sech^2 x = 4e / (1 + e)^2 with e = exp(-2|x|): 1 - tanh^2 x cancels
      // for large |x| (relative error 8e-4 at |x| = 6, 0 at |x| = 12).
      array e = exp(multiply(abs(x, s), array(-2.0, dt), s), s);
      return multiply(
          g, divide(multiply(e, array(4.0, dt), s), square(add(array(1.0, dt), e, s), s), s), s);
    }
    case UnaryOp::Erf: {
      const double two_over_sqrt_pi = 2.0 / std::sqrt(M_PI);
      array e = exp(negative(square(x, s), s), s);
      return multiply(g, multiply(e, array(two_over_sqrt_pi, dt), s), s);
    }
    case UnaryOp::Sigmoid:
      return multiply(g, multiply(out, subtract(array(1.0, dt), out, s), s), s);
    case UnaryOp::Sign:
    case UnaryOp::Floor:
    case UnaryOp::Ceil:
    case UnaryOp::IsNan:
    case UnaryOp::IsInf:
    case UnaryOp::LogicalNot:
    case UnaryOp::BitwiseInvert:
      return zeros_like(x, s);
  }
  return zeros_like(x, s);
}

} // namespace

const char* unary_op_name(UnaryOp op) {
  switch (op) {
    case UnaryOp::Negative:
      return "Negative";
    case UnaryOp::Abs:
      return "Abs";
    case UnaryOp::Sign:
      return "Sign";
    case UnaryOp::Square:
      return "Square";
    case UnaryOp::Sqrt:
      return "Sqrt";
    case UnaryOp::Rsqrt:
      return "Rsqrt";
    case UnaryOp::Reciprocal:
      return "Reciprocal";
    case UnaryOp::Exp:
      return "Exp";
    case UnaryOp::Log:
      return "Log";
    case UnaryOp::Sin:
      return "Sin";
    case UnaryOp::Cos:
      return "Cos";
    case UnaryOp::Tanh:
      return "Tanh";
    case UnaryOp::Erf:
      return "Erf";
    case UnaryOp::Sigmoid:
      return "Sigmoid";
    case UnaryOp::LogicalNot:
      return "LogicalNot";
    case UnaryOp::BitwiseInvert:
      return "BitwiseInvert";
    case UnaryOp::IsNan:
      return "IsNan";
    case UnaryOp::IsInf:
      return "IsInf";
    case UnaryOp::Floor:
      return "Floor";
    case UnaryOp::Ceil:
      return "Ceil";
    case UnaryOp::Conjugate:
      return "Conjugate";
  }
  return "Unary";
}

Dtype unary_output_dtype(UnaryOp op, Dtype input) {
  switch (op) {
    case UnaryOp::LogicalNot:
    case UnaryOp::IsNan:
    case UnaryOp::IsInf:
      return bool_;
    case UnaryOp::Abs:
      return input == complex64 ? float32 : input;
    default:
      return input;
  }
}

array make_unary(UnaryOp op, const array& a, Stream stream) {
  return array(a.shape(), unary_output_dtype(op, a.dtype()), std::make_shared<Unary>(stream, op),
               {a});
}

array conj_if_complex(const array& a, Stream stream) {
  return is_complex(a.dtype()) ? make_unary(UnaryOp::Conjugate, a, stream) : a;
}

void Unary::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  cpu::unary(op_, inputs[0], outputs[0]);
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
    grads.push_back(cast_to(chain_rule(op_, x, outputs[0], cotangents[0], true, stream()),
                            x.dtype(), stream()));
  }
  return grads;
}

std::vector<array> Unary::jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                              const std::vector<int>& argnums) {
  const array& x = primals[0];
  // The output is rebuilt lazily; it is only evaluated if the rule uses it.
  array out = make_unary(op_, x, stream());
  array t = chain_rule(op_, x, out, tangents[0], false, stream());
  if (op_ == UnaryOp::Abs) t = cast_to(t, out.dtype(), stream());
  return {t};
}

std::pair<std::vector<array>, std::vector<int>> Unary::vmap(const std::vector<array>& inputs,
                                                            const std::vector<int>& axes) {
  return {{make_unary(op_, inputs[0], stream())}, {axes[0]}};
}

bool Unary::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Unary*>(&other);
  return o != nullptr && o->op_ == op_;
}

// --- StopGradient ---

void StopGradient::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  outputs[0].copy_shared_buffer(inputs[0]);
}

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
  return dynamic_cast<const StopGradient*>(&other) != nullptr;
}

} // namespace loom
