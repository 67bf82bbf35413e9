// The fast path of a fused region whose values are all float32 and whose ops
// are common arithmetic and math: each chunk of 4096 elements runs every op
// as a tight loop over cache-resident buffers, dense inputs are read in place
// and escaping values are written straight into their outputs (no per-op
// arrays, allocations or copies). The scalar functions are the element-wise
// kernels' own (backend/cpu/elementwise.h), so results match eager ones.
//
// Until the element-wise ops carry one shared table, this file maps
// Unary/Binary op codes to loops; it is the one place to switch to the table.
#include <algorithm>
#include <cmath>
#include <optional>

#include "loom/backend/cpu/elementwise.h"
#include "loom/backend/cpu/thread_pool.h"
#include "loom/compile/compiled.h"
#include "loom/compile/executor.h"
#include "loom/primitives/binary.h"
#include "loom/primitives/unary.h"

namespace loom::compile_detail {

namespace {

enum class Code : uint8_t {
  add,
  sub,
  mul,
  div,
  max,
  min, // binary
  neg,
  square,
  sqrt,
  exp,
  log,
  tanh,
  erf,
  abs,
  sigmoid,
  sin,
  cos, // unary
  bcast
};

constexpr size_t kChunk = 4096;

std::optional<Code> classify(const FusedOp& op) {
  if (op.dtype != float32) return std::nullopt;
  const Primitive& p = *op.primitive;
  if (p.traits().broadcast) return Code::bcast;
  if (auto* u = dynamic_cast<const Unary*>(&p)) {
    switch (u->op()) {
      case UnaryOp::Negative:
        return Code::neg;
      case UnaryOp::Square:
        return Code::square;
      case UnaryOp::Sqrt:
        return Code::sqrt;
      case UnaryOp::Exp:
        return Code::exp;
      case UnaryOp::Log:
        return Code::log;
      case UnaryOp::Tanh:
        return Code::tanh;
      case UnaryOp::Erf:
        return Code::erf;
      case UnaryOp::Abs:
        return Code::abs;
      case UnaryOp::Sigmoid:
        return Code::sigmoid;
      case UnaryOp::Sin:
        return Code::sin;
      case UnaryOp::Cos:
        return Code::cos;
      default:
        return std::nullopt;
    }
  }
  if (auto* b = dynamic_cast<const Binary*>(&p)) {
    switch (b->op()) {
      case BinaryOp::Add:
        return Code::add;
      case BinaryOp::Subtract:
        return Code::sub;
      case BinaryOp::Multiply:
        return Code::mul;
      case BinaryOp::Divide:
        return Code::div;
      case BinaryOp::Maximum:
        return Code::max;
      case BinaryOp::Minimum:
        return Code::min;
      default:
        return std::nullopt;
    }
  }
  return std::nullopt;
}

template <typename F>
inline void map1(const float* a, float* d, size_t n, F f) {
  for (size_t i = 0; i < n; ++i) d[i] = f(a[i]);
}
template <typename F>
inline void map2(const float* a, const float* b, float* d, size_t n, F f) {
  for (size_t i = 0; i < n; ++i) d[i] = f(a[i], b[i]);
}

void run(Code code, const float* a, const float* b, float* d, size_t n) {
  using namespace cpu::elementwise;
  switch (code) {
    case Code::add:
      return map2(a, b, d, n, [](float x, float y) { return x + y; });
    case Code::sub:
      return map2(a, b, d, n, [](float x, float y) { return x - y; });
    case Code::mul:
      return map2(a, b, d, n, [](float x, float y) { return x * y; });
    case Code::div:
      return map2(a, b, d, n, [](float x, float y) { return x / y; });
    case Code::max: // NaN propagates, as in the eager kernel
      return map2(a, b, d, n, [](float x, float y) { return (x > y || x != x) ? x : y; });
    case Code::min:
      return map2(a, b, d, n, [](float x, float y) { return (x < y || x != x) ? x : y; });
    case Code::sigmoid:
      return map1(a, d, n, [](float x) { return 1.0f / (1.0f + exp_f32(-x)); });
    case Code::sin:
      return map1(a, d, n, [](float x) { return std::sin(x); });
    case Code::cos:
      return map1(a, d, n, [](float x) { return std::cos(x); });
    case Code::neg:
      return map1(a, d, n, [](float x) { return -x; });
    case Code::square:
      return map1(a, d, n, [](float x) { return x * x; });
    case Code::sqrt:
      return map1(a, d, n, [](float x) { return std::sqrt(x); });
    case Code::exp:
      return map1(a, d, n, [](float x) { return exp_f32(x); });
    case Code::log:
      return map1(a, d, n, [](float x) { return log_f32(x); });
    case Code::tanh:
      return map1(a, d, n, [](float x) { return tanh_f32(x); });
    case Code::erf:
      return map1(a, d, n, [](float x) { return erf_f32(x); });
    case Code::abs:
      return map1(a, d, n, [](float x) { return std::abs(x); });
    case Code::bcast:
      return;
  }
}

} // namespace

bool eval_f32_chain(const Compiled& c, const std::vector<array>& inputs,
                    std::vector<array>& outputs, const std::vector<InputPlan>& plans) {
  const auto& ops = c.ops();
  std::vector<Code> codes;
  codes.reserve(ops.size());
  for (const auto& op : ops) {
    auto code = classify(op);
    if (!code) return false;
    codes.push_back(*code);
  }
  for (const auto& in : inputs) {
    if (in.dtype() != float32) return false;
  }
  const int num_inputs = c.num_inputs();
  const size_t total = outputs[0].size();
  // op index -> output index, or -1
  std::vector<int> escape(ops.size(), -1);
  for (size_t j = 0; j < c.output_ops().size(); ++j)
    escape[c.output_ops()[j]] = static_cast<int>(j);

  const size_t chunks = (total + kChunk - 1) / kChunk;
  cpu::parallel_for(chunks, 16, [&](size_t c0, size_t c1) {
    const size_t slots = num_inputs + ops.size();
    std::vector<float> scratch(slots * kChunk);
    auto slot = [&](size_t k) { return scratch.data() + k * kChunk; };
    std::vector<const float*> ptr(slots, nullptr);
    for (int k = 0; k < num_inputs; ++k) {
      if (plans[k].kind == InputPlan::scalar) {
        std::fill(slot(k), slot(k) + kChunk, *inputs[k].data<float>());
      }
    }
    for (size_t ch = c0; ch < c1; ++ch) {
      size_t start = ch * kChunk;
      size_t n = std::min(kChunk, total - start);
      for (int k = 0; k < num_inputs; ++k) {
        switch (plans[k].kind) {
          case InputPlan::dense:
            ptr[k] = inputs[k].data<float>() + start;
            break;
          case InputPlan::scalar:
            ptr[k] = slot(k);
            break;
          case InputPlan::strided:
            gather_into(inputs[k], plans[k], start, n, slot(k));
            ptr[k] = slot(k);
            break;
        }
      }
      for (size_t i = 0; i < ops.size(); ++i) {
        const auto& args = ops[i].args;
        if (codes[i] == Code::bcast) {
          ptr[num_inputs + i] = ptr[args[0]];
          if (escape[i] >= 0) {
            std::copy(ptr[args[0]], ptr[args[0]] + n, outputs[escape[i]].data<float>() + start);
          }
          continue;
        }
        float* dst =
            escape[i] >= 0 ? outputs[escape[i]].data<float>() + start : slot(num_inputs + i);
        run(codes[i], ptr[args[0]], args.size() > 1 ? ptr[args[1]] : nullptr, dst, n);
        ptr[num_inputs + i] = dst;
      }
    }
  });
  return true;
}

} // namespace loom::compile_detail
