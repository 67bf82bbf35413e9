// Sorting and selection along one axis: sorted values, the sorting
// permutation, and the partial-sort permutation (argpartition). partition and
// topk are built from ArgPartition so values and indices always agree.
//
// Order: ascending, NaN after everything else (as MLX and NumPy); argsort is
// stable. Kernels live in backend/cpu/sort.cpp.
#pragma once

#include "loom/primitives/primitive.h"

namespace loom {

class Sort : public Primitive {
 public:
  // top_indices: the indices of the kth largest along the axis (kth in
  // (0, dim), the output's extent there), i.e. argpartition's last kth
  // entries, without writing the rest of the permutation (topk).
  enum class Kind { values, indices, partition_indices, top_indices };
  // kth is used by partition_indices (already in [0, dim)) and top_indices.
  Sort(Stream stream, Kind kind, int axis, int kth = 0)
      : Primitive(stream), kind_(kind), axis_(axis), kth_(kth) {}
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
  const char* name() const override;

 private:
  Kind kind_;
  int axis_;
  int kth_;
};

// inputs: {sorted (1-D, ascending, NaN last), values} in one dtype. Output:
// for each value, the number of sorted elements less than it (left) or less
// than or equal to it (right), as uint32.
class SearchSorted : public Primitive {
 public:
  SearchSorted(Stream stream, bool right) : Primitive(stream), right_(right) {}
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
  const char* name() const override { return "SearchSorted"; }

 private:
  bool right_;
};

} // namespace loom
