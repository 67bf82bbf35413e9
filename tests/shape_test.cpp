// Shape and indexing ops: values, views (shared buffers), layouts, errors and
// their differentiation rules.
#include "loom/ops/shape.h"
#include "loom/ops/slice.h"

#include <gtest/gtest.h>

#include <numeric>

#include "loom/ops/creation.h"
#include "loom/primitives/primitive.h"
#include "loom/primitives/shape.h"
#include "loom/scheduler/scheduler.h"
#include "loom/transforms/transforms.h"

using namespace loom;

namespace {

// Elements in logical row-major order, read through the array's strides.
template <typename T>
std::vector<T> values(array a) {
  a.eval();
  std::vector<T> out;
  out.reserve(a.size());
  std::vector<int32_t> idx(a.ndim(), 0);
  const T* base = a.data<T>();
  for (size_t n = 0; n < a.size(); ++n) {
    int64_t off = 0;
    for (int d = 0; d < a.ndim(); ++d) off += idx[d] * a.strides()[d];
    out.push_back(base[off]);
    for (int d = a.ndim() - 1; d >= 0; --d) {
      if (++idx[d] < a.shape(d)) break;
      idx[d] = 0;
    }
  }
  return out;
}

// 0, 1, 2, ... as float32 in the given shape.
array iota(const Shape& shape) {
  std::vector<float> v(shape_size(shape));
  std::iota(v.begin(), v.end(), 0.0f);
  return array(v, shape);
}

// NumPy-style reference: element of a row-major `shape` at multi-index.
int64_t flat_index(const Shape& shape, const std::vector<int64_t>& idx) {
  int64_t f = 0;
  for (size_t d = 0; d < shape.size(); ++d) f = f * shape[d] + idx[d];
  return f;
}

bool shares_buffer(const array& a, const array& b) {
  return a.data_shared_ptr() == b.data_shared_ptr();
}

template <typename E, typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("wrong exception type: ") + e.what();
  }
  return "no exception";
}

} // namespace

// --- reshape ----------------------------------------------------------------------

TEST(ShapeReshape, ValuesAndView) {
  array a = iota({2, 3, 4});
  array b = reshape(a, {4, -1});
  EXPECT_EQ(b.shape(), (Shape{4, 6}));
  b.eval();
  a.eval();
  EXPECT_TRUE(shares_buffer(a, b));
  EXPECT_TRUE(b.flags().row_contiguous);
  EXPECT_EQ(values<float>(b), values<float>(a));
  EXPECT_EQ(reshape(a, {-1}).shape(), (Shape{24}));
  EXPECT_EQ(reshape(a, {6, -1, 1}).shape(), (Shape{6, 4, 1}));
  EXPECT_TRUE(reshape(a, {2, 3, 4}).is_same(a)); // no-op returns the input
}

TEST(ShapeReshape, Errors) {
  array a = iota({2, 3});
  EXPECT_EQ(error_of<std::invalid_argument>([&] {
              reshape(a, {4, 5});
            }),
            "[reshape] Cannot reshape array of size 6 into shape (4,5).");
  EXPECT_EQ(error_of<std::invalid_argument>([&] {
              reshape(a, {-1, 4});
            }),
            "[reshape] Cannot reshape array of size 6 into shape (1,4).");
  EXPECT_EQ(error_of<std::invalid_argument>([&] {
              reshape(a, {-1, -1});
            }),
            "[reshape] Reshape can only infer one dimension.");
  EXPECT_EQ(error_of<std::invalid_argument>([&] {
              reshape(a, {-2, 3});
            }),
            "[reshape] Cannot reshape array of size 6 into shape (-2,3).");
  array e = zeros({0, 3});
  EXPECT_EQ(error_of<std::invalid_argument>([&] {
              reshape(e, {-1, 0});
            }),
            "[reshape] Cannot infer the shape of an empty array");
  EXPECT_EQ(reshape(e, {-1, 3}).shape(), (Shape{0, 3}));
  EXPECT_EQ(reshape(e, {3, 0, 5}).shape(), (Shape{3, 0, 5}));
}

TEST(ShapeReshape, NonContiguousCopiesOnlyWhenNeeded) {
  array a = iota({4, 6});
  array t = transpose(a); // (6, 4), column-major
  // Splitting an axis of a transposed array keeps the view.
  array split_axis = reshape(t, {2, 3, 4});
  split_axis.eval();
  a.eval();
  EXPECT_TRUE(shares_buffer(split_axis, a));
  // Merging its axes cannot be a view: a copy in row-major order.
  array merged = reshape(t, {24});
  merged.eval();
  EXPECT_FALSE(shares_buffer(merged, a));
  EXPECT_TRUE(merged.flags().row_contiguous);
  std::vector<float> expect;
  for (int j = 0; j < 6; ++j)
    for (int i = 0; i < 4; ++i) expect.push_back(static_cast<float>(i * 6 + j));
  EXPECT_EQ(values<float>(merged), expect);
  // A broadcast array reshapes as a view when the broadcast axis stays whole.
  array row = iota({1, 5});
  array bc = broadcast_to(row, {3, 5});
  array r = reshape(bc, {3, 1, 5});
  r.eval();
  row.eval();
  EXPECT_TRUE(shares_buffer(r, row));
  EXPECT_EQ(r.strides()[0], 0);
}

