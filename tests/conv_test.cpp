// Convolution: values against a direct loop in double precision (1-D and 2-D,
// strides, padding, dilations, groups, flip), the transposed form, MLX's
// errors, the state round trip through the primitive registry, and the
// transforms (vjp against finite differences of the reference).
#include "loom/ops/conv.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "loom/backend/cpu/conv_direct.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/reduce.h"
#include "loom/primitives/conv.h"
#include "loom/transforms/transforms.h"

using namespace loom;

namespace {

std::vector<float> random_values(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist;
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

// Direct 2-D reference: x (N, H, W, C), w (O, KH, KW, C/G), one value per axis.
std::vector<double> reference(const std::vector<float>& x, const Shape& xs,
                              const std::vector<float>& w, const Shape& ws, const ConvParams& p,
                              const Shape& os) {
  const int64_t N = xs[0], H = xs[1], W = xs[2], C = xs[3];
  const int64_t O = ws[0], KH = ws[1], KW = ws[2], G = p.groups, Cg = C / G, Og = O / G;
  std::vector<double> out(shape_size(os), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t oh = 0; oh < os[1]; ++oh)
      for (int64_t ow = 0; ow < os[2]; ++ow)
        for (int64_t o = 0; o < O; ++o) {
          double acc = 0;
          const int64_t g = o / Og;
          for (int64_t kh = 0; kh < KH; ++kh)
            for (int64_t kw = 0; kw < KW; ++kw) {
              const int64_t th = p.flip ? KH - 1 - kh : kh;
              const int64_t tw = p.flip ? KW - 1 - kw : kw;
              const int64_t ph = oh * p.stride[0] + th * p.kernel_dilation[0] - p.padding_lo[0];
              const int64_t pw = ow * p.stride[1] + tw * p.kernel_dilation[1] - p.padding_lo[1];
              if (ph < 0 || pw < 0 || ph % p.input_dilation[0] || pw % p.input_dilation[1])
                continue;
              const int64_t ih = ph / p.input_dilation[0], iw = pw / p.input_dilation[1];
              if (ih >= H || iw >= W) continue;
              for (int64_t c = 0; c < Cg; ++c) {
                acc += double(x[((n * H + ih) * W + iw) * C + g * Cg + c]) *
                       w[((o * KH + kh) * KW + kw) * Cg + c];
              }
            }
          out[((n * os[1] + oh) * os[2] + ow) * O + o] = acc;
        }
  return out;
}

void expect_close(const array& a, const std::vector<double>& ref, double tol = 1e-4) {
  array c = a;
  c.eval();
  ASSERT_EQ(static_cast<size_t>(c.size()), ref.size());
  const float* p = c.data<float>();
  for (size_t i = 0; i < ref.size(); ++i)
    ASSERT_NEAR(p[i], ref[i], tol * (1 + std::abs(ref[i]))) << i;
}

struct Case {
  Shape xs, ws;
  ConvParams p;
};

} // namespace

TEST(Conv, MatchesDirectLoop) {
  std::vector<Case> cases = {
      {{2, 7, 6, 4}, {6, 3, 2, 4}, {{1, 1}, {0, 0}, {0, 0}, {1, 1}, {1, 1}, 1, false}},
      {{2, 7, 6, 4}, {6, 3, 2, 2}, {{2, 1}, {1, 0}, {2, 1}, {1, 2}, {1, 1}, 2, false}},
      {{1, 5, 6, 3}, {2, 2, 3, 3}, {{1, 2}, {2, 1}, {0, 2}, {1, 1}, {2, 3}, 1, true}},
      {{2, 6, 6, 5}, {5, 3, 3, 1}, {{1, 1}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 5, false}}, // depthwise
      {{2, 6, 6, 6}, {4, 1, 1, 3}, {{1, 1}, {0, 0}, {0, 0}, {1, 1}, {1, 1}, 2, false}}, // 1x1
  };
  unsigned seed = 1;
  for (const auto& c : cases) {
    auto xv = random_values(shape_size(c.xs), seed++);
    auto wv = random_values(shape_size(c.ws), seed++);
    array x(xv, c.xs, float32);
    array w(wv, c.ws, float32);
    array out = conv_general(x, w, c.p.stride, c.p.padding_lo, c.p.padding_hi, c.p.kernel_dilation,
                             c.p.input_dilation, c.p.groups, c.p.flip);
    expect_close(out, reference(xv, c.xs, wv, c.ws, c.p, out.shape()));
  }
}

TEST(Conv, TransposeShapesAndErrors) {
  array x = ones({2, 8, 3});
  EXPECT_EQ(conv_transpose1d(x, ones({4, 3, 3})).shape(), (Shape{2, 10, 4}));
  EXPECT_EQ(conv_transpose1d(x, ones({4, 3, 3}), 2, 0, 1, 1).shape(), (Shape{2, 18, 4}));
  EXPECT_EQ(convolve(ones({5}), ones({3}), "same").shape(), (Shape{5}));
  EXPECT_THROW(conv1d(x, ones({4, 3, 2})), std::invalid_argument);
  EXPECT_THROW(conv1d(x, ones({4, 3, 3}), 0), std::invalid_argument);
  EXPECT_THROW(conv1d(astype(x, int32), ones({4, 3, 3})), std::invalid_argument);
  EXPECT_THROW(conv1d(x, ones({4, 3, 3}), 1, 0, 1, 0), std::invalid_argument);
  EXPECT_THROW(convolve(ones({5}), ones({3}), "bad"), std::invalid_argument);
}

TEST(Conv, StateRoundTrip) {
  array out = conv_general(ones({1, 6, 2}), ones({3, 2, 2}), {2}, {1}, {0}, {1}, {2}, 1, true);
  auto prim = out.primitive_ptr();
  ASSERT_NE(prim, nullptr);
  auto rebuilt = make_primitive(prim->name(), prim->stream(), prim->state());
  EXPECT_TRUE(rebuilt->is_equivalent(*prim));
  EXPECT_EQ(rebuilt->state(), prim->state());
}

TEST(Conv, GradientsMatchFiniteDifferences) {
  const Shape xs{1, 5, 4, 2}, ws{2, 2, 3, 2};
  ConvParams p{{2, 1}, {1, 0}, {0, 2}, {1, 1}, {1, 1}, 1, false};
  auto xv = random_values(shape_size(xs), 11);
  auto wv = random_values(shape_size(ws), 12);
  array x(xv, xs, float32), w(wv, ws, float32);
  auto loss = [&](const std::vector<array>& in) {
    array y = conv_general(in[0], in[1], p.stride, p.padding_lo, p.padding_hi);
    return std::vector<array>{sum(multiply(y, y))};
  };
  auto grads = vjp(loss, {x, w}, {array(1.0f)}).second;
  auto ref_loss = [&](const std::vector<float>& a, const std::vector<float>& b) {
    Shape os = conv_general(x, w, p.stride, p.padding_lo, p.padding_hi).shape();
    double s = 0;
    for (double v : reference(a, xs, b, ws, p, os)) s += v * v;
    return s;
  };
  for (int arg = 0; arg < 2; ++arg) {
    // The weight's gradient is a transposed view: read it in row-major order.
    array g = contiguous(grads[arg]);
    g.eval();
    auto base = arg == 0 ? xv : wv;
    for (size_t i = 0; i < base.size(); ++i) {
      auto plus = base, minus = base;
      plus[i] += 1e-2f;
      minus[i] -= 1e-2f;
      double num = arg == 0 ? (ref_loss(plus, wv) - ref_loss(minus, wv))
                            : (ref_loss(xv, plus) - ref_loss(xv, minus));
      num /= (double(plus[i]) - double(minus[i]));
      EXPECT_NEAR(g.data<float>()[i], num, 2e-3 * (1 + std::abs(num))) << arg << " " << i;
    }
  }
}

// The direct AVX-512 kernels called by themselves, on shapes the routing
// would send elsewhere too: output channels that fill no vector, one vector
// plus a lane, several 64-channel blocks with a ragged last one; input
// channels from 1 up; strides, padding, dilations, groups and flip; a row
// count that ends in a partial tile.
void check_direct_kernel() {
  std::vector<Case> cases = {
      {{1, 5, 7, 3}, {1, 3, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, false}},
      {{2, 6, 5, 8}, {17, 3, 3, 8}, {{1, 1}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, false}},
      {{1, 9, 8, 13}, {70, 3, 2, 13}, {{2, 1}, {1, 0}, {2, 1}, {1, 2}, {1, 1}, 1, true}},
      {{2, 7, 7, 6}, {130, 1, 1, 6}, {{1, 1}, {0, 0}, {0, 0}, {1, 1}, {1, 1}, 1, false}},
      {{1, 6, 6, 10}, {40, 3, 3, 5}, {{1, 2}, {2, 1}, {0, 2}, {2, 1}, {1, 1}, 2, false}},
      {{1, 5, 6, 4}, {48, 2, 3, 4}, {{1, 1}, {2, 1}, {1, 2}, {1, 1}, {2, 3}, 1, true}},
      {{3, 4, 4, 64}, {64, 3, 3, 64}, {{1, 1}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, false}},
      {{1, 3, 3, 2}, {16, 5, 5, 2}, {{1, 1}, {4, 4}, {4, 4}, {1, 1}, {1, 1}, 1, false}},
      // More taps than the tile's pointer table holds on the stack.
      {{1, 9, 8, 5}, {20, 7, 7, 5}, {{1, 1}, {3, 3}, {3, 3}, {1, 1}, {1, 1}, 1, false}},
  };
  unsigned seed = 100;
  for (const auto& c : cases) {
    auto xv = random_values(shape_size(c.xs), seed++);
    auto wv = random_values(shape_size(c.ws), seed++);
    const Shape os = conv_output_shape(c.xs, c.ws, c.p);
    const cpu::ConvGeometry g = cpu::make_conv_geometry(c.xs, c.ws, os, c.p);
    std::vector<float> got(shape_size(os), std::nanf(""));
    cpu::conv_direct_f32(g, xv.data(), wv.data(), got.data());
    auto ref = reference(xv, c.xs, wv, c.ws, c.p, os);
    for (size_t i = 0; i < ref.size(); ++i)
      ASSERT_NEAR(got[i], ref[i], 1e-4 * (1 + std::abs(ref[i]))) << seed << " " << i;
  }
}

TEST(Conv, DirectKernelMatchesDirectLoop) {
  if (!cpu::conv_direct_available()) GTEST_SKIP() << "no AVX2 or AVX-512 on this CPU";
  check_direct_kernel();
}

// The weight gradient through the direct kernel (enough channels for the
// routing to choose it: 8+ input, 16+ output), against sums over the direct
// loop's positions; input channels not a multiple of the tile, output
// channels with a ragged last vector and a second block.
void check_weight_gradient() {
  struct WCase {
    Shape xs, ws;
    std::vector<int> stride, pad, dil;
  };
  std::vector<WCase> cases = {
      {{2, 6, 7, 8}, {16, 3, 3, 8}, {1, 1}, {1, 1}, {1, 1}},
      {{3, 7, 5, 13}, {70, 3, 2, 13}, {2, 1}, {1, 0}, {1, 2}},
      {{1, 9, 9, 20}, {33, 2, 2, 20}, {2, 2}, {0, 1}, {2, 1}},
  };
  unsigned seed = 200;
  for (const auto& c : cases) {
    auto xv = random_values(shape_size(c.xs), seed++);
    auto wv = random_values(shape_size(c.ws), seed++);
    array x(xv, c.xs, float32), w(wv, c.ws, float32);
    auto f = [&](const std::vector<array>& in) {
      return std::vector<array>{conv2d(in[0], in[1], {c.stride[0], c.stride[1]},
                                       {c.pad[0], c.pad[1]}, {c.dil[0], c.dil[1]})};
    };
    const Shape os = f({x, w})[0].shape();
    auto cv = random_values(shape_size(os), seed++);
    array cot(cv, os, float32);
    array gw = contiguous(vjp(f, {x, w}, {cot}).second[1]);
    gw.eval();
    const int64_t N = c.xs[0], H = c.xs[1], W = c.xs[2], C = c.xs[3];
    const int64_t O = c.ws[0], KH = c.ws[1], KW = c.ws[2];
    for (int64_t o = 0; o < O; ++o)
      for (int64_t kh = 0; kh < KH; ++kh)
        for (int64_t kw = 0; kw < KW; ++kw)
          for (int64_t ch = 0; ch < C; ++ch) {
            double want = 0;
            for (int64_t n = 0; n < N; ++n)
              for (int64_t oh = 0; oh < os[1]; ++oh)
                for (int64_t ow = 0; ow < os[2]; ++ow) {
                  const int64_t ih = oh * c.stride[0] + kh * c.dil[0] - c.pad[0];
                  const int64_t iw = ow * c.stride[1] + kw * c.dil[1] - c.pad[1];
                  if (ih < 0 || iw < 0 || ih >= H || iw >= W) continue;
                  want += double(xv[((n * H + ih) * W + iw) * C + ch]) *
                          cv[((n * os[1] + oh) * os[2] + ow) * O + o];
                }
            const double got = gw.data<float>()[((o * KH + kh) * KW + kw) * C + ch];
            ASSERT_NEAR(got, want, 1e-4 * (1 + std::abs(want))) << o << " " << kh << kw << ch;
          }
  }
}

TEST(Conv, DirectWeightGradientMatchesDirectLoop) { check_weight_gradient(); }

// The AVX2 kernels (16 channels at a time in 8-float vectors) where the CPU
// also has AVX-512.
TEST(Conv, DirectKernelAvx2MatchesDirectLoop) {
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) GTEST_SKIP();
  const int previous = cpu::conv_direct_cap_isa(1);
  check_direct_kernel();
  check_weight_gradient();
  cpu::conv_direct_cap_isa(previous);
}
