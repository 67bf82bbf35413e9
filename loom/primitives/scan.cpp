#include "loom/primitives/scan.h"

#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/gather.h"
#include "loom/ops/reduce.h"
#include "loom/ops/scan.h"
#include "loom/ops/shape.h"
#include "loom/ops/slice.h"
#include "loom/primitives/state_util.h"

namespace loom {

namespace {

// Positions along `axis` as an array that broadcasts against `like`.
array iota_along(const array& like, int axis, const Stream& s) {
  Shape shape(like.ndim(), 1);
  shape[axis] = like.shape(axis);
  return reshape(arange(0, like.shape(axis), 1, int32, s), shape, s);
}

} // namespace

const char* Scan::name() const {
  switch (type_) {
    case ReduceType::sum:
      return "CumSum";
    case ReduceType::prod:
      return "CumProd";
    case ReduceType::max:
      return "CumMax";
    case ReduceType::min:
      return "CumMin";
    case ReduceType::logaddexp:
      return "CumLogaddexp";
  }
  return "Scan";
}

std::vector<Shape> Scan::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape()};
}

// Zero-safe pieces of cumprod's derivative. With z the first zero of x in
// scan order: for i before z, d out_j / d x_i = out_j / x_i; for i after z
// every product through i also holds x_z, so the derivative is 0; at z it is
// the product of the other factors, which is cumprod(y) with y = x and x_z
// replaced by 1.
struct ProdParts {
  array is_zero, first_zero, safe_x, y_scan;
};

ProdParts prod_parts(const array& x, int axis, bool reverse, bool inclusive, const Stream& s) {
  array is_zero = equal(x, zeros_like(x, s), s);
  array zeros_before = cumsum(astype(is_zero, int32, s), axis, reverse, false, s);
  array first_zero = logical_and(is_zero, equal(zeros_before, array(0, int32), s), s);
  array one = ones_like(x, s);
  return {is_zero, first_zero, where(is_zero, one, x, s),
          cumprod(where(first_zero, one, x, s), axis, reverse, inclusive, s)};
}

// For each output of an inclusive cummax/cummin, the position of the input
// it equals: the latest (in scan order) that reached the running extreme.
array extreme_source(const array& x, const array& inclusive_out, int axis, bool reverse,
                     const Stream& s) {
  array iota = iota_along(x, axis, s);
  array hit = equal(x, inclusive_out, s);
  array marks = where(hit, reverse ? negative(iota, s) : iota, array(-(1 << 30), int32), s);
  array src = cummax(marks, axis, reverse, true, s);
  return reverse ? negative(src, s) : src;
}

// An exclusive scan's output j is the inclusive one at j - 1 (j + 1 when
// reversed): the slices of the inclusive result and of the exclusive
// positions that correspond.
std::pair<array, array> exclusive_pairs(const array& incl, const array& excl, int axis,
                                        bool reverse, const Stream& s) {
  int n = incl.shape(axis);
  Shape a0(incl.ndim(), 0), a1 = incl.shape(), b0(incl.ndim(), 0), b1 = incl.shape(),
                            step(incl.ndim(), 1);
  if (reverse) {
    a0[axis] = 1;     // inclusive at j + 1 ...
    b1[axis] = n - 1; // ... for exclusive j < n - 1
  } else {
    a1[axis] = n - 1; // inclusive at j - 1 ...
    b0[axis] = 1;     // ... for exclusive j >= 1
  }
  return {slice(incl, a0, a1, step, s), slice(excl, b0, b1, step, s)};
}

std::vector<array> Scan::vjp(const std::vector<array>& primals,
                             const std::vector<array>& cotangents, const std::vector<int>&,
                             const std::vector<array>& outputs) {
  const array& x = primals[0];
  const array& cot = cotangents[0];
  const array& out = outputs[0];
  const Stream& s = stream();
  switch (type_) {
    case ReduceType::sum:
      // Each input reaches every output after it (before it, reversed).
      return {cumsum(cot, axis_, !reverse_, inclusive_, s)};
    case ReduceType::prod: {
      ProdParts p = prod_parts(x, axis_, reverse_, inclusive_, s);
      array regular =
          divide(cumsum(multiply(cot, out, s), axis_, !reverse_, inclusive_, s), p.safe_x, s);
      array at_zero = cumsum(multiply(cot, p.y_scan, s), axis_, !reverse_, inclusive_, s);
      return {where(p.first_zero, at_zero, regular, s)};
    }
    case ReduceType::max:
    case ReduceType::min: {
      if (x.shape(axis_) == 0) return {zeros_like(x, s)};
      array incl = inclusive_ ? out
                              : (type_ == ReduceType::max ? cummax(x, axis_, reverse_, true, s)
                                                          : cummin(x, axis_, reverse_, true, s));
      array src = extreme_source(x, incl, axis_, reverse_, s);
      if (inclusive_) return {scatter_add_axis(zeros_like(x, s), src, cot, axis_, s)};
      if (x.shape(axis_) == 1) return {zeros_like(x, s)};
      auto [src_part, cot_part] = exclusive_pairs(src, cot, axis_, reverse_, s);
      return {scatter_add_axis(zeros_like(x, s), src_part, cot_part, axis_, s)};
    }
    case ReduceType::logaddexp: {
      // d out_j / d x_i = exp(x_i - out_j), shifted by the largest output so
      // neither factor overflows over a moderate range; an output of -inf
      // (an empty exclusive prefix) depends on nothing.
      array m = stop_gradient(max(out, std::vector<int>{axis_}, true, s), s);
      m = where(isinf(m, s), zeros_like(m, s), m, s);
      array empty = logical_and(isinf(out, s), less(out, zeros_like(out, s), s), s);
      array w = where(empty, zeros_like(cot, s), multiply(cot, exp(subtract(m, out, s), s), s), s);
      array acc = cumsum(w, axis_, !reverse_, inclusive_, s);
      return {multiply(exp(subtract(x, m, s), s), acc, s)};
    }
  }
  return {zeros_like(x, s)};
}