TEST(ShapeFlatten, AxesAndClamping) {
  array b = zeros({2, 3, 4});
  EXPECT_EQ(flatten(b).shape(), (Shape{24}));
  EXPECT_EQ(flatten(b, 1).shape(), (Shape{2, 12}));
  EXPECT_EQ(flatten(b, -5).shape(), (Shape{24}));
  EXPECT_EQ(flatten(b, 2, 5).shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(flatten(b, 0, 1).shape(), (Shape{6, 4}));
  EXPECT_EQ(flatten(array(1.0f)).shape(), (Shape{1}));
  EXPECT_EQ(flatten(zeros({2, 0, 3}), 0, 1).shape(), (Shape{0, 3}));
  EXPECT_EQ(flatten(zeros({0, 2, 3}), 1, 2).shape(), (Shape{0, 6}));
  EXPECT_EQ(error_of<std::invalid_argument>([&] { flatten(b, 3, 4); }),
            "[flatten] start_axis must be less than or equal to end_axis");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { flatten(b, 0, -5); }),
            "[flatten] start_axis must be less than or equal to end_axis");
}

// --- transpose family -----------------------------------------------------------------

TEST(ShapeTranspose, ViewAndValues) {
  array a = iota({2, 3, 4});
  array t = transpose(a, {2, 0, 1});
  EXPECT_EQ(t.shape(), (Shape{4, 2, 3}));
  t.eval();
  a.eval();
  EXPECT_TRUE(shares_buffer(a, t));
  EXPECT_FALSE(t.flags().row_contiguous);
  EXPECT_TRUE(t.flags().contiguous); // dense, just permuted
  auto v = values<float>(t);
  for (int k = 0; k < 4; ++k)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) EXPECT_EQ(v[k * 6 + i * 3 + j], i * 12 + j * 4 + k);
  array r = transpose(iota({3, 5}));
  r.eval();
  EXPECT_TRUE(r.flags().col_contiguous);
  EXPECT_EQ(transpose(a, {0, -1, 1}).shape(), (Shape{2, 4, 3}));
}

TEST(ShapeTranspose, Errors) {
  array a = iota({2, 3});
  EXPECT_EQ(error_of<std::invalid_argument>([&] { transpose(a, {0}); }),
            "[transpose] Received 1 axes for array with 2 dimensions.");
  EXPECT_EQ(error_of<std::invalid_argument>([&] {
              transpose(a, {0, 0});
            }),
            "[transpose] Repeat axes not allowed.");
  EXPECT_EQ(error_of<std::out_of_range>([&] {
              transpose(a, {0, 2});
            }),
            "[transpose] Invalid axis (2) for array with 2 dimensions.");
  EXPECT_EQ(error_of<std::out_of_range>([&] {
              transpose(a, {0, -3});
            }),
            "[transpose] Invalid axis (-1) for array with 2 dimensions.");
  EXPECT_EQ(error_of<std::out_of_range>([&] { swapaxes(a, 0, 2); }),
            "[swapaxes] Invalid axis 2 for array with 2 dimensions.");
  EXPECT_EQ(error_of<std::out_of_range>([&] { moveaxis(a, -3, 0); }),
            "[moveaxis] Invalid axis -3 for array with 2 dimensions.");
}

TEST(ShapeTranspose, SwapAndMoveAxes) {
  array a = iota({2, 3, 4});
  EXPECT_EQ(swapaxes(a, 0, -1).shape(), (Shape{4, 3, 2}));
  EXPECT_EQ(moveaxis(a, 0, -1).shape(), (Shape{3, 4, 2}));
  EXPECT_EQ(moveaxis(a, -1, 0).shape(), (Shape{4, 2, 3}));
  auto v = values<float>(moveaxis(a, 2, 0));
  EXPECT_EQ(v, values<float>(transpose(a, {2, 0, 1})));
  EXPECT_EQ(values<float>(transpose(iota({2, 3}))), (std::vector<float>{0, 3, 1, 4, 2, 5}));
}

// --- broadcasting --------------------------------------------------------------------------

TEST(ShapeBroadcast, StrideZeroView) {
  array a = iota({3, 1});
  array b = broadcast_to(a, {2, 3, 4});
  b.eval();
  a.eval();
  EXPECT_TRUE(shares_buffer(a, b));
  EXPECT_EQ(b.strides(), (Strides{0, 1, 0}));
  EXPECT_FALSE(b.flags().contiguous);
  EXPECT_FALSE(b.flags().row_contiguous);
  auto v = values<float>(b);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) EXPECT_EQ(v[i * 12 + j * 4 + k], j);
  EXPECT_EQ(broadcast_to(zeros({2, 1}), {3, 2, 0}).shape(), (Shape{3, 2, 0}));
}

