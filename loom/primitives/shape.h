// Shape primitives, whose ops are in ops/shape: views that share their
// input's buffer (Reshape of compatible layouts, Transpose, Broadcast,
// ExpandDims, Squeeze, each output of Split) and Concatenate. Their CPU
// kernels live in backend/cpu/shape.cpp.
#pragma once

#include <optional>
#include <vector>

#include "loom/primitives/primitive.h"

namespace loom {

// --- view layout helpers (device independent) ------------------------------

// Flags of an array with this shape and these element strides: row/col
// contiguity ignore size-1 dimensions; `contiguous` means the elements fill a
// dense block of memory (some permutation of a packed layout, no stride 0 on
// a dimension longer than 1, no negative stride).
Flags layout_flags(const Shape& shape, const Strides& strides);

// Elements of the buffer the layout touches, from the lowest to the highest
// address (the array's size when it is contiguous; 0 when it is empty).
size_t layout_span(const Shape& shape, const Strides& strides);

// Makes `out` a view on `in`'s buffer with the given element strides, starting
// `offset` elements after `in`'s first element; flags and data_size follow
// from the layout.
void make_view(const array& in, array& out, Strides strides, int64_t offset = 0);

// Strides that show `in_shape`/`in_strides` as `out_shape` without moving any
// element, or nullopt when the reshape needs a copy.
std::optional<Strides> reshape_strides(const Shape& in_shape, const Strides& in_strides,
                                       const Shape& out_shape);

// --- primitives ------------------------------------------------------------

class Reshape : public Primitive {
 public:
  Reshape(Stream stream, Shape shape) : Primitive(stream), shape_(std::move(shape)) {}
  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  std::vector<array> vjp(const std::vector<array>& primals, const std::vector<array>& cotangents,
                         const std::vector<int>& argnums,
                         const std::vector<array>& outputs) override;
  std::vector<array> jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                         const std::vector<int>& argnums) override;
  std::pair<std::vector<array>, std::vector<int>> vmap(const std::vector<array>& inputs,
                                                       const std::vector<int>& axes) override;
  bool is_equivalent(const Primitive& other) const override;
  PrimitiveState state() const override;
  const char* name() const override { return "Reshape"; }
  const Shape& shape() const { return shape_; }

 private:
  Shape shape_;
};

// flatten(start, end): a Reshape whose output shape follows its input's, so
// that a shapeless compile of flatten stays shapeless (seed §9.3).
class Flatten : public Reshape {
 public:
  Flatten(Stream stream, Shape shape, int start, int end)
      : Reshape(stream, std::move(shape)), start_(start), end_(end) {}
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  std::vector<array> jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                         const std::vector<int>& argnums) override;
  bool is_equivalent(const Primitive& other) const override;
  PrimitiveState state() const override;
  const char* name() const override { return "Flatten"; }

 private:
  int start_;
  int end_;
};

class Transpose : public Primitive {
 public:
  Transpose(Stream stream, std::vector<int> axes) : Primitive(stream), axes_(std::move(axes)) {}
  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  std::vector<array> vjp(const std::vector<array>& primals, const std::vector<array>& cotangents,
                         const std::vector<int>& argnums,
                         const std::vector<array>& outputs) override;
  std::vector<array> jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                         const std::vector<int>& argnums) override;
  std::pair<std::vector<array>, std::vector<int>> vmap(const std::vector<array>& inputs,
                                                       const std::vector<int>& axes) override;
  bool is_equivalent(const Primitive& other) const override;
  PrimitiveState state() const override;
  const char* name() const override { return "Transpose"; }
  const std::vector<int>& axes() const { return axes_; }

 private:
  std::vector<int> axes_;
};

class Broadcast : public Primitive {
 public:
  Broadcast(Stream stream, Shape shape) : Primitive(stream), shape_(std::move(shape)) {}
  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  std::vector<array> vjp(const std::vector<array>& primals, const std::vector<array>& cotangents,
                         const std::vector<int>& argnums,
                         const std::vector<array>& outputs) override;
  std::vector<array> jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                         const std::vector<int>& argnums) override;
  std::pair<std::vector<array>, std::vector<int>> vmap(const std::vector<array>& inputs,
                                                       const std::vector<int>& axes) override;
  bool is_equivalent(const Primitive& other) const override;
  PrimitiveState state() const override;
  const char* name() const override { return "Broadcast"; }
  PrimitiveTraits traits() const override {
    PrimitiveTraits t;
    t.broadcast = true;
    return t;
  }
  const Shape& shape() const { return shape_; }

 private:
  Shape shape_;
};

