#include "loom/primitives/shape.h"

#include <algorithm>
#include <cstdlib>
#include <numeric>

#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/reduce.h"
#include "loom/ops/shape.h"
#include "loom/ops/slice.h"
#include "loom/primitives/batching.h"
#include "loom/primitives/state_util.h"

namespace loom {

// --- view layout helpers ----------------------------------------------------

Flags layout_flags(const Shape& shape, const Strides& strides) {
  Flags f{true, true, true};
  if (shape_size(shape) == 0) return f;
  const int nd = static_cast<int>(shape.size());
  int64_t expected = 1;
  for (int d = nd - 1; d >= 0; --d) {
    if (shape[d] == 1) continue;
    if (strides[d] != expected) f.row_contiguous = false;
    expected *= shape[d];
  }
  expected = 1;
  for (int d = 0; d < nd; ++d) {
    if (shape[d] == 1) continue;
    if (strides[d] != expected) f.col_contiguous = false;
    expected *= shape[d];
  }
  if (f.row_contiguous || f.col_contiguous) return f;
  // Dense in some other order: the strides, sorted, must pack the dimensions.
  std::vector<std::pair<int64_t, int64_t>> dims; // (stride, extent)
  for (int d = 0; d < nd; ++d) {
    if (shape[d] == 1) continue;
    if (strides[d] <= 0) {
      f.contiguous = false;
      return f;
    }
    dims.emplace_back(strides[d], shape[d]);
  }
  std::sort(dims.begin(), dims.end());
  expected = 1;
  for (auto [stride, extent] : dims) {
    if (stride != expected) {
      f.contiguous = false;
      return f;
    }
    expected *= extent;
  }
  return f;
}

size_t layout_span(const Shape& shape, const Strides& strides) {
  if (shape_size(shape) == 0) return 0;
  size_t span = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    span += static_cast<size_t>(std::llabs(strides[d])) * static_cast<size_t>(shape[d] - 1);
  }
  return span;
}

void make_view(const array& in, array& out, Strides strides, int64_t offset) {
  Flags flags = layout_flags(out.shape(), strides);
  size_t span = layout_span(out.shape(), strides);
  if (out.size() == 0) offset = 0; // an empty view addresses nothing
  out.copy_shared_buffer(in, std::move(strides), flags, span, offset);
}

std::optional<Strides> reshape_strides(const Shape& in_shape, const Strides& in_strides,
                                       const Shape& out_shape) {
  if (shape_size(in_shape) == 0) return row_major_strides(out_shape);
  // Size-1 input dimensions carry no layout information.
  Shape old_dims;
  Strides old_strides;
  for (size_t d = 0; d < in_shape.size(); ++d) {
    if (in_shape[d] == 1) continue;
    old_dims.push_back(in_shape[d]);
    old_strides.push_back(in_strides[d]);
  }
  const size_t n_old = old_dims.size();
  const size_t n_new = out_shape.size();
  Strides out(n_new, 1);
  size_t oi = 0;
  size_t ni = 0;
  // Match groups of old and new dimensions with equal products; a group can
  // be relabelled only if its old dimensions are nested in memory.
  while (oi < n_old && ni < n_new) {
    int64_t old_prod = old_dims[oi];
    int64_t new_prod = out_shape[ni];
    size_t oj = oi + 1;
    size_t nj = ni + 1;
    while (old_prod != new_prod) {
      if (new_prod < old_prod) {
        new_prod *= out_shape[nj++];
      } else {
        old_prod *= old_dims[oj++];
      }
    }
    for (size_t k = oi; k + 1 < oj; ++k) {
      if (old_strides[k] != old_strides[k + 1] * old_dims[k + 1]) return std::nullopt;
    }
    out[nj - 1] = old_strides[oj - 1];
    for (size_t k = nj - 1; k > ni; --k) out[k - 1] = out[k] * out_shape[k];
    oi = oj;
    ni = nj;
  }
  // Trailing size-1 dimensions.
  for (size_t k = ni; k < n_new; ++k) out[k] = 1;
  return out;
}

