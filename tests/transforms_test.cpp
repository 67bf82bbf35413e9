// The transform engine: vjp, jvp, vmap, value_and_grad, checkpoint and
// custom_function, their composition, and that they free what they build.
#include <gtest/gtest.h>

#include <cmath>

#include "loom/ops.h"
#include "loom/primitives/primitive.h"

using namespace loom;

namespace {

float scalar(array a) { return a.item<float>(); }

std::vector<float> values(array a) {
  a = astype(a, float32);
  a.eval();
  auto c = copy(a);
  c.eval();
  return std::vector<float>(c.data<float>(), c.data<float>() + c.size());
}

array sin_sum(const array& x) { return sum(sin(x)); }

} // namespace

TEST(Transforms, VjpOfSin) {
  auto [outs, grads] = vjp([](const std::vector<array>& in) { return std::vector{sin(in[0])}; },
                           {array(1.0f)}, {array(1.0f)});
  EXPECT_NEAR(scalar(outs[0]), std::sin(1.0f), 1e-6);
  EXPECT_NEAR(scalar(grads[0]), std::cos(1.0f), 1e-6);
}

TEST(Transforms, JvpOfSin) {
  auto [outs, tangents] = jvp([](const std::vector<array>& in) { return std::vector{sin(in[0])}; },
                              {array(1.0f)}, {array(2.0f)});
  EXPECT_NEAR(scalar(tangents[0]), 2.0f * std::cos(1.0f), 1e-6);
}

TEST(Transforms, SecondDerivative) {
  ArrayFn f = [](const std::vector<array>& in) { return std::vector{sin(in[0])}; };
  auto df = value_and_grad(f, {0});
  ArrayFn df_fn = [&](const std::vector<array>& in) { return df(in).second; };
  auto d2f = value_and_grad(df_fn, {0});
  float x = static_cast<float>(M_PI / 2);
  EXPECT_NEAR(scalar(d2f({array(x)}).second[0]), -1.0f, 1e-6);
}

TEST(Transforms, ValueAndGradArgnums) {
  ArrayFn loss = [](const std::vector<array>& in) {
    return std::vector{mean(square(subtract(multiply(in[0], in[1]), in[2])))};
  };
  array w(1.0f);
  array x({0.5f, -0.5f});
  array y({1.5f, -1.5f});
  auto [value, dw] = value_and_grad(loss, {0})({w, x, y});
  EXPECT_NEAR(scalar(dw[0]), -1.0f, 1e-6);
  auto [value2, dx] = value_and_grad(loss, {1})({w, x, y});
  auto g = values(dx[0]);
  EXPECT_NEAR(g[0], -1.0f, 1e-6);
  EXPECT_NEAR(g[1], 1.0f, 1e-6);
}

TEST(Transforms, VmapMatchesTransposedAdd) {
  array xs = reshape(arange(0, 12, 1, float32), {4, 3});
  array ys = reshape(arange(0, 12, 1, float32), {3, 4});
  ArrayFn add_fn = [](const std::vector<array>& in) { return std::vector{add(in[0], in[1])}; };
  auto out = vmap(add_fn, {0, 1}, {0})({xs, ys})[0];
  EXPECT_EQ(out.shape(), (Shape{4, 3}));
  EXPECT_EQ(values(out), values(add(xs, transpose(ys))));
}

TEST(Transforms, VmapOfGradAndGradOfVmap) {
  array xs = reshape(arange(0, 6, 1, float32), {3, 2});
  ArrayFn f = [](const std::vector<array>& in) { return std::vector{sin_sum(in[0])}; };
  auto grad_f = value_and_grad(f, {0});
  ArrayFn grad_fn = [&](const std::vector<array>& in) { return grad_f(in).second; };
  auto per_row = vmap(grad_fn, {0}, {0})({xs})[0];
  EXPECT_EQ(values(per_row), values(cos(xs)));

  ArrayFn batched_sum = [&](const std::vector<array>& in) {
    return std::vector{sum(vmap(f, {0}, {0})(in)[0])};
  };
  auto g = value_and_grad(batched_sum, {0})({xs}).second[0];
  EXPECT_EQ(values(g), values(cos(xs)));
}

