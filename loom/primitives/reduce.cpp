// Reduce and ArgReduce: shapes and transforms. The kernels live in
// backend/cpu/reduce.cpp.
#include "loom/primitives/reduce.h"

#include <algorithm>
#include <numeric>

#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/reduce.h"
#include "loom/ops/shape.h"
#include "loom/ops/slice.h"
#include "loom/primitives/state_util.h"

namespace loom {

namespace {

// `shape` with the reduced axes set to 1.
Shape keepdims_shape(const Shape& shape, const std::vector<int>& axes) {
  Shape out = shape;
  for (int ax : axes) out[ax] = 1;
  return out;
}

// Reshapes a reduction result (or its cotangent) to the keepdims shape so it
// broadcasts against the input.
array with_kept_dims(const array& x, const Shape& in_shape, const std::vector<int>& axes,
                     bool keepdims) {
  if (keepdims) return x;
  return reshape(x, keepdims_shape(in_shape, axes));
}

array cast_to(const array& x, Dtype dtype) { return x.dtype() == dtype ? x : astype(x, dtype); }

// Along the last axis of x: every element replaced by the product of the
// elements before it (`from_left`) or after it, exclusive. A log-step scan
// built from slices, so it is differentiable again.
array exclusive_product(const array& x, bool from_left) {
  const int nd = x.ndim();
  const int n = x.shape(nd - 1);
  auto take = [&](const array& a, int begin, int end) {
    Shape start(nd, 0);
    Shape stop = a.shape();
    Shape step(nd, 1);
    start[nd - 1] = begin;
    stop[nd - 1] = end;
    return slice(a, start, stop, step);
  };
  auto ones_along = [&](int k) {
    Shape shape = x.shape();
    shape[nd - 1] = k;
    return ones(shape, x.dtype());
  };
  array scan = x;
  for (int k = 1; k < n; k *= 2) {
    array shifted = from_left ? concatenate({ones_along(k), take(scan, 0, n - k)}, nd - 1)
                              : concatenate({take(scan, k, n), ones_along(k)}, nd - 1);
    scan = multiply(scan, shifted);
  }
  return from_left ? concatenate({ones_along(1), take(scan, 0, n - 1)}, nd - 1)
                   : concatenate({take(scan, 1, n), ones_along(1)}, nd - 1);
}

// Permutation that puts the reduced axes last (in order), and its inverse.
std::pair<std::vector<int>, std::vector<int>> reduced_last(int ndim, const std::vector<int>& axes) {
  std::vector<bool> reduced(ndim, false);
  for (int ax : axes) reduced[ax] = true;
  std::vector<int> perm;
  for (int d = 0; d < ndim; ++d) {
    if (!reduced[d]) perm.push_back(d);
  }
  for (int ax : axes) perm.push_back(ax);
  std::vector<int> inverse(ndim);
  for (int i = 0; i < ndim; ++i) inverse[perm[i]] = i;
  return {perm, inverse};
}

// x with the reduced axes moved last and flattened into one: (kept..., n).
array flatten_reduced(const array& x, const std::vector<int>& axes) {
  auto [perm, inverse] = reduced_last(x.ndim(), axes);
  Shape shape;
  int n = 1;
  for (int d = 0; d < x.ndim(); ++d) {
    if (std::find(axes.begin(), axes.end(), d) == axes.end()) {
      shape.push_back(x.shape(d));
    } else {
      n *= x.shape(d);
    }
  }
  shape.push_back(n);
  bool identity = true;
  for (int i = 0; i < x.ndim(); ++i) identity &= perm[i] == i;
  array moved = identity ? x : transpose(x, perm);
  return reshape(moved, shape);
}

// For each element, the product of the other elements of its reduction group.
// Exact with zeros and infinities (no division).
array product_of_others(const array& x, const std::vector<int>& axes) {
  if (x.size() == 0) return x;
  array flat = flatten_reduced(x, axes);
  array others =
      multiply(exclusive_product(flat, /*from_left=*/true), exclusive_product(flat, false));
  auto [perm, inverse] = reduced_last(x.ndim(), axes);
  Shape moved_shape;
  for (int d : perm) moved_shape.push_back(x.shape(d));
  array moved = reshape(others, moved_shape);
  bool identity = true;
  for (int i = 0; i < x.ndim(); ++i) identity &= perm[i] == i;
  return identity ? moved : transpose(moved, inverse);
}

const char* reduce_name(Reduce::ReduceType t) {
  switch (t) {
    case Reduce::And:
      return "And";
    case Reduce::Or:
      return "Or";
    case Reduce::Sum:
      return "Sum";
    case Reduce::Prod:
      return "Prod";
    case Reduce::Min:
      return "Min";
    case Reduce::Max:
      return "Max";
  }
  return "Reduce";
}

array apply_reduce(Reduce::ReduceType t, const array& x, const std::vector<int>& axes,
                   bool keepdims, Stream s) {
  switch (t) {
    case Reduce::And:
      return all(x, axes, keepdims, s);
    case Reduce::Or:
      return any(x, axes, keepdims, s);
    case Reduce::Sum:
      return sum(x, axes, keepdims, s);
    case Reduce::Prod:
      return prod(x, axes, keepdims, s);
    case Reduce::Min:
      return min(x, axes, keepdims, s);
    case Reduce::Max:
      return max(x, axes, keepdims, s);
  }
  throw std::logic_error("[Reduce] Unknown reduce type.");
}

array apply_arg_reduce(ArgReduce::ReduceType t, const array& x, int axis, bool keepdims, Stream s) {
  return t == ArgReduce::ArgMax ? argmax(x, axis, keepdims, s) : argmin(x, axis, keepdims, s);
}

} // namespace

Shape reduced_shape(const Shape& shape, const std::vector<int>& axes, bool keepdims) {
  if (keepdims) return keepdims_shape(shape, axes);
  Shape out;
  for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
    if (std::find(axes.begin(), axes.end(), d) == axes.end()) out.push_back(shape[d]);
  }
  return out;
}