TEST(ShapeBroadcast, Errors) {
  array a = iota({2, 3});
  EXPECT_EQ(error_of<std::invalid_argument>([&] { broadcast_to(a, {4}); }),
            "Cannot broadcast array of shape (2,3) into shape (4).");
  EXPECT_EQ(error_of<std::invalid_argument>([&] {
              broadcast_to(a, {3, 3});
            }),
            "[broadcast_shapes] Shapes (2,3) and (3,3) cannot be broadcast.");
  EXPECT_EQ(error_of<std::invalid_argument>([&] {
              broadcast_to(a, {4, 3, 3});
            }),
            "[broadcast_shapes] Shapes (2,3) and (4,3,3) cannot be broadcast.");
  EXPECT_EQ(error_of<std::invalid_argument>([&] {
              broadcast_to(zeros({2, 0}), {3, 2, 1});
            }),
            "Cannot broadcast array of shape (2,0) into shape (3,2,1).");
  auto outs = broadcast_arrays({a, iota({4, 1, 1})});
  EXPECT_EQ(outs[0].shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(outs[1].shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(error_of<std::invalid_argument>([&] {
              broadcast_arrays({a, iota({4})});
            }),
            "[broadcast_shapes] Shapes (2,3) and (4) cannot be broadcast.");
}

// --- expand_dims / squeeze -------------------------------------------------------------

TEST(ShapeExpandSqueeze, Shapes) {
  array a = iota({2, 3});
  EXPECT_EQ(expand_dims(a, 0).shape(), (Shape{1, 2, 3}));
  EXPECT_EQ(expand_dims(a, -1).shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(expand_dims(a, {0, -1}).shape(), (Shape{1, 2, 3, 1}));
  EXPECT_EQ(expand_dims(a, {1, -2}).shape(), (Shape{2, 1, 1, 3}));
  array e = expand_dims(a, {0, 2});
  e.eval();
  a.eval();
  EXPECT_TRUE(shares_buffer(a, e));
  EXPECT_TRUE(e.flags().row_contiguous);
  EXPECT_EQ(values<float>(e), values<float>(a));

  array z = zeros({1, 2, 1});
  EXPECT_EQ(squeeze(z).shape(), (Shape{2}));
  EXPECT_EQ(squeeze(z, {0, -1}).shape(), (Shape{2}));
  EXPECT_EQ(squeeze(z, {-3}).shape(), (Shape{2, 1}));
  array s = squeeze(z);
  s.eval();
  z.eval();
  EXPECT_TRUE(shares_buffer(s, z));
}

TEST(ShapeExpandSqueeze, Errors) {
  array a = iota({2, 3});
  EXPECT_EQ(error_of<std::out_of_range>([&] { expand_dims(a, 3); }),
            "[expand_dims] Axis 3 is out of bounds for array with 3 dimensions.");
  EXPECT_EQ(error_of<std::out_of_range>([&] { expand_dims(a, -4); }),
            "[expand_dims] Axis -4 is out of bounds for array with 3 dimensions.");
  EXPECT_EQ(error_of<std::invalid_argument>([&] {
              expand_dims(a, {0, 0});
            }),
            "[expand_dims] Received duplicate axes.");
  EXPECT_EQ(error_of<std::invalid_argument>([&] {
              expand_dims(a, {0, -4});
            }),
            "[expand_dims] Received duplicate axes.");
  EXPECT_EQ(error_of<std::out_of_range>([&] {
              expand_dims(a, {0, 4});
            }),
            "[expand_dims] Axis 4 is out of bounds for array with 4 dimensions.");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { squeeze(a, {0}); }),
            "[squeeze] Cannot squeeze axis 0 with size 2 which is not equal to 1.");
  EXPECT_EQ(error_of<std::out_of_range>([&] { squeeze(a, {3}); }),
            "[squeeze] Axis 3 is out of bounds for array with 2 dimensions.");
  EXPECT_EQ(error_of<std::invalid_argument>([&] {
              squeeze(zeros({1, 2, 1}), {0, 0});
            }),
            "[squeeze] Received duplicate axes.");
}

// --- slicing --------------------------------------------------------------------------------

TEST(ShapeSlice, StepsIncludingNegative) {
  array a = iota({5, 6});
  // a[1:5:2, ::-2]
  array s = slice(a, {1, 5}, {5, -1}, {2, -2});
  EXPECT_EQ(s.shape(), (Shape{2, 3}));
  s.eval();
  a.eval();
  EXPECT_TRUE(shares_buffer(a, s));
  EXPECT_EQ(values<float>(s), (std::vector<float>{11, 9, 7, 23, 21, 19}));
  EXPECT_EQ(s.strides(), (Strides{12, -2}));
  // Reversal of a whole axis.
  EXPECT_EQ(values<float>(slice(iota({4}), {3}, {-1}, {-1})), (std::vector<float>{3, 2, 1, 0}));
  // Empty results, with either step sign.
  EXPECT_EQ(slice(a, {3, 0}, {1, 6}, {1, 1}).shape(), (Shape{0, 6}));
  EXPECT_EQ(slice(a, {1, 0}, {3, 6}, {-1, 1}).shape(), (Shape{0, 6}));
  // Whole-array slice is the input itself.
  EXPECT_TRUE(slice(a, {0, 0}, {5, 6}, {1, 1}).is_same(a));
  // A contiguous block of rows is still row-contiguous.
  array rows = slice(a, {1, 0}, {3, 6}, {1, 1});
  rows.eval();
  EXPECT_TRUE(rows.flags().row_contiguous);
  EXPECT_EQ(rows.data<float>()[0], 6.0f);
}

TEST(ShapeSlice, NonContiguousChain) {
  // transpose, then slice, then reshape: views until the reshape must copy.
  array a = iota({4, 6});
  array t = transpose(a);                       // (6, 4)
  array s = slice(t, {5, 0}, {-1, 4}, {-2, 2}); // rows 5,3,1; cols 0,2 -> (3, 2)
  array r = reshape(s, {6});
  auto v = values<float>(r);
  std::vector<float> expect;
  for (int i : {5, 3, 1})
    for (int j : {0, 2}) expect.push_back(static_cast<float>(j * 6 + i));
  EXPECT_EQ(v, expect);
  s.eval();
  a.eval();
  EXPECT_TRUE(shares_buffer(s, a));
  EXPECT_FALSE(shares_buffer(r, a));
  // expand_dims of the non-contiguous slice stays a view with correct values.
  array e = expand_dims(s, 1);
  EXPECT_EQ(values<float>(e), expect);
  e.eval();
  EXPECT_TRUE(shares_buffer(e, a));
  // copy() of a view is a fresh row-major buffer.
  array c = copy(s);
  c.eval();
  EXPECT_FALSE(shares_buffer(c, a));
  EXPECT_TRUE(c.flags().row_contiguous);
  EXPECT_EQ(values<float>(c), expect);
}

TEST(ShapeSliceUpdate, OverwritesRegion) {
  array a = iota({3, 4});
  array u = array({-1.0f, -2.0f}, {2});
  // a[::2, 1:3] = u (broadcast over rows)
  array out = slice_update(a, u, {0, 1}, {3, 3}, {2, 1});
  auto v = values<float>(out);
  std::vector<float> expect = values<float>(a);
  for (int i : {0, 2}) {
    expect[i * 4 + 1] = -1;
    expect[i * 4 + 2] = -2;
  }
  EXPECT_EQ(v, expect);
  // The input is unchanged (it is still referenced here).
  EXPECT_EQ(values<float>(a)[1], 1.0f);
  // Negative step and dtype conversion of the update.
  array b = zeros({5}, int32);
  array w = array({1.9f, 2.9f}, {2});
  EXPECT_EQ(values<int32_t>(slice_update(b, w, {4}, {0}, {-3})),
            (std::vector<int32_t>{0, 2, 0, 0, 1}));
  EXPECT_EQ(error_of<std::invalid_argument>([&] {
              slice_update(a, zeros({3}), {0, 0}, {3, 4}, {1, 1});
            }),
            "[broadcast_shapes] Shapes (3) and (3,4) cannot be broadcast.");
}

TEST(ShapeSliceUpdate, DonatesUniqueInput) {
  std::vector<float> data(1 << 12, 1.0f);
  const void* buffer = nullptr;
  auto make_input = [&] {
    array a(data, {1 << 12});
    buffer = a.data<float>();
    return a;
  };
  // The input is a temporary: only the graph references it.
  array out = slice_update(make_input(), array(5.0f), {0}, {1}, {1});
  out.eval();
  EXPECT_EQ(out.data<float>(), buffer); // written in place
  EXPECT_EQ(out.data<float>()[0], 5.0f);
  EXPECT_EQ(out.data<float>()[1], 1.0f);
}

// --- concatenate / stack / split ---------------------------------------------------------------

TEST(ShapeConcatenate, ValuesAndPromotion) {
  array a = iota({2, 3});
  array b = array({10, 11, 12, 13}, {2, 2});
  array c = concatenate({a, b}, 1);
  EXPECT_EQ(c.shape(), (Shape{2, 5}));
  EXPECT_EQ(c.dtype(), float32);
  EXPECT_EQ(values<float>(c), (std::vector<float>{0, 1, 2, 10, 11, 3, 4, 5, 12, 13}));
  EXPECT_EQ(concatenate({array({1, 2}), array({3u})}).dtype(), int64);
  EXPECT_EQ(concatenate({array({1, 2}), array({true})}).dtype(), int32);
  EXPECT_EQ(values<float>(concatenate({a, transpose(iota({3, 2}))}, 0)),
            (std::vector<float>{0, 1, 2, 3, 4, 5, 0, 2, 4, 1, 3, 5}));
  EXPECT_EQ(values<float>(concatenate({a, zeros({0, 3})}, 0)), values<float>(a));
  EXPECT_EQ(concatenate({a, a}, StreamOrDevice{}).shape(), (Shape{12}));
}

TEST(ShapeConcatenate, Errors) {
  array a = iota({2, 3});
  EXPECT_EQ(error_of<std::invalid_argument>([&] { concatenate({}, 0); }),
            "[concatenate] No arrays provided for concatenation");
  EXPECT_EQ(error_of<std::invalid_argument>([&] {
              concatenate({a, zeros({2})}, 1);
            }),
            "[concatenate] All the input arrays must have the same number of dimensions. "
            "However, got arrays with dimensions 2 and 1.");
  EXPECT_EQ(error_of<std::invalid_argument>([&] {
              concatenate({a, zeros({3, 3}), zeros({2, 2})}, 0);
            }),
            "[concatenate] All the input array dimensions must match exactly except for the "
            "concatenation axis. However, the provided shapes are (2,3), (3,3), (2,2), and the "
            "concatenation axis is 0.");
  EXPECT_EQ(error_of<std::out_of_range>([&] {
              concatenate({a, a}, -3);
            }),
            "[concatenate] Axis -3 is out of bounds for array with 2 dimensions.");
  EXPECT_EQ(error_of<std::out_of_range>([&] {
              concatenate({array(1), array(2)}, 0);
            }),
            "[concatenate] Axis 0 is out of bounds for array with 0 dimensions.");
}

TEST(ShapeStack, AxesAndErrors) {
  array a = iota({2, 3});
  EXPECT_EQ(stack({a, a}).shape(), (Shape{2, 2, 3}));
  array s = stack({a, a}, 2);
  EXPECT_EQ(s.shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(values<float>(s), (std::vector<float>{0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5}));
  EXPECT_EQ(stack({a, a}, -3).shape(), (Shape{2, 2, 3}));
  EXPECT_EQ(stack({a, astype(a, int32)}).dtype(), float32);
  EXPECT_EQ(error_of<std::out_of_range>([&] {
              stack({a, a}, 3);
            }),
            "[stack] Axis 3 is out of bounds for array with 3 dimensions.");
  EXPECT_EQ(error_of<std::invalid_argument>([&] {
              stack({a, zeros({3, 2})});
            }),
            "[stack] All arrays must have the same shape");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { stack({}); }),
            "[stack] No arrays provided for stacking");
}

