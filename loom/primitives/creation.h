// The creation family, whose ops are in ops/creation: arrays made from
// parameters (Full materialises a broadcast value, Arange, Linspace, Eye)
// and the copies AsType and Copy. Kernels live in backend/cpu/creation.cpp.
#pragma once

#include "loom/primitives/primitive.h"
#include "loom/primitives/state_util.h"

namespace loom {

// inputs: {value}, already of the output's shape and dtype (usually a
// broadcast view of a scalar); the output is a fresh row-major buffer.
class Full : public Primitive {
 public:
  explicit Full(Stream stream) : Primitive(stream) {}
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
  const char* name() const override { return "Full"; }
};

// Integer dtypes: start' = T(start), step' = T(start + step) - start', values
// start' + i * step' (NumPy's and MLX's rule). Floating dtypes: start + i * step
// computed in double, then rounded once.
class Arange : public Primitive {
 public:
  Arange(Stream stream, double start, double stop, double step, int32_t size, Dtype dtype)
      : Primitive(stream), start_(start), stop_(stop), step_(step), size_(size), dtype_(dtype) {}
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
  const char* name() const override { return "Arange"; }

  double start() const { return start_; }
  double step() const { return step_; }
  // For an integer dtype: values are base + i * delta in uint64 (two's
  // complement), wrapped into the dtype (both backends use this).
  struct IntegerProgression {
    uint64_t base;
    uint64_t delta;
  };
  IntegerProgression integer_progression() const;

 private:
  double start_;
  double stop_;
  double step_;
  int32_t size_;
  Dtype dtype_;
};

// num evenly spaced values from start to stop inclusive, computed in float32
// as (1 - t) * start + t * stop with t = i / (num - 1) (MLX's formula and
// rounding), then converted to the output dtype.
class Linspace : public Primitive {
 public:
  Linspace(Stream stream, double start, double stop, int num, Dtype dtype)
      : Primitive(stream), start_(start), stop_(stop), num_(num), dtype_(dtype) {}
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
  const char* name() const override { return "Linspace"; }

  double start() const { return start_; }
  double stop() const { return stop_; }

 private:
  double start_;
  double stop_;
  int num_;
  Dtype dtype_;
};

// Ones on the k-th diagonal of an n x m matrix.
class Eye : public Primitive {
 public:
  Eye(Stream stream, int n, int m, int k, Dtype dtype)
      : Primitive(stream), n_(n), m_(m), k_(k), dtype_(dtype) {}
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
  const char* name() const override { return "Eye"; }

  int rows() const { return n_; }
  int cols() const { return m_; }
  int diagonal() const { return k_; }

 private:
  int n_;
  int m_;
  int k_;
  Dtype dtype_;
};

// Element type conversion. Float to integer truncates toward zero; values
// outside the target's range follow the x86 conversion rules MLX inherits
// (see backend/cpu/creation.cpp), complex to real keeps the real part, anything
// to bool is `!= 0`.
class AsType : public Primitive {
 public:
  AsType(Stream stream, Dtype dtype) : Primitive(stream), dtype_(dtype) {}
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
  const char* name() const override { return "AsType"; }
  PrimitiveTraits traits() const override {
    PrimitiveTraits t;
    t.elementwise = true;
    return t;
  }
  Dtype dtype() const { return dtype_; }

 private:
  Dtype dtype_;
};

// The same values in a fresh row-major buffer.
class Copy : public Primitive {
 public:
  explicit Copy(Stream stream) : Primitive(stream) {}
  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  std::vector<array> vjp(const std::vector<array>& primals, const std::vector<array>& cotangents,
                         const std::vector<int>& argnums,
                         const std::vector<array>& outputs) override;
  std::vector<array> jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                         const std::vector<int>& argnums) override;
  std::pair<std::vector<array>, std::vector<int>> vmap(const std::vector<array>& inputs,
                                                       const std::vector<int>& axes) override;
  bool is_equivalent(const Primitive& other) const override {
    return same_type_and_state(*this, other);
  }
  const char* name() const override { return "Copy"; }
  PrimitiveTraits traits() const override {
    PrimitiveTraits t;
    t.elementwise = true;
    t.noop = true;
    return t;
  }
};

} // namespace loom