// Inserts size-1 axes; `axes` are positions in the output, sorted.
class ExpandDims : public Primitive {
 public:
  ExpandDims(Stream stream, std::vector<int> axes) : Primitive(stream), axes_(std::move(axes)) {}
  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  std::vector<array> vjp(const std::vector<array>& primals, const std::vector<array>& cotangents,
                         const std::vector<int>& argnums,
                         const std::vector<array>& outputs) override;
  std::vector<array> jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                         const std::vector<int>& argnums) override;
  std::pair<std::vector<array>, std::vector<int>> vmap(const std::vector<array>& inputs,
                                                       const std::vector<int>& axes) override;
  bool is_equivalent(const Primitive& other) const override;
  PrimitiveState state() const override;
  const char* name() const override { return "ExpandDims"; }
  const std::vector<int>& axes() const { return axes_; }
  static Shape output_shape(const Shape& in, const std::vector<int>& axes);

 private:
  std::vector<int> axes_;
};

// Removes size-1 axes; `axes` are positions in the input, sorted.
class Squeeze : public Primitive {
 public:
  Squeeze(Stream stream, std::vector<int> axes) : Primitive(stream), axes_(std::move(axes)) {}
  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  std::vector<array> vjp(const std::vector<array>& primals, const std::vector<array>& cotangents,
                         const std::vector<int>& argnums,
                         const std::vector<array>& outputs) override;
  std::vector<array> jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                         const std::vector<int>& argnums) override;
  std::pair<std::vector<array>, std::vector<int>> vmap(const std::vector<array>& inputs,
                                                       const std::vector<int>& axes) override;
  bool is_equivalent(const Primitive& other) const override;
  PrimitiveState state() const override;
  const char* name() const override { return "Squeeze"; }
  const std::vector<int>& axes() const { return axes_; }
  static Shape output_shape(const Shape& in, const std::vector<int>& axes);

 private:
  std::vector<int> axes_;
};

// inputs share a dtype and every dimension but `axis`.
class Concatenate : public Primitive {
 public:
  Concatenate(Stream stream, int axis) : Primitive(stream), axis_(axis) {}
  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  std::vector<array> vjp(const std::vector<array>& primals, const std::vector<array>& cotangents,
                         const std::vector<int>& argnums,
                         const std::vector<array>& outputs) override;
  std::vector<array> jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                         const std::vector<int>& argnums) override;
  std::pair<std::vector<array>, std::vector<int>> vmap(const std::vector<array>& inputs,
                                                       const std::vector<int>& axes) override;
  bool is_equivalent(const Primitive& other) const override;
  PrimitiveState state() const override;
  const char* name() const override { return "Concatenate"; }
  int axis() const { return axis_; }

 private:
  int axis_;
};

// One node, several outputs: piece i spans [bound[i-1], bound[i]) along
// `axis` (bound[-1] = 0, bound[n] = the axis' length); a bound below its
// predecessor gives an empty piece, as in NumPy. Bounds lie in [0, dim].
class Split : public Primitive {
 public:
  Split(Stream stream, Shape bounds, int axis)
      : Primitive(stream), bounds_(std::move(bounds)), axis_(axis) {}
  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  std::vector<array> vjp(const std::vector<array>& primals, const std::vector<array>& cotangents,
                         const std::vector<int>& argnums,
                         const std::vector<array>& outputs) override;
  std::vector<array> jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                         const std::vector<int>& argnums) override;
  std::pair<std::vector<array>, std::vector<int>> vmap(const std::vector<array>& inputs,
                                                       const std::vector<int>& axes) override;
  bool is_equivalent(const Primitive& other) const override;
  PrimitiveState state() const override;
  const char* name() const override { return "Split"; }
  PrimitiveTraits traits() const override {
    PrimitiveTraits t;
    t.multi_output = true;
    return t;
  }
  // (start, length) of each piece along the axis for an axis of length `dim`.
  std::vector<std::pair<int32_t, int32_t>> pieces(int32_t dim) const;

 private:
  Shape bounds_;
  int axis_;
};

} // namespace loom