TEST(ShapeSplit, OneNodeOfViews) {
  array a = iota({2, 6});
  auto parts = split(a, 3, 1);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0].node(), parts[1].node());
  EXPECT_EQ(parts[1].node(), parts[2].node());
  EXPECT_EQ(parts[0].primitive().name(), std::string("Split"));
  eval(parts);
  a.eval();
  for (auto& p : parts) {
    EXPECT_EQ(p.shape(), (Shape{2, 2}));
    EXPECT_TRUE(shares_buffer(p, a));
  }
  EXPECT_EQ(values<float>(parts[1]), (std::vector<float>{2, 3, 8, 9}));
  EXPECT_EQ(values<float>(parts[2]), (std::vector<float>{4, 5, 10, 11}));
  // Rows of a row-major array are row-contiguous views.
  auto rows = split(a, 2, 0);
  rows[1].eval();
  EXPECT_TRUE(rows[1].flags().row_contiguous);
  EXPECT_EQ(rows[1].data<float>()[0], 6.0f);
}

TEST(ShapeSplit, IndicesLikeNumPy) {
  array a = iota({2, 3});
  auto p = split(a, Shape{1, 5}, 1);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0].shape(), (Shape{2, 1}));
  EXPECT_EQ(p[1].shape(), (Shape{2, 2}));
  EXPECT_EQ(p[2].shape(), (Shape{2, 0}));
  EXPECT_EQ(values<float>(p[1]), (std::vector<float>{1, 2, 4, 5}));
  auto q = split(a, Shape{2, 1}, 1);
  EXPECT_EQ(q[1].shape(), (Shape{2, 0}));
  EXPECT_EQ(values<float>(q[2]), (std::vector<float>{1, 2, 4, 5}));
  auto r = split(a, Shape{-1}, 1);
  EXPECT_EQ(values<float>(r[1]), (std::vector<float>{2, 5}));
  EXPECT_EQ(split(a, Shape{}, 1).size(), 1u);
  auto e = split(zeros({0}), 3);
  EXPECT_EQ(e.size(), 3u);
  EXPECT_EQ(e[2].shape(), (Shape{0}));
  // A dropped sibling does not stop the others from evaluating.
  array only = split(a, 3, 1)[2];
  EXPECT_EQ(values<float>(only), (std::vector<float>{2, 5}));
}