std::vector<array> Scan::jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                             const std::vector<int>&) {
  const array& x = primals[0];
  const array& t = tangents[0];
  const Stream& s = stream();
  if (type_ == ReduceType::sum) return {cumsum(t, axis_, reverse_, inclusive_, s)};
  array out(x.shape(), x.dtype(), std::make_shared<Scan>(s, type_, axis_, reverse_, inclusive_),
            {x});
  switch (type_) {
    case ReduceType::prod: {
      ProdParts p = prod_parts(x, axis_, reverse_, inclusive_, s);
      array zero = zeros_like(t, s);
      array regular = multiply(
          out,
          cumsum(where(p.is_zero, zero, divide(t, p.safe_x, s), s), axis_, reverse_, inclusive_, s),
          s);
      array t_zero = cumsum(where(p.first_zero, t, zero, s), axis_, reverse_, inclusive_, s);
      return {add(regular, multiply(t_zero, p.y_scan, s), s)};
    }
    case ReduceType::logaddexp: {
      array m = stop_gradient(max(x, std::vector<int>{axis_}, true, s), s);
      m = where(isinf(m, s), zeros_like(m, s), m, s);
      array acc = cumsum(multiply(t, exp(subtract(x, m, s), s), s), axis_, reverse_, inclusive_, s);
      array empty = logical_and(isinf(out, s), less(out, zeros_like(out, s), s), s);
      return {where(empty, zeros_like(acc, s), multiply(acc, exp(subtract(m, out, s), s), s), s)};
    }
    default: {
      array incl = inclusive_ ? out
                              : (type_ == ReduceType::max ? cummax(x, axis_, reverse_, true, s)
                                                          : cummin(x, axis_, reverse_, true, s));
      array picked = take_along_axis(t, extreme_source(x, incl, axis_, reverse_, s), axis_, s);
      if (inclusive_) return {picked};
      // Shift by one in scan order; the first exclusive output is constant.
      int n = x.shape(axis_);
      Shape edge = x.shape();
      edge[axis_] = std::min(n, 1);
      array zero = zeros(edge, t.dtype(), s);
      if (n <= 1) return {zeros_like(t, s)};
      Shape a0(x.ndim(), 0), a1 = x.shape(), step(x.ndim(), 1);
      if (reverse_) {
        a0[axis_] = 1;
        return {concatenate({slice(picked, a0, a1, step, s), zero}, axis_, s)};
      }
      a1[axis_] = n - 1;
      return {concatenate({zero, slice(picked, a0, a1, step, s)}, axis_, s)};
    }
  }
}

std::pair<std::vector<array>, std::vector<int>> Scan::vmap(const std::vector<array>& inputs,
                                                           const std::vector<int>& axes) {
  int b = axes[0];
  int axis = b >= 0 && axis_ >= b ? axis_ + 1 : axis_;
  auto batched = std::make_shared<Scan>(stream(), type_, axis, reverse_, inclusive_);
  return {{array(inputs[0].shape(), inputs[0].dtype(), std::move(batched), {inputs[0]})}, {b}};
}

bool Scan::is_equivalent(const Primitive& other) const { return same_type_and_state(*this, other); }

// The reduction is the name ("CumSum", ...).
PrimitiveState Scan::state() const {
  return {{"axis", int64_t{axis_}}, {"reverse", reverse_}, {"inclusive", inclusive_}};
}

static const bool loom_registered_scans = [] {
  using R = Scan::ReduceType;
  for (auto [type, name] : {std::pair{R::sum, "CumSum"},
                            {R::prod, "CumProd"},
                            {R::max, "CumMax"},
                            {R::min, "CumMin"},
                            {R::logaddexp, "CumLogaddexp"}}) {
    register_primitive(name,
                       [type = type, name = std::string(name)](Stream s, const PrimitiveState& st) {
                         return std::make_shared<Scan>(s, type, state_get<int>(st, name, "axis"),
                                                       state_get<bool>(st, name, "reverse"),
                                                       state_get<bool>(st, name, "inclusive"));
                       });
  }
  return true;
}();

} // namespace loom