// --- Reshape ------------------------------------------------------------------

std::vector<Shape> Reshape::output_shapes(const std::vector<array>&) { return {shape_}; }

std::vector<array> Reshape::vjp(const std::vector<array>& primals,
                                const std::vector<array>& cotangents, const std::vector<int>&,
                                const std::vector<array>&) {
  return {reshape(cotangents[0], primals[0].shape(), stream())};
}

std::vector<array> Reshape::jvp(const std::vector<array>&, const std::vector<array>& tangents,
                                const std::vector<int>&) {
  return {reshape(tangents[0], shape_, stream())};
}

std::pair<std::vector<array>, std::vector<int>> Reshape::vmap(const std::vector<array>& inputs,
                                                              const std::vector<int>& axes) {
  if (axes[0] < 0) return {{reshape(inputs[0], shape_, stream())}, {-1}};
  array x = batch_first(inputs[0], axes[0], stream());
  Shape shape = shape_;
  shape.insert(shape.begin(), x.shape(0));
  return {{reshape(x, shape, stream())}, {0}};
}

bool Reshape::is_equivalent(const Primitive& other) const {
  return same_type_and_state(*this, other);
}

std::vector<Shape> Flatten::output_shapes(const std::vector<array>& inputs) {
  const Shape& in = inputs[0].shape();
  if (end_ >= static_cast<int>(in.size())) {
    throw std::invalid_argument("[flatten] Axis " + std::to_string(end_) +
                                " is out of bounds for an input of shape " + shape_to_string(in) +
                                ".");
  }
  Shape out(in.begin(), in.begin() + start_);
  int32_t merged = 1;
  for (int d = start_; d <= end_; ++d) merged *= in[d];
  out.push_back(merged);
  out.insert(out.end(), in.begin() + end_ + 1, in.end());
  return {out};
}

std::vector<array> Flatten::jvp(const std::vector<array>&, const std::vector<array>& tangents,
                                const std::vector<int>&) {
  return {flatten(tangents[0], start_, end_, stream())};
}

bool Flatten::is_equivalent(const Primitive& other) const {
  return same_type_and_state(*this, other);
}

// --- Transpose ----------------------------------------------------------------

std::vector<Shape> Transpose::output_shapes(const std::vector<array>& inputs) {
  Shape out;
  for (int ax : axes_) out.push_back(inputs[0].shape(ax));
  return {out};
}

std::vector<array> Transpose::vjp(const std::vector<array>&, const std::vector<array>& cotangents,
                                  const std::vector<int>&, const std::vector<array>&) {
  std::vector<int> inverse(axes_.size());
  for (size_t i = 0; i < axes_.size(); ++i) inverse[axes_[i]] = static_cast<int>(i);
  return {transpose(cotangents[0], inverse, stream())};
}

std::vector<array> Transpose::jvp(const std::vector<array>&, const std::vector<array>& tangents,
                                  const std::vector<int>&) {
  return {transpose(tangents[0], axes_, stream())};
}

std::pair<std::vector<array>, std::vector<int>> Transpose::vmap(const std::vector<array>& inputs,
                                                                const std::vector<int>& axes) {
  if (axes[0] < 0) return {{transpose(inputs[0], axes_, stream())}, {-1}};
  const int b = axes[0];
  std::vector<int> perm{b};
  for (int ax : axes_) perm.push_back(ax >= b ? ax + 1 : ax);
  return {{transpose(inputs[0], perm, stream())}, {0}};
}

bool Transpose::is_equivalent(const Primitive& other) const {
  return same_type_and_state(*this, other);
}

// --- Broadcast ----------------------------------------------------------------

std::vector<Shape> Broadcast::output_shapes(const std::vector<array>&) { return {shape_}; }