TEST(ShapeSplit, Errors) {
  array a = iota({2, 3});
  EXPECT_EQ(error_of<std::invalid_argument>([&] { split(a, 2, 1); }),
            "Array split does not result in sub arrays with equal size: attempting 2 splits "
            "along axis 1 for shape (2,3).");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { split(a, 2, -1); }),
            "Array split does not result in sub arrays with equal size: attempting 2 splits "
            "along axis -1 for shape (2,3).");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { split(a, 0, 1); }),
            "[split] num_splits must be positive and non-zero but got 0.");
  EXPECT_EQ(error_of<std::out_of_range>([&] { split(a, 3, 2); }),
            "[split] Axis 2 is out of bounds for array with 2 dimensions.");
  EXPECT_EQ(error_of<std::out_of_range>([&] { split(array(3), 1); }),
            "[split] Axis 0 is out of bounds for array with 0 dimensions.");
}

// --- layouts of views --------------------------------------------------------------------

TEST(ShapeLayout, FlagsAndSpan) {
  Flags f = layout_flags({2, 3}, {3, 1});
  EXPECT_TRUE(f.row_contiguous && f.contiguous && !f.col_contiguous);
  f = layout_flags({2, 3}, {1, 2});
  EXPECT_TRUE(!f.row_contiguous && f.contiguous && f.col_contiguous);
  f = layout_flags({2, 3, 4}, {4, 8, 1}); // permuted but dense
  EXPECT_TRUE(!f.row_contiguous && !f.col_contiguous && f.contiguous);
  f = layout_flags({2, 3}, {6, 2}); // gaps
  EXPECT_FALSE(f.contiguous);
  f = layout_flags({3}, {-1}); // reversed
  EXPECT_FALSE(f.contiguous);
  f = layout_flags({1, 3, 1}, {99, 1, 7}); // size-1 strides do not matter
  EXPECT_TRUE(f.row_contiguous && f.col_contiguous);
  EXPECT_EQ(layout_span({2, 3}, {6, 2}), 11u);
  EXPECT_EQ(layout_span({4, 3}, {0, 1}), 3u);
  EXPECT_EQ(layout_span({0, 3}, {3, 1}), 0u);
  EXPECT_FALSE(reshape_strides({4, 6}, {1, 4}, {24}).has_value());
  EXPECT_EQ(*reshape_strides({4, 6}, {1, 4}, {2, 2, 6}), (Strides{2, 1, 4}));
  EXPECT_EQ(*reshape_strides({3, 5}, {0, 1}, {3, 1, 5}), (Strides{0, 5, 1}));
}