TEST(Transforms, CustomFunctionRulesAndCaptureWarning) {
  static int warnings = 0;
  set_capture_warning_hook([](const char*) { ++warnings; });
  array y(3.0f);
  ArrayFn body = [&](const std::vector<array>& in) { return std::vector{multiply(in[0], y)}; };
  CustomVjp rule = [](const std::vector<array>& primals, const std::vector<array>& cotans,
                      const std::vector<array>&) {
    return std::vector{multiply(cotans[0], array(10.0f))};
  };
  ArrayFn f = custom_function(body, rule, nullptr, nullptr);
  // The custom rule is used for the explicit input.
  auto dx = value_and_grad(f, {0})({array(2.0f)}).second[0];
  EXPECT_EQ(scalar(dx), 10.0f);
  EXPECT_EQ(warnings, 0);
  // A captured array being differentiated gets zero, and a warning.
  ArrayFn g = [&](const std::vector<array>& in) {
    y = in[1];
    return f({in[0]});
  };
  auto dy = value_and_grad(g, {1})({array(2.0f), array(3.0f)}).second[0];
  EXPECT_EQ(scalar(dy), 0.0f);
  EXPECT_EQ(warnings, 1);
  set_capture_warning_hook(nullptr);
}

TEST(Transforms, CheckpointGradientMatches) {
  ArrayFn f = [](const std::vector<array>& in) {
    return std::vector{sum(multiply(sin(in[0]), exp(in[0])))};
  };
  array x({0.1f, 0.5f, 1.0f});
  auto plain = value_and_grad(f, {0})({x}).second[0];
  auto checkpointed = value_and_grad(checkpoint(f), {0})({x}).second[0];
  auto a = values(plain), b = values(checkpointed);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6);
}

TEST(Transforms, MissingRuleNamesPrimitive) {
  class NoRules : public Primitive {
   public:
    using Primitive::Primitive;
    void eval_cpu(const std::vector<array>& in, std::vector<array>& out) override {
      out[0].copy_shared_buffer(in[0]);
    }
    const char* name() const override { return "NoRules"; }
  };
  ArrayFn f = [](const std::vector<array>& in) {
    return std::vector{array(in[0].shape(), in[0].dtype(),
                             std::make_shared<NoRules>(default_stream(default_device())),
                             {in[0]})};
  };
  try {
    vjp(f, {array(1.0f)}, {array(1.0f)});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("vjp not implemented for NoRules"), std::string::npos);
  }
  try {
    vmap(f, {0}, {0})({array({1.0f, 2.0f})});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("vmap not implemented for NoRules"), std::string::npos);
  }
}

TEST(Transforms, NoLeakAcrossRepeatedTransforms) {
  synchronize();
  size_t base = get_active_memory();
  for (int i = 0; i < 50; ++i) {
    // Explicit keys: the default key is process state created on first use.
    array w = random::normal({64, 64}, float32, array(0.0f), array(1.0f), random::key(i));
    array x = random::normal({8, 64}, float32, array(0.0f), array(1.0f), random::key(i + 1000));
    ArrayFn loss = [](const std::vector<array>& in) {
      return std::vector{sum(tanh(matmul(in[1], in[0])))};
    };
    auto [value, grads] = value_and_grad(loss, {0})({w, x});
    auto batched = vmap(loss, {-1, 0}, {0})({w, reshape(x, {8, 1, 64})});
    auto [o, t] = jvp(loss, {w, x}, {ones_like(w), zeros_like(x)});
    eval({value[0], grads[0], batched[0], t[0]});
  }
  synchronize();
  EXPECT_EQ(get_active_memory(), base);
}
