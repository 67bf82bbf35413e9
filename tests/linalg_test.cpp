// matmul: values against a double-precision reference over dtypes, NumPy's
// 1-D and batch-broadcast rules and operand layouts (row-major, transposed,
// strided, broadcast); MLX's errors; the transforms of Matmul.
#include "loom/ops/linalg.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "loom/primitives/linalg.h"
#include "loom/scheduler/scheduler.h"

using namespace loom;

namespace {

// A strided view of `base` without depending on the shape family.
class MatmulTestView : public Primitive {
 public:
  MatmulTestView(Stream s, Strides strides, int64_t offset)
      : Primitive(s), strides_(std::move(strides)), offset_(offset) {}
  void eval_cpu(const std::vector<array>& in, std::vector<array>& out) override {
    int64_t span = 1;
    for (int d = 0; d < out[0].ndim(); ++d) span += (out[0].shape(d) - 1) * strides_[d];
    out[0].copy_shared_buffer(in[0], strides_, Flags{false, false, false},
                              out[0].size() == 0 ? 0 : span, offset_);
  }
  const char* name() const override { return "MatmulTestView"; }

 private:
  Strides strides_;
  int64_t offset_;
};

array view(const array& base, Shape shape, Strides strides, int64_t offset = 0) {
  return array(std::move(shape), base.dtype(),
               std::make_shared<MatmulTestView>(default_stream(default_device()),
                                                std::move(strides), offset),
               {base});
}

// The last two axes of a row-major array swapped, as a view.
array transposed_view(const array& a) {
  Strides st = row_major_strides(a.shape());
  Shape shape = a.shape();
  const int n = a.ndim();
  std::swap(shape[n - 1], shape[n - 2]);
  std::swap(st[n - 1], st[n - 2]);
  return view(a, shape, st);
}

std::vector<double> values(array a) {
  a.eval();
  std::vector<double> out;
  const int nd = a.ndim();
  std::vector<int> idx(nd, 0);
  for (size_t i = 0; i < a.size(); ++i) {
    int64_t off = 0;
    for (int d = 0; d < nd; ++d) off += idx[d] * a.strides()[d];
    out.push_back(cast_element<double>(a.data<char>() + off * a.itemsize(), a.dtype()));
    for (int d = nd - 1; d >= 0; --d) {
      if (++idx[d] < a.shape(d)) break;
      idx[d] = 0;
    }
  }
  return out;
}

array random_array(const Shape& shape, Dtype dtype, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<double> v(shape_size(shape));
  for (auto& x : v) x = dist(gen);
  return array(v, shape, dtype);
}

// NumPy matmul in double on row-major values.
std::vector<double> reference(const std::vector<double>& a, Shape sa, const std::vector<double>& b,
                              Shape sb) {
  if (sa.size() == 1) sa.insert(sa.begin(), 1);
  if (sb.size() == 1) sb.push_back(1);
  const int M = sa[sa.size() - 2], K = sa.back(), N = sb.back();
  Shape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
  const size_t nb = std::max(ba.size(), bb.size());
  ba.insert(ba.begin(), nb - ba.size(), 1);
  bb.insert(bb.begin(), nb - bb.size(), 1);
  Shape batch(nb);
  for (size_t d = 0; d < nb; ++d) batch[d] = std::max(ba[d], bb[d]);
  std::vector<double> out;
  std::vector<int> idx(nb, 0);
  for (size_t i = 0; i < shape_size(batch); ++i) {
    int64_t oa = 0, ob = 0;
    for (size_t d = 0; d < nb; ++d) {
      oa = oa * ba[d] + (ba[d] == 1 ? 0 : idx[d]);
      ob = ob * bb[d] + (bb[d] == 1 ? 0 : idx[d]);
    }
    for (int m = 0; m < M; ++m) {
      for (int n = 0; n < N; ++n) {
        double acc = 0;
        for (int k = 0; k < K; ++k) acc += a[oa * M * K + m * K + k] * b[ob * K * N + k * N + n];
        out.push_back(acc);
      }
    }
    for (int d = static_cast<int>(nb) - 1; d >= 0; --d) {
      if (++idx[d] < batch[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

void check(const array& a, const array& b, const Shape& want_shape, double tol,
           const std::string& what) {
  array c = matmul(a, b);
  EXPECT_EQ(c.shape(), want_shape) << what;
  std::vector<double> want = reference(values(a), a.shape(), values(b), b.shape());
  std::vector<double> got = values(c);
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << what << " at " << i;
  }
}

template <typename F>
void expect_error(F&& f, const std::string& message) {
  try {
    f();
    FAIL() << "expected: " << message;
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), message);
  }
}

} // namespace

TEST(Matmul, ShapesFollowNumpy) {
  auto r = [](Shape s, uint32_t seed = 1) { return random_array(s, float32, seed); };
  check(r({2, 3}), r({3, 4}, 2), {2, 4}, 1e-5, "2d");
  check(r({3}), r({3, 4}, 2), {4}, 1e-5, "1d @ 2d");
  check(r({2, 3}), r({3}, 2), {2}, 1e-5, "2d @ 1d");
  check(r({3}), r({3}, 2), {}, 1e-5, "1d @ 1d");
  check(r({2, 1, 3, 4}), r({5, 4, 6}, 2), {2, 5, 3, 6}, 1e-5, "batch broadcast");
  check(r({4}), r({5, 4, 6}, 2), {5, 6}, 1e-5, "1d @ batch");
  check(r({5, 6, 4}), r({4}, 2), {5, 6}, 1e-5, "batch @ 1d");
  check(r({7, 3, 4}), r({4, 5}, 2), {7, 3, 5}, 1e-5, "shared second operand");
  check(r({4, 5}), r({7, 5, 3}, 2), {7, 4, 3}, 1e-5, "shared first operand");
  check(r({1, 1}), r({1, 1}, 2), {1, 1}, 1e-5, "1x1");
}

TEST(Matmul, Dtypes) {
  for (Dtype dt : {float32, float64, float16, bfloat16}) {
    double tol = dt == float64 ? 1e-12 : dt == float32 ? 1e-5 : dt == float16 ? 5e-3 : 3e-2;
    array a = random_array({3, 5, 7}, dt, 3);
    array b = random_array({7, 4}, dt, 4);
    array c = matmul(a, b);
    EXPECT_EQ(c.dtype(), dt);
    check(a, b, {3, 5, 4}, tol, "dtype");
    check(transposed_view(random_array({2, 7, 5}, dt, 5)), b, {2, 5, 4}, tol, "dtype t");
  }
  using c64 = complex64_t;
  array za(std::vector<c64>{c64(1, 2), c64(3, -1), c64(0, 1), c64(2, 2)}, {2, 2}, complex64);
  array zb(std::vector<c64>{c64(1, 0), c64(0, 1)}, {2}, complex64);
  array zc = matmul(za, zb);
  EXPECT_EQ(zc.dtype(), complex64);
  zc.eval();
  const c64* z = zc.data<c64>();
  EXPECT_EQ(z[0], c64(1, 2) + c64(3, -1) * c64(0, 1));
  EXPECT_EQ(z[1], c64(0, 1) + c64(2, 2) * c64(0, 1));
}

TEST(Matmul, OperandLayouts) {
  array a = random_array({6, 5}, float32, 11);
  array b = random_array({5, 4}, float32, 12);
  // Transposed views go to BLAS as transposes.
  array at = transposed_view(random_array({5, 6}, float32, 13));
  array bt = transposed_view(random_array({4, 5}, float32, 14));
  check(at, b, {6, 4}, 1e-5, "a^T");
  check(a, bt, {6, 4}, 1e-5, "b^T");
  check(at, bt, {6, 4}, 1e-5, "a^T b^T");
  // Rows further apart than their length (a column slice): a leading dimension.
  array wide = random_array({6, 9}, float32, 15);
  check(view(wide, {6, 5}, {9, 1}, 2), b, {6, 4}, 1e-5, "sliced rows");
  // Stepped columns need a copy.
  check(view(wide, {6, 4}, {9, 2}, 0), random_array({4, 3}, float32, 16), {6, 3}, 1e-5, "stepped");
  // A strided 1-D operand on either side.
  array vec = random_array({10}, float32, 17);
  check(view(vec, {5}, {2}), b, {4}, 1e-5, "strided vector a");
  check(a, view(vec, {5}, {2}, 1), {6}, 1e-5, "strided vector b");
  // Broadcast batch (stride 0) and broadcast rows (stride 0 inside the matrix).
  check(view(a, {3, 6, 5}, {0, 5, 1}), random_array({3, 5, 2}, float32, 18), {3, 6, 2}, 1e-5,
        "broadcast batch");
  check(view(random_array({5}, float32, 19), {6, 5}, {0, 1}), b, {6, 4}, 1e-5, "broadcast rows");
  // Batched transposed operands.
  array batched_t = transposed_view(random_array({3, 5, 6}, float32, 20));
  check(batched_t, random_array({3, 5, 4}, float32, 21), {3, 6, 4}, 1e-5, "batched a^T");
}

TEST(Matmul, BatchesSmallAndLarge) {
  // Many small products: spread over the pool.
  check(random_array({64, 8, 8}, float32, 31), random_array({64, 8, 8}, float32, 32), {64, 8, 8},
        1e-5, "small batch");
  // Shared second operand folded into one tall product.
  check(random_array({4, 33, 20}, float64, 33), random_array({20, 17}, float64, 34), {4, 33, 17},
        1e-12, "folded");
  // Large enough for OpenBLAS's own threads.
  check(random_array({2, 96, 80}, float32, 35), random_array({2, 80, 112}, float32, 36),
        {2, 96, 112}, 1e-4, "large batch");
}

TEST(Matmul, EmptyOperands) {
  array c = matmul(array(std::vector<float>{}, {2, 0}), array(std::vector<float>{}, {0, 3}));
  EXPECT_EQ(c.shape(), Shape({2, 3}));
  EXPECT_EQ(values(c), std::vector<double>(6, 0.0));
  EXPECT_EQ(matmul(array(std::vector<float>{}, {0, 4}), random_array({4, 3}, float32, 1)).shape(),
            Shape({0, 3}));
  array e = matmul(array(std::vector<float>{}, {0, 2, 4}), random_array({4, 3}, float32, 1));
  EXPECT_EQ(e.shape(), Shape({0, 2, 3}));
  e.eval();
}

TEST(Matmul, Errors) {
  auto ones = [](Shape s, Dtype dt = float32) {
    return array(std::vector<float>(shape_size(s), 1.0f), s, dt);
  };
  expect_error(
      [&] {
        matmul(ones({2, 3}), ones({4, 5}));
      },
      "[matmul] Last dimension of first input with shape (2,3) must match second to "
      "last dimension of second input with shape (4,5).");
  expect_error(
      [&] {
        matmul(ones({3}), ones({4, 5}));
      },
      "[matmul] Last dimension of first input with shape (1,3) must match second to "
      "last dimension of second input with shape (4,5).");
  expect_error([&] { matmul(ones({3}), ones({4})); },
               "[matmul] Last dimension of first input with shape (1,3) must match second to "
               "last dimension of second input with shape (4,1).");
  expect_error([&] { matmul(array(1.0f), ones({3})); },
               "[matmul] Got 0 dimension input. Inputs must have at least one dimension.");
  expect_error(
      [&] {
        matmul(ones({2, 3}, int32), ones({3, 2}, int32));
      },
      "[matmul] Only inexact types are supported but int32 and int32 were provided "
      "which results in int32, which is not a floating point type.");
  expect_error(
      [&] {
        matmul(ones({2, 3}, bool_), ones({3, 2}, bool_));
      },
      "[matmul] Only inexact types are supported but bool and bool were provided which "
      "results in bool, which is not a floating point type.");
  expect_error(
      [&] {
        matmul(ones({2, 2, 3}), ones({3, 3, 5}));
      },
      "[broadcast_shapes] Shapes (2) and (3) cannot be broadcast.");
}

TEST(Matmul, MixedDtypesPromote) {
  array a = random_array({2, 3}, float16, 1);
  array b = random_array({3, 2}, float32, 2);
  EXPECT_EQ(matmul(a, b).dtype(), float32);
  check(a, b, {2, 2}, 1e-5, "f16 @ f32");
  EXPECT_EQ(matmul(random_array({2, 3}, bfloat16, 1), random_array({3, 2}, float16, 2)).dtype(),
            float32);
  EXPECT_EQ(matmul(random_array({2, 3}, int32, 1), b).dtype(), float32);
  EXPECT_EQ(matmul(random_array({2, 3}, float64, 1), b).dtype(), float64);
}

// --- transforms ----------------------------------------------------------------

namespace {

std::vector<array> matmul_vjp(const array& a, const array& b, const array& cot) {
  array out = matmul(a, b);
  return out.primitive().vjp({a, b}, {cot}, {0, 1}, {out});
}

// d(sum(cot * (a @ b)))/da = cot @ b^T, summed over broadcast batch dims.
void check_vjp(const Shape& sa, const Shape& sb) {
  array a = random_array(sa, float64, 41);
  array b = random_array(sb, float64, 42);
  array out = matmul(a, b);
  array cot = random_array(out.shape(), float64, 43);
  auto grads = matmul_vjp(a, b, cot);
  ASSERT_EQ(grads[0].shape(), sa);
  ASSERT_EQ(grads[1].shape(), sb);
  // Finite differences are exact for a bilinear map: perturb each entry.
  std::vector<double> av = values(a), bv = values(b), cv = values(cot);
  auto objective = [&](const std::vector<double>& x, const std::vector<double>& y) {
    std::vector<double> o = reference(x, sa, y, sb);
    double s = 0;
    for (size_t i = 0; i < o.size(); ++i) s += o[i] * cv[i];
    return s;
  };
  const double base = objective(av, bv);
  std::vector<double> ga = values(grads[0]), gb = values(grads[1]);
  for (size_t i = 0; i < av.size(); ++i) {
    auto x = av;
    x[i] += 1.0;
    EXPECT_NEAR(ga[i], objective(x, bv) - base, 1e-9) << "a " << i;
  }
  for (size_t i = 0; i < bv.size(); ++i) {
    auto y = bv;
    y[i] += 1.0;
    EXPECT_NEAR(gb[i], objective(av, y) - base, 1e-9) << "b " << i;
  }
}

} // namespace

TEST(MatmulGrad, VjpBothArgumentsWithBroadcasting) {
  check_vjp({2, 3}, {3, 4});
  check_vjp({3}, {3, 4});
  check_vjp({2, 3}, {3});
  check_vjp({3}, {3});
  check_vjp({2, 3}, {5, 3, 4});
  check_vjp({5, 1, 2, 3}, {4, 3, 2});
  check_vjp({4}, {2, 4, 3});
}

TEST(MatmulGrad, Jvp) {
  array a = random_array({2, 3}, float32, 51);
  array b = random_array({3, 4}, float32, 52);
  array ta = random_array({2, 3}, float32, 53);
  array tb = random_array({3, 4}, float32, 54);
  array out = matmul(a, b);
  array t = out.primitive().jvp({a, b}, {ta, tb}, {0, 1})[0];
  std::vector<double> want = reference(values(ta), {2, 3}, values(b), {3, 4});
  std::vector<double> second = reference(values(a), {2, 3}, values(tb), {3, 4});
  std::vector<double> got = values(t);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i] + second[i], 1e-5);
  array only_b = out.primitive().jvp({a, b}, {tb}, {1})[0];
  got = values(only_b);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], second[i], 1e-5);
}