// --- Reduce -------------------------------------------------------------------

std::vector<Shape> Reduce::output_shapes(const std::vector<array>& inputs) {
  return {reduced_shape(inputs[0].shape(), axes_, keepdims_)};
}

std::vector<array> Reduce::vjp(const std::vector<array>& primals,
                               const std::vector<array>& cotangents, const std::vector<int>&,
                               const std::vector<array>& outputs) {
  const array& in = primals[0];
  const array cot = with_kept_dims(cotangents[0], in.shape(), axes_, keepdims_);
  switch (type_) {
    case And:
    case Or:
      return {zeros_like(in)};
    case Sum:
      return {cast_to(broadcast_to(cot, in.shape()), in.dtype())};
    case Prod:
      return {cast_to(multiply(cot, product_of_others(in, axes_)), in.dtype())};
    case Min:
    case Max: {
      // The cotangent is shared equally among the positions equal to the
      // extreme (NaN everywhere when the extreme is NaN, as in MLX).
      array extreme = with_kept_dims(outputs[0], in.shape(), axes_, keepdims_);
      array mask = equal(in, extreme);
      array count = sum(mask, axes_, /*keepdims=*/true);
      return {cast_to(multiply(mask, divide(cot, count)), in.dtype())};
    }
  }
  throw std::logic_error("[Reduce] Unknown reduce type.");
}

std::vector<array> Reduce::jvp(const std::vector<array>& primals,
                               const std::vector<array>& tangents, const std::vector<int>&) {
  const array& in = primals[0];
  const array& t = tangents[0];
  Shape out_shape = reduced_shape(in.shape(), axes_, keepdims_);
  switch (type_) {
    case And:
    case Or:
      return {zeros(out_shape, bool_)};
    case Sum:
      return {sum(t, axes_, keepdims_, stream())};
    case Prod:
      return {sum(multiply(t, product_of_others(in, axes_)), axes_, keepdims_, stream())};
    case Min:
    case Max: {
      // The tangent at the first position of the extreme, in row-major order
      // over the reduced axes.
      ArgReduce::ReduceType arg = type_ == Max ? ArgReduce::ArgMax : ArgReduce::ArgMin;
      if (axes_.size() == 1) {
        const int ax = axes_[0];
        array index = apply_arg_reduce(arg, in, ax, true, stream());
        Shape along(in.ndim(), 1);
        along[ax] = in.shape(ax);
        array positions = reshape(arange(0, in.shape(ax), 1, uint32), along);
        array picked = where(equal(index, positions), t, array(0, t.dtype()));
        return {sum(picked, axes_, keepdims_, stream())};
      }
      array flat_in = flatten_reduced(in, axes_);
      array flat_t = flatten_reduced(t, axes_);
      const int last = flat_in.ndim() - 1;
      array index = apply_arg_reduce(arg, flat_in, last, true, stream());
      array positions = arange(0, flat_in.shape(last), 1, uint32);
      array picked = where(equal(index, positions), flat_t, array(0, t.dtype()));
      return {reshape(sum(picked, {last}, false, stream()), out_shape)};
    }
  }
  throw std::logic_error("[Reduce] Unknown reduce type.");
}