// --- astype and copy ------------------------------------------------------------------------

TEST(ShapeAsType, FloatToIntTruncatesAndWraps) {
  array f({1.7f, -1.7f, 300.5f, -2.5f});
  EXPECT_EQ(values<int32_t>(astype(f, int32)), (std::vector<int32_t>{1, -1, 300, -2}));
  EXPECT_EQ(values<uint8_t>(astype(f, uint8)), (std::vector<uint8_t>{1, 255, 44, 254}));
  EXPECT_EQ(values<int8_t>(astype(f, int8)), (std::vector<int8_t>{1, -1, 44, -2}));
  array special({NAN, INFINITY, -INFINITY, 3.9e9f});
  EXPECT_EQ(values<int32_t>(astype(special, int32)),
            (std::vector<int32_t>(4, std::numeric_limits<int32_t>::min())));
  EXPECT_EQ(values<uint64_t>(astype(array({NAN, -1.0f, -3.5f, 1e19f, 2e19f}), uint64)),
            (std::vector<uint64_t>{9223372036854775808ull, 18446744073709551615ull,
                                   18446744073709551613ull, 9999999980506447872ull, 0}));
  EXPECT_EQ(values<uint32_t>(astype(array({3.9e9f, -3.5f, -5e9f}), uint32)),
            (std::vector<uint32_t>{3900000000u, 4294967293u, 3589934592u}));
  EXPECT_EQ(values<int64_t>(astype(array({1e20f}), int64))[0], std::numeric_limits<int64_t>::min());
}

TEST(ShapeAsType, BoolComplexAndHalf) {
  array f({1.7f, 0.0f, NAN, -0.0f});
  EXPECT_EQ(values<bool>(astype(f, bool_)), (std::vector<bool>{true, false, true, false}));
  array c = astype(array({1.5f, -2.0f}), complex64);
  EXPECT_EQ(values<complex64_t>(c), (std::vector<complex64_t>{{1.5f, 0}, {-2.0f, 0}}));
  array z(complex64_t(1.0f, 2.0f));
  EXPECT_EQ(values<float>(astype(z, float32))[0], 1.0f);
  EXPECT_EQ(values<bool>(astype(array(complex64_t(0.0f, 1.0f)), bool_))[0], true);
  EXPECT_EQ(values<int32_t>(astype(z, int32))[0], 1);
  EXPECT_EQ(static_cast<float>(values<bfloat16_t>(astype(array(3.999f), bfloat16))[0]), 4.0f);
  EXPECT_TRUE(
      std::isinf(static_cast<float>(values<float16_t>(astype(array(70000.0f), float16))[0])));
  EXPECT_EQ(values<uint8_t>(astype(array({-1, 256, 70000}), uint8)),
            (std::vector<uint8_t>{255, 0, 112}));
  EXPECT_EQ(values<uint64_t>(astype(array({-1}), uint64))[0], 18446744073709551615ull);
  EXPECT_EQ(values<float>(astype(array({true, false}), float32)), (std::vector<float>{1, 0}));
}

TEST(ShapeAsType, AllPairsRoundTripSmallIntegers) {
  const Dtype all[] = {bool_, uint8, uint16,  uint32,   uint64,  int8,    int16,
                       int32, int64, float16, bfloat16, float32, float64, complex64};
  array base({0, 1, 0, 1, 1, 0}, {2, 3});
  for (Dtype from : all) {
    for (Dtype to : all) {
      array x = astype(astype(base, from), to);
      EXPECT_EQ(x.dtype(), to);
      EXPECT_EQ(values<int32_t>(astype(x, int32)), (std::vector<int32_t>{0, 1, 0, 1, 1, 0}))
          << from << " -> " << to;
    }
  }
}

TEST(ShapeAsType, LayoutsAndLargeArrays) {
  // Non-contiguous (sliced transpose) input.
  array a = iota({300, 400});
  array view = slice(transpose(a), {1, 0}, {400, 300}, {3, 2});
  auto ref = values<float>(view);
  auto got = values<int32_t>(astype(view, int32));
  ASSERT_EQ(got.size(), ref.size());
  for (size_t i = 0; i < ref.size(); ++i) ASSERT_EQ(got[i], static_cast<int32_t>(ref[i]));
  // A transposed (dense) input keeps its layout.
  array t = astype(transpose(a), float16);
  t.eval();
  EXPECT_TRUE(t.flags().col_contiguous);
  EXPECT_EQ(static_cast<float>(values<float16_t>(t)[1]), 400.0f);
  // Same dtype is the input itself.
  EXPECT_TRUE(astype(a, float32).is_same(a));
}

