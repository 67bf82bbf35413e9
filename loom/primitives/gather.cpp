#include "loom/primitives/gather.h"

#include <algorithm>

#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/gather.h"
#include "loom/ops/shape.h"
#include "loom/primitives/state_util.h"

namespace loom {

namespace {

// Shape of the indexed blocks: the axes of `shape` not in `axes`.
Shape rest_shape(const Shape& shape, const std::vector<int>& axes) {
  Shape out;
  for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
    if (std::find(axes.begin(), axes.end(), d) == axes.end()) out.push_back(shape[d]);
  }
  return out;
}

array batch_first(const array& x, int axis, int32_t batch, const Stream& s) {
  if (axis > 0) return moveaxis(x, axis, 0, s);
  if (axis == 0) return x;
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

// The batched form shared by Gather and Scatter: every operand gets the batch
// as its leading axis and the batch itself becomes one more indexed axis
// (indexed by an iota), so the block layout of the result is unchanged.
struct BatchedIndexing {
  array a;
  std::vector<array> indices;
  std::vector<int> axes;
};

BatchedIndexing batch_indexing(const std::vector<array>& inputs, const std::vector<int>& in_axes,
                               size_t num_indices, const std::vector<int>& axes, const Stream& s) {
  int32_t b = batch_size(inputs, in_axes);
  BatchedIndexing out{batch_first(inputs[0], in_axes[0], b, s), {}, {0}};
  Shape idx_shape = inputs[1].shape();
  if (in_axes[1] >= 0) idx_shape.erase(idx_shape.begin() + in_axes[1]);
  idx_shape.insert(idx_shape.begin(), b);
  Shape iota_shape(idx_shape.size(), 1);
  iota_shape[0] = b;
  out.indices.push_back(
      broadcast_to(reshape(arange(0, b, 1, int32, s), iota_shape, s), idx_shape, s));
  for (size_t j = 0; j < num_indices; ++j) {
    out.indices.push_back(batch_first(inputs[1 + j], in_axes[1 + j], b, s));
    out.axes.push_back(axes[j] + 1);
  }
  return out;
}

std::vector<array> index_args(const std::vector<array>& inputs, size_t num_indices) {
  return {inputs.begin() + 1, inputs.begin() + 1 + num_indices};
}

} // namespace

// --- Gather -------------------------------------------------------------------

std::vector<Shape> Gather::output_shapes(const std::vector<array>& inputs) {
  Shape out = inputs.size() > 1 ? inputs[1].shape() : Shape{};
  Shape rest = rest_shape(inputs[0].shape(), axes_);
  out.insert(out.end(), rest.begin(), rest.end());
  return {out};
}

std::vector<array> Gather::vjp(const std::vector<array>& primals,
                               const std::vector<array>& cotangents,
                               const std::vector<int>& argnums, const std::vector<array>&) {
  std::vector<array> out;
  for (int arg : argnums) {
    if (arg == 0) {
      // Repeated indices must accumulate: the cotangent of a gather is a
      // scatter-add.
      out.push_back(scatter_add(zeros_like(primals[0], stream()), index_args(primals, axes_.size()),
                                cotangents[0], axes_, stream()));
    } else {
      out.push_back(zeros_like(primals[arg], stream()));
    }
  }
  return out;
}

std::vector<array> Gather::jvp(const std::vector<array>& primals,
                               const std::vector<array>& tangents,
                               const std::vector<int>& argnums) {
  for (size_t i = 0; i < argnums.size(); ++i) {
    if (argnums[i] == 0) {
      return {gather(tangents[i], index_args(primals, axes_.size()), axes_, stream())};
    }
  }
  return {zeros(output_shapes(primals)[0], primals[0].dtype(), stream())};
}

std::pair<std::vector<array>, std::vector<int>> Gather::vmap(const std::vector<array>& inputs,
                                                             const std::vector<int>& axes) {
  bool indices_batched = false;
  for (size_t j = 1; j < inputs.size(); ++j) indices_batched |= axes[j] >= 0;
  std::vector<array> indices = index_args(inputs, axes_.size());
  if (axes[0] < 0 && !indices_batched) {
    return {{gather(inputs[0], indices, axes_, stream())}, {-1}};
  }
  if (!indices_batched) {
    // Only the source is batched: its batch axis is one more block axis, and
    // lands after the index axes and the block axes before it.
    std::vector<int> shifted;
    for (int ax : axes_) shifted.push_back(ax >= axes[0] ? ax + 1 : ax);
    int pos = inputs[1].ndim();
    for (int d = 0; d < axes[0]; ++d) {
      if (std::find(shifted.begin(), shifted.end(), d) == shifted.end()) ++pos;
    }
    return {{gather(inputs[0], indices, shifted, stream())}, {pos}};
  }
  BatchedIndexing b = batch_indexing(inputs, axes, axes_.size(), axes_, stream());
  return {{gather(b.a, b.indices, b.axes, stream())}, {0}};
}

bool Gather::is_equivalent(const Primitive& other) const {
  return same_type_and_state(*this, other);
}

// --- Scatter ------------------------------------------------------------------

const char* Scatter::name() const {
  switch (type_) {
    case ReduceType::none:
      return "Scatter";
    case ReduceType::sum:
      return "ScatterAdd";
    case ReduceType::prod:
      return "ScatterProd";
    case ReduceType::max:
      return "ScatterMax";
    case ReduceType::min:
      return "ScatterMin";
  }
  return "Scatter";
}

std::vector<Shape> Scatter::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape()};
}

