#include "loom/primitives/indexing.h"

#include <algorithm>

#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/shape.h"

namespace loom {

namespace {

array batch_first(const array& x, int axis, const Stream& s) {
  return axis == 0 ? x : moveaxis(x, axis, 0, s);
}

// x with a leading batch axis of size `batch`, whether or not it had one.
array batched(const array& x, int axis, int32_t batch, const Stream& s) {
  if (axis >= 0) return batch_first(x, axis, s);
  Shape shape = x.shape();
  shape.insert(shape.begin(), batch);
  return broadcast_to(expand_dims(x, 0, s), shape, s);
}

int32_t batch_size(const std::vector<array>& inputs, const std::vector<int>& axes) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (axes[i] >= 0) return inputs[i].shape(axes[i]);
  }
  return 1;
}

Shape prepend(const Shape& s, int32_t v) {
  Shape out = s;
  out.insert(out.begin(), v);
  return out;
}

void print_shape_param(std::ostream& os, const char* label, const Shape& s) {
  os << label << "=" << shape_to_string(s);
}

int32_t slice_length(int32_t start, int32_t stop, int32_t step) {
  if (step > 0) return stop > start ? (stop - start + step - 1) / step : 0;
  return start > stop ? (start - stop - step - 1) / (-step) : 0;
}

} // namespace

// --- Slice --------------------------------------------------------------------

std::vector<Shape> Slice::output_shapes(const std::vector<array>&) {
  Shape out(start_.size());
  for (size_t d = 0; d < out.size(); ++d) out[d] = slice_length(start_[d], stop_[d], strides_[d]);
  return {out};
}

std::vector<array> Slice::vjp(const std::vector<array>& primals,
                              const std::vector<array>& cotangents, const std::vector<int>&,
                              const std::vector<array>&) {
  return {slice_update(zeros_like(primals[0], stream()), cotangents[0], start_, stop_, strides_,
                       stream())};
}

std::vector<array> Slice::jvp(const std::vector<array>&, const std::vector<array>& tangents,
                              const std::vector<int>&) {
  return {slice(tangents[0], start_, stop_, strides_, stream())};
}

std::pair<std::vector<array>, std::vector<int>> Slice::vmap(const std::vector<array>& inputs,
                                                            const std::vector<int>& axes) {
  if (axes[0] < 0) return {{slice(inputs[0], start_, stop_, strides_, stream())}, {-1}};
  array x = batch_first(inputs[0], axes[0], stream());
  return {
      {slice(x, prepend(start_, 0), prepend(stop_, x.shape(0)), prepend(strides_, 1), stream())},
      {0}};
}

bool Slice::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Slice*>(&other);
  return o && o->start_ == start_ && o->stop_ == stop_ && o->strides_ == strides_;
}

void Slice::print_params(std::ostream& os) const {
  print_shape_param(os, "start", start_);
  print_shape_param(os << ", ", "stop", stop_);
  print_shape_param(os << ", ", "strides", strides_);
}

// --- SliceUpdate --------------------------------------------------------------

std::vector<Shape> SliceUpdate::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape()};
}

std::vector<array> SliceUpdate::vjp(const std::vector<array>& primals,
                                    const std::vector<array>& cotangents,
                                    const std::vector<int>& argnums, const std::vector<array>&) {
  std::vector<array> out;
  for (int arg : argnums) {
    if (arg == 0) {
      // The overwritten region receives no gradient.
      out.push_back(slice_update(cotangents[0], zeros_like(primals[1], stream()), start_, stop_,
                                 strides_, stream()));
    } else {
      out.push_back(slice(cotangents[0], start_, stop_, strides_, stream()));
    }
  }
  return out;
}

std::vector<array> SliceUpdate::jvp(const std::vector<array>& primals,
                                    const std::vector<array>& tangents,
                                    const std::vector<int>& argnums) {
  array ta = zeros_like(primals[0], stream());
  array tu = zeros_like(primals[1], stream());
  for (size_t i = 0; i < argnums.size(); ++i) {
    (argnums[i] == 0 ? ta : tu) = tangents[i];
  }
  return {slice_update(ta, tu, start_, stop_, strides_, stream())};
}

std::pair<std::vector<array>, std::vector<int>> SliceUpdate::vmap(const std::vector<array>& inputs,
                                                                  const std::vector<int>& axes) {
  const int32_t batch = batch_size(inputs, axes);
  array a = batched(inputs[0], axes[0], batch, stream());
  // An unbatched update broadcasts over the batch inside slice_update.
  array update = axes[1] >= 0 ? batch_first(inputs[1], axes[1], stream()) : inputs[1];
  return {{slice_update(a, update, prepend(start_, 0), prepend(stop_, batch), prepend(strides_, 1),
                        stream())},
          {0}};
}

bool SliceUpdate::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const SliceUpdate*>(&other);
  return o && o->start_ == start_ && o->stop_ == stop_ && o->strides_ == strides_;
}

void SliceUpdate::print_params(std::ostream& os) const {
  print_shape_param(os, "start", start_);
  print_shape_param(os << ", ", "stop", stop_);
  print_shape_param(os << ", ", "strides", strides_);
}