TEST(ShapeEmpty, EmptyArraysEverywhere) {
  array e = zeros({0, 4});
  EXPECT_EQ(values<float>(transpose(e)).size(), 0u);
  EXPECT_EQ(values<float>(reshape(e, {2, 0, 2})).size(), 0u);
  EXPECT_EQ(values<float>(broadcast_to(e, {3, 0, 4})).size(), 0u);
  EXPECT_EQ(values<float>(slice(e, {0, 1}, {0, 3}, {1, 1})).size(), 0u);
  EXPECT_EQ(values<int32_t>(astype(e, int32)).size(), 0u);
  EXPECT_EQ(values<float>(copy(e)).size(), 0u);
  EXPECT_EQ(values<float>(concatenate({e, e}, 1)).size(), 0u);
  EXPECT_EQ(values<float>(expand_dims(e, 0)).size(), 0u);
}

// --- differentiation and vectorisation rules -------------------------------------------

namespace {

// vjp of a one-input, one-output function with the given cotangent.
array vjp1(const std::function<array(const array&)>& f, const array& x, const array& cot) {
  auto [outs, grads] =
      vjp([&](const std::vector<array>& in) { return std::vector<array>{f(in[0])}; }, {x}, {cot});
  return grads[0];
}

array jvp1(const std::function<array(const array&)>& f, const array& x, const array& tan) {
  auto [outs, tans] =
      jvp([&](const std::vector<array>& in) { return std::vector<array>{f(in[0])}; }, {x}, {tan});
  return tans[0];
}

// vmap over axis `in_axis` of x, result batched at axis 0.
array vmap1(const std::function<array(const array&)>& f, const array& x, int in_axis) {
  auto g = vmap([&](const std::vector<array>& in) { return std::vector<array>{f(in[0])}; },
                {in_axis}, {0});
  return g({x})[0];
}

// Stacks f applied to each slice of x along `axis` (the reference for vmap).
array loop_map(const std::function<array(const array&)>& f, const array& x, int axis) {
  std::vector<array> outs;
  for (int i = 0; i < x.shape(axis); ++i) {
    Shape start(x.ndim(), 0), stop = x.shape(), step(x.ndim(), 1);
    start[axis] = i;
    stop[axis] = i + 1;
    outs.push_back(f(squeeze(slice(x, start, stop, step), {axis})));
  }
  return stack(outs, 0);
}

} // namespace

TEST(ShapeTransforms, ViewOpsVjpAndJvpInvertTheLayout) {
  array x = iota({2, 3, 4});
  auto check = [&](const std::function<array(const array&)>& f) {
    array y = f(x);
    array cot = iota(y.shape());
    array g = vjp1(f, x, cot);
    EXPECT_EQ(g.shape(), x.shape());
    // For a permutation of elements, <cot, f(t)> = <vjp(cot), t> with t = x.
    auto gv = values<float>(astype(g, float32));
    auto xv = values<float>(x);
    auto yv = values<float>(astype(y, float32));
    auto cv = values<float>(astype(cot, float32));
    double lhs = 0, rhs = 0;
    for (size_t i = 0; i < yv.size(); ++i) lhs += double(cv[i]) * yv[i];
    for (size_t i = 0; i < xv.size(); ++i) rhs += double(gv[i]) * xv[i];
    EXPECT_EQ(lhs, rhs);
    EXPECT_EQ(values<float>(astype(jvp1(f, x, x), float32)), yv); // linear: jvp(x) = f(x)
  };
  check([](const array& a) { return reshape(a, {4, 6}); });
  check([](const array& a) { return transpose(a, {2, 0, 1}); });
  check([](const array& a) { return moveaxis(a, 0, -1); });
  check([](const array& a) { return swapaxes(a, 0, 1); });
  check([](const array& a) { return expand_dims(a, {0, 3}); });
  check([](const array& a) { return squeeze(expand_dims(a, 1), {1}); });
  check([](const array& a) { return flatten(transpose(a), 1); });
  check([](const array& a) { return astype(a, float64); });
  check([](const array& a) { return copy(a); });
  check([](const array& a) { return concatenate({zeros_like(a), a}, 1); });
}

TEST(ShapeTransforms, BroadcastVjpSums) {
  array x = iota({3, 1});
  array g = vjp1([](const array& a) { return broadcast_to(a, {2, 3, 4}); }, x, ones({2, 3, 4}));
  EXPECT_EQ(g.shape(), (Shape{3, 1}));
  EXPECT_EQ(values<float>(g), (std::vector<float>{8, 8, 8}));
  array h = vjp1([](const array& a) { return full({2, 3}, a); }, array(1.0f), iota({2, 3}));
  EXPECT_EQ(values<float>(h), (std::vector<float>{15}));
  EXPECT_EQ(values<float>(jvp1(
                [](const array& a) {
                  return broadcast_to(a, {2, 3, 1});
                },
                x, array({1.0f, 2.0f, 3.0f}, {3, 1}))),
            (std::vector<float>{1, 2, 3, 1, 2, 3}));
}