TEST(MatmulVmap, BatchesEitherOperand) {
  auto vmapped = [](const array& a, int ba, const array& b, int bb) {
    Matmul m(default_stream(default_device()));
    auto [outs, axes] = m.vmap({a, b}, {ba, bb});
    EXPECT_EQ(axes[0], 0);
    return outs[0];
  };
  // a mapped on axis 1: per sample (2, 3) @ (3, 4).
  array a = random_array({2, 5, 3}, float32, 61);
  array b = random_array({3, 4}, float32, 62);
  array out = vmapped(a, 1, b, -1);
  EXPECT_EQ(out.shape(), Shape({5, 2, 4}));
  // Per-sample vectors on both sides: a dot product per sample.
  array u = random_array({5, 3}, float32, 63);
  array v = random_array({3, 5}, float32, 64);
  array dots = vmapped(u, 0, v, 1);
  EXPECT_EQ(dots.shape(), Shape({5}));
  std::vector<double> uv = values(u), vv = values(v), dv = values(dots);
  for (int s = 0; s < 5; ++s) {
    double want = 0;
    for (int k = 0; k < 3; ++k) want += uv[s * 3 + k] * vv[k * 5 + s];
    EXPECT_NEAR(dv[s], want, 1e-5);
  }
  // Unbatched 1-D first operand, batched matrices.
  EXPECT_EQ(
      vmapped(random_array({3}, float32, 65), -1, random_array({5, 3, 2}, float32, 66), 0).shape(),
      Shape({5, 2}));
  // Batched vector against an unbatched batch of matrices: alignment matters.
  EXPECT_EQ(vmapped(random_array({5, 3}, float32, 67), 0, random_array({7, 3, 2}, float32, 68), -1)
                .shape(),
            Shape({5, 7, 2}));
  // Batched matrices against an unbatched stack with its own batch axis.
  EXPECT_EQ(
      vmapped(random_array({5, 4, 3}, float32, 69), 0, random_array({7, 3, 2}, float32, 70), -1)
          .shape(),
      Shape({5, 7, 4, 2}));
}