// --- Concatenate --------------------------------------------------------------

std::vector<Shape> Concatenate::output_shapes(const std::vector<array>& inputs) {
  Shape out = inputs[0].shape();
  out[axis_] = 0;
  for (auto& in : inputs) out[axis_] += in.shape(axis_);
  return {out};
}

std::vector<array> Concatenate::vjp(const std::vector<array>& primals,
                                    const std::vector<array>& cotangents,
                                    const std::vector<int>& argnums, const std::vector<array>&) {
  std::vector<int32_t> offsets{0};
  for (auto& p : primals) offsets.push_back(offsets.back() + p.shape(axis_));
  const array& cot = cotangents[0];
  std::vector<array> out;
  for (int arg : argnums) {
    Shape start(cot.ndim(), 0);
    Shape stop = cot.shape();
    Shape strides(cot.ndim(), 1);
    start[axis_] = offsets[arg];
    stop[axis_] = offsets[arg + 1];
    out.push_back(slice(cot, start, stop, strides, stream()));
  }
  return out;
}

std::vector<array> Concatenate::jvp(const std::vector<array>& primals,
                                    const std::vector<array>& tangents,
                                    const std::vector<int>& argnums) {
  std::vector<array> parts;
  for (auto& p : primals) parts.push_back(zeros_like(p, stream()));
  for (size_t i = 0; i < argnums.size(); ++i) parts[argnums[i]] = tangents[i];
  return {concatenate(parts, axis_, stream())};
}

std::pair<std::vector<array>, std::vector<int>> Concatenate::vmap(const std::vector<array>& inputs,
                                                                  const std::vector<int>& axes) {
  const int32_t batch = batch_size(inputs, axes);
  std::vector<array> parts;
  for (size_t i = 0; i < inputs.size(); ++i) {
    parts.push_back(batched(inputs[i], axes[i], batch, stream()));
  }
  return {{concatenate(parts, axis_ + 1, stream())}, {0}};
}

bool Concatenate::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Concatenate*>(&other);
  return o && o->axis_ == axis_;
}

void Concatenate::print_params(std::ostream& os) const { os << "axis=" << axis_; }

// --- Split --------------------------------------------------------------------

std::vector<std::pair<int32_t, int32_t>> Split::pieces(int32_t dim) const {
  std::vector<std::pair<int32_t, int32_t>> out;
  int32_t prev = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    int32_t stop = i < bounds_.size() ? std::min(bounds_[i], dim) : dim;
    out.emplace_back(std::min(prev, dim), std::max(0, stop - prev));
    prev = stop;
  }
  return out;
}

std::vector<Shape> Split::output_shapes(const std::vector<array>& inputs) {
  std::vector<Shape> out;
  for (auto [start, length] : pieces(inputs[0].shape(axis_))) {
    Shape shape = inputs[0].shape();
    shape[axis_] = length;
    out.push_back(shape);
  }
  return out;
}

std::vector<array> Split::vjp(const std::vector<array>& primals,
                              const std::vector<array>& cotangents, const std::vector<int>&,
                              const std::vector<array>&) {
  const array& in = primals[0];
  auto parts = pieces(in.shape(axis_));
  bool tiles = true; // pieces in order, without overlap
  for (size_t i = 1; i < bounds_.size(); ++i) tiles = tiles && bounds_[i - 1] <= bounds_[i];
  if (tiles && cotangents.size() == parts.size()) {
    std::vector<array> cots;
    for (auto& c : cotangents) cots.push_back(astype(c, in.dtype(), stream()));
    return {concatenate(cots, axis_, stream())};
  }
  // Overlapping pieces (bounds out of order): accumulate each region.
  array g = zeros_like(in, stream());
  for (size_t i = 0; i < parts.size() && i < cotangents.size(); ++i) {
    auto [start, length] = parts[i];
    if (length == 0) continue;
    Shape lo(in.ndim(), 0);
    Shape hi = in.shape();
    Shape step(in.ndim(), 1);
    lo[axis_] = start;
    hi[axis_] = start + length;
    g = slice_update(g, add(slice(g, lo, hi, step, stream()), cotangents[i], stream()), lo, hi,
                     step, stream());
  }
  return {g};
}

std::vector<array> Split::jvp(const std::vector<array>&, const std::vector<array>& tangents,
                              const std::vector<int>&) {
  return split(tangents[0], bounds_, axis_, stream());
}

std::pair<std::vector<array>, std::vector<int>> Split::vmap(const std::vector<array>& inputs,
                                                            const std::vector<int>& axes) {
  if (axes[0] < 0) {
    auto out = split(inputs[0], bounds_, axis_, stream());
    return {out, std::vector<int>(out.size(), -1)};
  }
  array x = batch_first(inputs[0], axes[0], stream());
  auto out = split(x, bounds_, axis_ + 1, stream());
  return {out, std::vector<int>(out.size(), 0)};
}

bool Split::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Split*>(&other);
  return o && o->bounds_ == bounds_ && o->axis_ == axis_;
}

void Split::print_params(std::ostream& os) const {
  print_shape_param(os, "indices", bounds_);
  os << ", axis=" << axis_;
}

} // namespace loom