std::pair<std::vector<array>, std::vector<int>> Reduce::vmap(const std::vector<array>& inputs,
                                                             const std::vector<int>& axes) {
  const int b = axes[0];
  if (b < 0) return {{apply_reduce(type_, inputs[0], axes_, keepdims_, stream())}, {-1}};
  std::vector<int> shifted;
  int before = 0;
  for (int ax : axes_) {
    shifted.push_back(ax >= b ? ax + 1 : ax);
    before += ax < b;
  }
  return {{apply_reduce(type_, inputs[0], shifted, keepdims_, stream())},
          {keepdims_ ? b : b - before}};
}

bool Reduce::is_equivalent(const Primitive& other) const {
  return same_type_and_state(*this, other);
}

const char* Reduce::name() const { return reduce_name(type_); }

// --- ArgReduce ----------------------------------------------------------------

std::vector<Shape> ArgReduce::output_shapes(const std::vector<array>& inputs) {
  const Shape& shape = inputs[0].shape();
  if (axis_ == kAllAxes) return {keepdims_ ? Shape(shape.size(), 1) : Shape{}};
  return {reduced_shape(shape, {axis_}, keepdims_)};
}

std::vector<array> ArgReduce::vjp(const std::vector<array>& primals, const std::vector<array>&,
                                  const std::vector<int>&, const std::vector<array>&) {
  return {zeros_like(primals[0])};
}

std::vector<array> ArgReduce::jvp(const std::vector<array>& primals, const std::vector<array>&,
                                  const std::vector<int>&) {
  return {zeros(output_shapes(primals)[0], uint32)};
}

std::pair<std::vector<array>, std::vector<int>> ArgReduce::vmap(const std::vector<array>& inputs,
                                                                const std::vector<int>& axes) {
  const array& x = inputs[0];
  const int b = axes[0];
  if (b < 0) {
    if (axis_ == kAllAxes) {
      return {{type_ == ArgMax ? argmax(x, keepdims_, stream()) : argmin(x, keepdims_, stream())},
              {-1}};
    }
    return {{apply_arg_reduce(type_, x, axis_, keepdims_, stream())}, {-1}};
  }
  if (axis_ != kAllAxes) {
    const int ax = axis_ >= b ? axis_ + 1 : axis_;
    const int out_b = keepdims_ || axis_ >= b ? b : b - 1;
    return {{apply_arg_reduce(type_, x, ax, keepdims_, stream())}, {out_b}};
  }
  // Each sample flattened on its own: batch first, the rest in one axis.
  const int batch = x.shape(b);
  array rows = reshape(moveaxis(x, b, 0), {batch, -1});
  array index = apply_arg_reduce(type_, rows, 1, false, stream());
  if (keepdims_) {
    Shape shape(x.ndim(), 1);
    shape[0] = batch;
    index = reshape(index, shape);
  }
  return {{index}, {0}};
}

bool ArgReduce::is_equivalent(const Primitive& other) const {
  return same_type_and_state(*this, other);
}

const char* ArgReduce::name() const { return type_ == ArgMax ? "ArgMax" : "ArgMin"; }

void ArgReduce::print_params(std::ostream& os) const {
  if (axis_ == kAllAxes) {
    os << "axis=None";
  } else {
    os << "axis=" << axis_;
  }
  if (keepdims_) os << ", keepdims=True";
}

// --- state and factories ------------------------------------------------------

PrimitiveState Reduce::state() const {
  return {{"axes", state_ints(axes_)}, {"keepdims", keepdims_}};
}
// axis -1 (kAllAxes) is the whole array.
PrimitiveState ArgReduce::state() const {
  return {{"axis", int64_t{axis_}}, {"keepdims", keepdims_}};
}

// One factory per name ("Sum", "ArgMax", ...): the reduction is the name.
static const bool loom_registered_reductions = [] {
  for (auto type : {Reduce::And, Reduce::Or, Reduce::Sum, Reduce::Prod, Reduce::Min, Reduce::Max}) {
    std::string name = reduce_name(type);
    register_primitive(name, [type, name](Stream s, const PrimitiveState& st) {
      return std::make_shared<Reduce>(s, type, state_get<std::vector<int>>(st, name, "axes"),
                                      state_get<bool>(st, name, "keepdims"));
    });
  }
  for (auto [type, name] :
       {std::pair{ArgReduce::ArgMin, "ArgMin"}, {ArgReduce::ArgMax, "ArgMax"}}) {
    register_primitive(name, [type = type, name = name](Stream s, const PrimitiveState& st) {
      return std::make_shared<ArgReduce>(s, type, state_get<int>(st, name, "axis"),
                                         state_get<bool>(st, name, "keepdims"));
    });
  }
  return true;
}();

} // namespace loom