TEST(ShapeTransforms, SliceAndSliceUpdate) {
  array x = iota({4, 5});
  auto sl = [](const array& a) {
    return slice(a, {3, 0}, {-1, 5}, {-2, 2});
  }; // rows 3,1; cols 0,2,4
  array g = vjp1(sl, x, ones({2, 3}));
  std::vector<float> expect(20, 0.0f);
  for (int r : {3, 1})
    for (int c : {0, 2, 4}) expect[r * 5 + c] = 1;
  EXPECT_EQ(values<float>(g), expect);
  EXPECT_EQ(values<float>(jvp1(sl, x, x)), values<float>(sl(x)));

  array upd = array({-1.0f, -2.0f}, {1, 2});
  auto fn = [](const std::vector<array>& in) {
    return std::vector<array>{slice_update(in[0], in[1], {1, 1}, {2, 3}, {1, 1})};
  };
  auto [outs, grads] = vjp(fn, {x, upd}, {iota({4, 5})});
  std::vector<float> ga = values<float>(iota({4, 5}));
  ga[6] = ga[7] = 0; // the overwritten region gets nothing
  EXPECT_EQ(values<float>(grads[0]), ga);
  EXPECT_EQ(values<float>(grads[1]), (std::vector<float>{6, 7}));
  auto [o2, tans] = jvp(fn, {x, upd}, {zeros({4, 5}), ones({1, 2})});
  std::vector<float> t(20, 0.0f);
  t[6] = t[7] = 1;
  EXPECT_EQ(values<float>(tans[0]), t);
}

TEST(ShapeTransforms, SplitVjpFillsMissingCotangents) {
  array x = iota({2, 6});
  auto fn = [](const std::vector<array>& in) {
    auto parts = split(in[0], 3, 1);
    return std::vector<array>{parts[0], parts[2]}; // the middle piece is unused
  };
  auto [outs, grads] = vjp(fn, {x}, {ones({2, 2}), full({2, 2}, array(2.0f))});
  EXPECT_EQ(values<float>(grads[0]), (std::vector<float>{1, 1, 0, 0, 2, 2, 1, 1, 0, 0, 2, 2}));
  auto [o2, tans] = jvp(fn, {x}, {x});
  EXPECT_EQ(values<float>(tans[1]), (std::vector<float>{4, 5, 10, 11}));
  // Concatenate's vjp hands each input its slice.
  auto cat = [](const std::vector<array>& in) {
    return std::vector<array>{concatenate({in[0], in[1]}, 0)};
  };
  auto [o3, g3] = vjp(cat, {iota({1, 2}), iota({2, 2})}, {iota({3, 2})});
  EXPECT_EQ(values<float>(g3[0]), (std::vector<float>{0, 1}));
  EXPECT_EQ(values<float>(g3[1]), (std::vector<float>{2, 3, 4, 5}));
}

TEST(ShapeTransforms, AsTypeVjpCastsBack) {
  array x = array({1.5f, 2.5f});
  array g = vjp1([](const array& a) { return astype(a, float16); }, x,
                 astype(array({1.0f, 3.0f}), float16));
  EXPECT_EQ(g.dtype(), float32);
  EXPECT_EQ(values<float>(g), (std::vector<float>{1, 3}));
}

TEST(ShapeTransforms, VmapMatchesLoops) {
  array x = iota({3, 4, 5});
  auto check = [&](const std::function<array(const array&)>& f, int axis) {
    array got = vmap1(f, x, axis);
    array want = loop_map(f, x, axis);
    EXPECT_EQ(got.shape(), want.shape());
    EXPECT_EQ(values<float>(got), values<float>(want));
  };
  for (int axis : {0, 1, 2}) {
    check([](const array& a) { return reshape(a, {-1}); }, axis);
    check([](const array& a) { return transpose(a); }, axis);
    check(
        [](const array& a) {
          return broadcast_to(expand_dims(a, 1), {a.shape(0), 3, a.shape(1)});
        },
        axis);
    check([](const array& a) { return broadcast_to(a, {2, a.shape(0), a.shape(1)}); }, axis);
    check([](const array& a) { return expand_dims(a, {0, 2}); }, axis);
    check([](const array& a) { return squeeze(expand_dims(a, 1), {1}); }, axis);
    check([](const array& a) { return slice(a, {1, 0}, {a.shape(0), a.shape(1)}, {2, 1}); }, axis);
    check(
        [](const array& a) {
          return slice_update(a, array(-1.0f), {0, 1}, {1, 2}, {1, 1});
        },
        axis);
    check([](const array& a) { return concatenate({a, iota(a.shape())}, 1); }, axis);
    check([](const array& a) { return split(a, Shape{1}, 1)[1]; }, axis);
    check([](const array& a) { return astype(a, int32); }, axis);
    check([](const array& a) { return copy(a); }, axis);
  }
  // Unbatched slice_update target with a batched update.
  array base = zeros({4});
  auto g = vmap(
      [&](const std::vector<array>& in) {
        return std::vector<array>{slice_update(base, in[0], {1}, {3}, {1})};
      },
      {0}, {0});
  EXPECT_EQ(values<float>(g({iota({2, 2})})[0]), (std::vector<float>{0, 0, 1, 0, 0, 2, 3, 0}));
}