std::vector<array> Broadcast::vjp(const std::vector<array>& primals,
                                  const std::vector<array>& cotangents, const std::vector<int>&,
                                  const std::vector<array>&) {
  const array& in = primals[0];
  const int added = static_cast<int>(shape_.size()) - in.ndim();
  std::vector<int> reduce_axes;
  for (int d = 0; d < static_cast<int>(shape_.size()); ++d) {
    if (d < added || (in.shape(d - added) == 1 && shape_[d] != 1)) reduce_axes.push_back(d);
  }
  array g = cotangents[0];
  if (!reduce_axes.empty()) g = sum(g, reduce_axes, true, stream());
  if (g.shape() != in.shape()) g = reshape(g, in.shape(), stream());
  return {g};
}

std::vector<array> Broadcast::jvp(const std::vector<array>&, const std::vector<array>& tangents,
                                  const std::vector<int>&) {
  return {broadcast_to(tangents[0], shape_, stream())};
}

std::pair<std::vector<array>, std::vector<int>> Broadcast::vmap(const std::vector<array>& inputs,
                                                                const std::vector<int>& axes) {
  if (axes[0] < 0) return {{broadcast_to(inputs[0], shape_, stream())}, {-1}};
  array x = batch_first(inputs[0], axes[0], stream());
  // Align the unbatched dimensions with the target's trailing ones.
  const int added = static_cast<int>(shape_.size()) - (x.ndim() - 1);
  if (added > 0) {
    std::vector<int> new_axes(added);
    std::iota(new_axes.begin(), new_axes.end(), 1);
    x = expand_dims(x, new_axes, stream());
  }
  Shape shape = shape_;
  shape.insert(shape.begin(), x.shape(0));
  return {{broadcast_to(x, shape, stream())}, {0}};
}

bool Broadcast::is_equivalent(const Primitive& other) const {
  return same_type_and_state(*this, other);
}

// --- ExpandDims ---------------------------------------------------------------

Shape ExpandDims::output_shape(const Shape& in, const std::vector<int>& axes) {
  Shape out(in.size() + axes.size(), 1);
  size_t next_in = 0;
  size_t next_axis = 0;
  for (size_t d = 0; d < out.size(); ++d) {
    if (next_axis < axes.size() && axes[next_axis] == static_cast<int>(d)) {
      ++next_axis;
    } else {
      out[d] = in[next_in++];
    }
  }
  return out;
}

std::vector<Shape> ExpandDims::output_shapes(const std::vector<array>& inputs) {
  return {output_shape(inputs[0].shape(), axes_)};
}

std::vector<array> ExpandDims::vjp(const std::vector<array>&, const std::vector<array>& cotangents,
                                   const std::vector<int>&, const std::vector<array>&) {
  return {squeeze(cotangents[0], axes_, stream())};
}

std::vector<array> ExpandDims::jvp(const std::vector<array>&, const std::vector<array>& tangents,
                                   const std::vector<int>&) {
  return {expand_dims(tangents[0], axes_, stream())};
}

std::pair<std::vector<array>, std::vector<int>> ExpandDims::vmap(const std::vector<array>& inputs,
                                                                 const std::vector<int>& axes) {
  if (axes[0] < 0) return {{expand_dims(inputs[0], axes_, stream())}, {-1}};
  array x = batch_first(inputs[0], axes[0], stream());
  std::vector<int> shifted;
  for (int ax : axes_) shifted.push_back(ax + 1);
  return {{expand_dims(x, shifted, stream())}, {0}};
}

bool ExpandDims::is_equivalent(const Primitive& other) const {
  return same_type_and_state(*this, other);
}

// --- Squeeze ------------------------------------------------------------------

Shape Squeeze::output_shape(const Shape& in, const std::vector<int>& axes) {
  Shape out;
  size_t next_axis = 0;
  for (size_t d = 0; d < in.size(); ++d) {
    if (next_axis < axes.size() && axes[next_axis] == static_cast<int>(d)) {
      ++next_axis;
    } else {
      out.push_back(in[d]);
    }
  }
  return out;
}

std::vector<Shape> Squeeze::output_shapes(const std::vector<array>& inputs) {
  return {output_shape(inputs[0].shape(), axes_)};
}