std::vector<array> Scatter::vjp(const std::vector<array>& primals,
                                const std::vector<array>& cotangents,
                                const std::vector<int>& argnums,
                                const std::vector<array>& outputs) {
  if (type_ == ReduceType::prod) not_implemented("vjp");
  std::vector<array> indices = index_args(primals, axes_.size());
  const array& cot = cotangents[0];
  size_t upd = primals.size() - 1;
  std::vector<array> out;
  if (type_ == ReduceType::max || type_ == ReduceType::min) {
    // The winners get the cotangent: the input where it kept its value, each
    // update where it equals the result at its place (ties share).
    const array& result = outputs[0];
    for (int arg : argnums) {
      if (arg == 0) {
        out.push_back(
            where(equal(result, primals[0], stream()), cot, zeros_like(cot, stream()), stream()));
      } else if (static_cast<size_t>(arg) == upd) {
        array won = equal(gather(result, indices, axes_, stream()), primals[upd], stream());
        array g = gather(cot, indices, axes_, stream());
        out.push_back(where(won, g, zeros_like(g, stream()), stream()));
      } else {
        out.push_back(zeros_like(primals[arg], stream()));
      }
    }
    return out;
  }
  for (int arg : argnums) {
    if (arg == 0) {
      // Overwritten blocks receive nothing; accumulated ones pass it through.
      out.push_back(
          type_ == ReduceType::sum
              ? cot
              : scatter(cot, indices, zeros_like(primals[upd], stream()), axes_, stream()));
    } else if (static_cast<size_t>(arg) == upd) {
      out.push_back(gather(cot, indices, axes_, stream()));
    } else {
      out.push_back(zeros_like(primals[arg], stream()));
    }
  }
  return out;
}

std::vector<array> Scatter::jvp(const std::vector<array>& primals,
                                const std::vector<array>& tangents,
                                const std::vector<int>& argnums) {
  if (type_ == ReduceType::prod) not_implemented("jvp");
  size_t upd = primals.size() - 1;
  array ta = zeros_like(primals[0], stream());
  array tu = zeros_like(primals[upd], stream());
  for (size_t i = 0; i < argnums.size(); ++i) {
    if (argnums[i] == 0) ta = tangents[i];
    if (static_cast<size_t>(argnums[i]) == upd) tu = tangents[i];
  }
  std::vector<array> indices = index_args(primals, axes_.size());
  if (type_ == ReduceType::max || type_ == ReduceType::min) {
    // Each output follows its winner's tangent: the input where it kept its
    // value, else the update that equals the result there.
    array result(primals[0].shape(), primals[0].dtype(),
                 std::make_shared<Scatter>(stream(), axes_, type_), primals);
    array a_won = equal(result, primals[0], stream());
    array t = where(a_won, ta, zeros_like(ta, stream()), stream());
    array upd_won =
        logical_and(equal(gather(result, indices, axes_, stream()), primals[upd], stream()),
                    logical_not(gather(a_won, indices, axes_, stream()), stream()), stream());
    return {scatter_add(t, indices, where(upd_won, tu, zeros_like(tu, stream()), stream()), axes_,
                        stream())};
  }
  return {type_ == ReduceType::sum ? scatter_add(ta, indices, tu, axes_, stream())
                                   : scatter(ta, indices, tu, axes_, stream())};
}

std::pair<std::vector<array>, std::vector<int>> Scatter::vmap(const std::vector<array>& inputs,
                                                              const std::vector<int>& axes) {
  size_t upd = inputs.size() - 1;
  int32_t bsize = batch_size(inputs, axes);
  BatchedIndexing b = batch_indexing(inputs, axes, axes_.size(), axes_, stream());
  // The updates (shape I + rest) gain the batch in front, which the iota
  // index of batch_indexing addresses.
  array updates = batch_first(inputs[upd], axes[upd], bsize, stream());
  auto batched = std::make_shared<Scatter>(stream(), b.axes, type_);
  std::vector<array> args{b.a};
  args.insert(args.end(), b.indices.begin(), b.indices.end());
  args.push_back(updates);
  return {{array(b.a.shape(), b.a.dtype(), std::move(batched), std::move(args))}, {0}};
}

bool Scatter::is_equivalent(const Primitive& other) const {
  return same_type_and_state(*this, other);
}

// --- state and factories ------------------------------------------------------

PrimitiveState Gather::state() const { return {{"axes", state_ints(axes_)}}; }
PrimitiveState Scatter::state() const { return {{"axes", state_ints(axes_)}}; }

LOOM_REGISTER_PRIMITIVE(Gather, [](Stream s, const PrimitiveState& st) {
  return std::make_shared<Gather>(s, state_get<std::vector<int>>(st, "Gather", "axes"));
});

// One factory per name ("Scatter", "ScatterAdd", ...): the reduction is the name.
static const bool loom_registered_scatters = [] {
  using R = Scatter::ReduceType;
  for (auto [type, name] : {std::pair{R::none, "Scatter"},
                            {R::sum, "ScatterAdd"},
                            {R::prod, "ScatterProd"},
                            {R::max, "ScatterMax"},
                            {R::min, "ScatterMin"}}) {
    register_primitive(
        name, [type = type, name = std::string(name)](Stream s, const PrimitiveState& st) {
          return std::make_shared<Scatter>(s, state_get<std::vector<int>>(st, name, "axes"), type);
        });
  }
  return true;
}();

} // namespace loom
