// mx.linalg through LAPACK from C++: reconstructions (Q R, U S Vt, L Lᵀ, A X),
// eigenpairs, determinants, the matmul family, errors, and the primitives'
// state (equivalence and the import registry).
#include "loom/primitives/linalg_decomp.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "loom/ops.h"
#include "loom/primitives/linalg.h"

using namespace loom;

namespace {

array random_matrix(Shape shape, uint32_t seed, Dtype dtype = float64) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> dist;
  std::vector<double> v(shape_size(shape));
  for (auto& x : v) x = dist(gen);
  return astype(array(v, shape, float64), dtype);
}

double max_abs_diff(const array& a, const array& b) {
  array d = max(abs(subtract(astype(a, float64), astype(b, float64))));
  d.eval();
  return d.item<double>();
}

array mT(const array& x) { return swapaxes(x, -1, -2); }

} // namespace

TEST(LinalgDecomp, QrReconstructsTallWideAndBatched) {
  for (Shape shape : {Shape{5, 3}, Shape{3, 5}, Shape{2, 4, 4}}) {
    array a = random_matrix(shape, 1);
    auto qr = linalg::qr(a, Device(Device::cpu));
    EXPECT_LT(max_abs_diff(matmul(qr[0], qr[1]), a), 1e-12) << shape_to_string(shape);
    EXPECT_LT(max_abs_diff(tril(qr[1], -1), zeros_like(qr[1])), 0.0 + 1e-300);
  }
}

TEST(LinalgDecomp, SvdReconstructsWithFullFactors) {
  array a = random_matrix({6, 4}, 2);
  auto usv = linalg::svd(a, true, Device(Device::cpu));
  ASSERT_EQ(usv[0].shape(), (Shape{6, 6}));
  ASSERT_EQ(usv[2].shape(), (Shape{4, 4}));
  array u1 = slice(usv[0], Shape{0, 0}, Shape{6, 4}, Shape{1, 1});
  array recon = matmul(multiply(u1, expand_dims(usv[1], 0)), usv[2]);
  EXPECT_LT(max_abs_diff(recon, a), 1e-12);
  array s_only = linalg::svd(a, false, Device(Device::cpu))[0];
  EXPECT_LT(max_abs_diff(s_only, usv[1]), 1e-12);
}

TEST(LinalgDecomp, CholeskyInverseSolve) {
  array x = random_matrix({4, 4}, 3);
  array spd = add(matmul(x, mT(x)), multiply(eye(4, 4, 0, float64), array(4.0, float64)));
  array l = linalg::cholesky(spd, false, Device(Device::cpu));
  EXPECT_LT(max_abs_diff(matmul(l, mT(l)), spd), 1e-12);
  array inv = linalg::inv(spd, Device(Device::cpu));
  EXPECT_LT(max_abs_diff(matmul(inv, spd), eye(4, 4, 0, float64)), 1e-12);
  array b = random_matrix({4, 2}, 4);
  array sol = linalg::solve(spd, b, Device(Device::cpu));
  EXPECT_LT(max_abs_diff(matmul(spd, sol), b), 1e-12);
  EXPECT_LT(max_abs_diff(linalg::cholesky_inv(l, false, Device(Device::cpu)), inv), 1e-12);
}

TEST(LinalgDecomp, EighGivesEigenpairsAndDetMatchesEigenvalues) {
  array x = random_matrix({5, 5}, 5);
  array sym = add(x, mT(x));
  auto wv = linalg::eigh(sym, "L", Device(Device::cpu));
  EXPECT_LT(max_abs_diff(matmul(sym, wv[1]), multiply(wv[1], expand_dims(wv[0], 0))), 1e-12);
  array det = linalg::det(sym, Device(Device::cpu));
  array prod_w = prod(wv[0]);
  EXPECT_LT(max_abs_diff(det, prod_w), 1e-9 * std::max(1.0, std::abs(prod_w.item<double>())));
}

TEST(LinalgDecomp, ErrorsNameTheOp) {
  EXPECT_THROW(linalg::inv(ones({2, 3}), Device(Device::cpu)), std::invalid_argument);
  EXPECT_THROW(linalg::qr(ones({3}), Device(Device::cpu)), std::invalid_argument);
  EXPECT_THROW(linalg::svd(ones({3, 3}, int32), true, Device(Device::cpu)), std::invalid_argument);
  // A GPU stream is refused: by the op where a GPU exists, by the device
  // lookup in a CPU-only build.
  try {
    linalg::inv(ones({2, 2}), Device(Device::gpu));
    FAIL() << "a GPU stream must be refused";
  } catch (const std::exception& e) {
    if (is_available(Device(Device::gpu))) {
      EXPECT_NE(std::string(e.what()).find("linalg::inv"), std::string::npos) << e.what();
    }
  }
  array singular = array({1.0f, 2.0f, 2.0f, 4.0f}, {2, 2});
  array r = linalg::inv(singular, Device(Device::cpu));
  EXPECT_THROW(r.eval(), std::runtime_error);
}

TEST(LinalgDecomp, GatherAndSegmentedProductsMatchLoops) {
  array a = random_matrix({3, 2, 4}, 6, float32);
  array b = random_matrix({2, 4, 3}, 7, float32);
  array li = array({2u, 0u, 1u}, {3}, uint32);
  array ri = array({1u, 1u, 0u}, {3}, uint32);
  array got = gather_mm(a, b, li, ri);
  array want = matmul(take(a, li, 0), take(b, ri, 0));
  EXPECT_LT(max_abs_diff(got, want), 1e-5);

  array x = random_matrix({3, 6}, 8, float32);
  array y = random_matrix({6, 2}, 9, float32);
  array seg = array({0, 2, 2, 6}, {2, 2}, int32);
  array s = segmented_mm(x, y, seg);
  array first = matmul(slice(x, Shape{0, 0}, Shape{3, 2}, Shape{1, 1}),
                       slice(y, Shape{0, 0}, Shape{2, 2}, Shape{1, 1}));
  array second = matmul(slice(x, Shape{0, 2}, Shape{3, 6}, Shape{1, 1}),
                        slice(y, Shape{2, 0}, Shape{6, 2}, Shape{1, 1}));
  EXPECT_LT(max_abs_diff(s, stack({first, second})), 1e-5);
}

TEST(LinalgDecomp, StateRoundTripsThroughTheRegistry) {
  Stream s = to_stream(Device(Device::cpu));
  for (auto prim : std::vector<std::shared_ptr<Primitive>>{
           std::make_shared<Inverse>(s, true, true), std::make_shared<Cholesky>(s, true),
           std::make_shared<SVD>(s, false), std::make_shared<Eigh>(s, "U", false),
           std::make_shared<Eig>(s, true), std::make_shared<QRF>(s), std::make_shared<LUF>(s),
           std::make_shared<Solve>(s), std::make_shared<GatherMM>(s, true),
           std::make_shared<SegmentedMM>(s)}) {
    auto rebuilt = make_primitive(prim->name(), s, prim->state());
    EXPECT_TRUE(prim->is_equivalent(*rebuilt)) << prim->name();
    EXPECT_EQ(prim->state(), rebuilt->state()) << prim->name();
  }
  EXPECT_FALSE(Inverse(s, true, true).is_equivalent(Inverse(s, true, false)));
  EXPECT_FALSE(Eigh(s, "U", true).is_equivalent(Eigh(s, "L", true)));
}