std::vector<array> Squeeze::vjp(const std::vector<array>&, const std::vector<array>& cotangents,
                                const std::vector<int>&, const std::vector<array>&) {
  return {expand_dims(cotangents[0], axes_, stream())};
}

std::vector<array> Squeeze::jvp(const std::vector<array>&, const std::vector<array>& tangents,
                                const std::vector<int>&) {
  return {squeeze(tangents[0], axes_, stream())};
}

std::pair<std::vector<array>, std::vector<int>> Squeeze::vmap(const std::vector<array>& inputs,
                                                              const std::vector<int>& axes) {
  if (axes[0] < 0) return {{squeeze(inputs[0], axes_, stream())}, {-1}};
  array x = batch_first(inputs[0], axes[0], stream());
  std::vector<int> shifted;
  for (int ax : axes_) shifted.push_back(ax + 1);
  return {{squeeze(x, shifted, stream())}, {0}};
}

bool Squeeze::is_equivalent(const Primitive& other) const {
  return same_type_and_state(*this, other);
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
  return same_type_and_state(*this, other);
}

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
  return same_type_and_state(*this, other);
}

// --- state and factories ------------------------------------------------------

PrimitiveState Reshape::state() const { return {{"shape", state_ints(shape_)}}; }
PrimitiveState Flatten::state() const {
  return {
      {"shape", state_ints(shape())}, {"start_axis", int64_t{start_}}, {"end_axis", int64_t{end_}}};
}
PrimitiveState Transpose::state() const { return {{"axes", state_ints(axes_)}}; }
PrimitiveState Broadcast::state() const { return {{"shape", state_ints(shape_)}}; }
PrimitiveState ExpandDims::state() const { return {{"axes", state_ints(axes_)}}; }
PrimitiveState Squeeze::state() const { return {{"axes", state_ints(axes_)}}; }
PrimitiveState Concatenate::state() const { return {{"axis", int64_t{axis_}}}; }
PrimitiveState Split::state() const {
  return {{"indices", state_ints(bounds_)}, {"axis", int64_t{axis_}}};
}

LOOM_REGISTER_PRIMITIVE(Reshape, [](Stream s, const PrimitiveState& st) {
  return std::make_shared<Reshape>(s, state_get<Shape>(st, "Reshape", "shape"));
});
LOOM_REGISTER_PRIMITIVE(Flatten, [](Stream s, const PrimitiveState& st) {
  return std::make_shared<Flatten>(s, state_get<Shape>(st, "Flatten", "shape"),
                                   state_get<int>(st, "Flatten", "start_axis"),
                                   state_get<int>(st, "Flatten", "end_axis"));
});
LOOM_REGISTER_PRIMITIVE(Transpose, [](Stream s, const PrimitiveState& st) {
  return std::make_shared<Transpose>(s, state_get<std::vector<int>>(st, "Transpose", "axes"));
});
LOOM_REGISTER_PRIMITIVE(Broadcast, [](Stream s, const PrimitiveState& st) {
  return std::make_shared<Broadcast>(s, state_get<Shape>(st, "Broadcast", "shape"));
});
LOOM_REGISTER_PRIMITIVE(ExpandDims, [](Stream s, const PrimitiveState& st) {
  return std::make_shared<ExpandDims>(s, state_get<std::vector<int>>(st, "ExpandDims", "axes"));
});
LOOM_REGISTER_PRIMITIVE(Squeeze, [](Stream s, const PrimitiveState& st) {
  return std::make_shared<Squeeze>(s, state_get<std::vector<int>>(st, "Squeeze", "axes"));
});
LOOM_REGISTER_PRIMITIVE(Concatenate, [](Stream s, const PrimitiveState& st) {
  return std::make_shared<Concatenate>(s, state_get<int>(st, "Concatenate", "axis"));
});
LOOM_REGISTER_PRIMITIVE(Split, [](Stream s, const PrimitiveState& st) {
  return std::make_shared<Split>(s, state_get<Shape>(st, "Split", "indices"),
                                 state_get<int>(st, "Split", "axis"));
});

} // namespace loom
