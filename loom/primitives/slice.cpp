#include "loom/primitives/slice.h"

#include <algorithm>

#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/shape.h"
#include "loom/ops/slice.h"
#include "loom/primitives/batching.h"
#include "loom/primitives/state_util.h"

namespace loom {

namespace {

Shape prepend(const Shape& s, int32_t v) {
  Shape out = s;
  out.insert(out.begin(), v);
  return out;
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
  return same_type_and_state(*this, other);
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
  return same_type_and_state(*this, other);
}

// --- state and factories ------------------------------------------------------

PrimitiveState Slice::state() const {
  return {{"start", state_ints(start_)},
          {"stop", state_ints(stop_)},
          {"strides", state_ints(strides_)}};
}
PrimitiveState SliceUpdate::state() const {
  return {{"start", state_ints(start_)},
          {"stop", state_ints(stop_)},
          {"strides", state_ints(strides_)}};
}

LOOM_REGISTER_PRIMITIVE(Slice, [](Stream s, const PrimitiveState& st) {
  return std::make_shared<Slice>(s, state_get<Shape>(st, "Slice", "start"),
                                 state_get<Shape>(st, "Slice", "stop"),
                                 state_get<Shape>(st, "Slice", "strides"));
});
LOOM_REGISTER_PRIMITIVE(SliceUpdate, [](Stream s, const PrimitiveState& st) {
  return std::make_shared<SliceUpdate>(s, state_get<Shape>(st, "SliceUpdate", "start"),
                                       state_get<Shape>(st, "SliceUpdate", "stop"),
                                       state_get<Shape>(st, "SliceUpdate", "strides"));
});

} // namespace loom
