// The LAPACK-backed primitives of mx.linalg: factorizations, inverses,
// eigen-decompositions and linear solves. Each works on the last two axes and
// batches over the leading ones; inputs arrive validated and in the op's
// dtype (ops/linalg_decomp.cpp). Kernels: backend/cpu/linalg_decomp.cpp.
#pragma once

#include <string>

#include "loom/primitives/primitive.h"

namespace loom {

// What the decompositions share: equivalence by state, vmap by moving every
// batched axis to the front (the kernels batch over leading axes), and a
// multi-output trait.
class LinalgPrimitive : public Primitive {
 public:
  LinalgPrimitive(Stream stream, bool multi_output)
      : Primitive(stream), multi_output_(multi_output) {}
  bool is_equivalent(const Primitive& other) const override;
  std::pair<std::vector<array>, std::vector<int>> vmap(const std::vector<array>& inputs,
                                                       const std::vector<int>& axes) override;
  PrimitiveTraits traits() const override {
    PrimitiveTraits t;
    t.multi_output = multi_output_;
    return t;
  }
  // Output dtypes for inputs of these dtypes (vmap rebuilds the node).
  virtual std::vector<Dtype> output_dtypes(const std::vector<array>& inputs) const;

 protected:
  // The outputs a rule may read: reverse mode passes zeros in place of
  // outputs the caller dropped, so unless every one is this node's own they
  // are computed again from the primals.
  std::vector<array> own_outputs(const std::vector<array>& primals,
                                 const std::vector<array>& outputs);

 private:
  bool multi_output_;
};

#define LOOM_LINALG_PRIMITIVE_BODY(NAME)                                                 \
  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override; \
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;           \
  const char* name() const override { return #NAME; }                                    \
  PrimitiveState state() const override;

// A = P L U with partial pivoting. Outputs: LU packed (m, n); pivots (min(m,n)),
// uint32, LAPACK's row interchanges made 0-based; and the row permutation p
// with A[i] = (L U)[p[i]] (what mx.linalg.lu returns).
class LUF : public LinalgPrimitive {
 public:
  explicit LUF(Stream stream) : LinalgPrimitive(stream, true) {}
  LOOM_LINALG_PRIMITIVE_BODY(LUF)
  std::vector<Dtype> output_dtypes(const std::vector<array>& inputs) const override;
  std::vector<array> vjp(const std::vector<array>& primals, const std::vector<array>& cotangents,
                         const std::vector<int>& argnums,
                         const std::vector<array>& outputs) override;
  std::vector<array> jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                         const std::vector<int>& argnums) override;
};

// The inverse of a square matrix; with `tri`, of its lower (or `upper`)
// triangle, the other triangle ignored and returned as zeros.
class Inverse : public LinalgPrimitive {
 public:
  Inverse(Stream stream, bool tri, bool upper)
      : LinalgPrimitive(stream, false), tri_(tri), upper_(upper) {}
  LOOM_LINALG_PRIMITIVE_BODY(Inverse)
  std::vector<array> vjp(const std::vector<array>& primals, const std::vector<array>& cotangents,
                         const std::vector<int>& argnums,
                         const std::vector<array>& outputs) override;
  std::vector<array> jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                         const std::vector<int>& argnums) override;

 private:
  bool tri_;
  bool upper_;
};

// The Cholesky factor L (A = L Lᵀ) or U (A = Uᵀ U) of a symmetric positive
// definite matrix, read from its lower (upper) triangle.
class Cholesky : public LinalgPrimitive {
 public:
  Cholesky(Stream stream, bool upper) : LinalgPrimitive(stream, false), upper_(upper) {}
  LOOM_LINALG_PRIMITIVE_BODY(Cholesky)
  std::vector<array> vjp(const std::vector<array>& primals, const std::vector<array>& cotangents,
                         const std::vector<int>& argnums,
                         const std::vector<array>& outputs) override;
  std::vector<array> jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                         const std::vector<int>& argnums) override;

 private:
  bool upper_;
};

// Reduced QR: Q (m, k) with orthonormal columns, R (k, n) upper triangular,
// k = min(m, n).
class QRF : public LinalgPrimitive {
 public:
  explicit QRF(Stream stream) : LinalgPrimitive(stream, true) {}
  LOOM_LINALG_PRIMITIVE_BODY(QRF)
  std::vector<array> vjp(const std::vector<array>& primals, const std::vector<array>& cotangents,
                         const std::vector<int>& argnums,
                         const std::vector<array>& outputs) override;
  std::vector<array> jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                         const std::vector<int>& argnums) override;
};

// Full SVD: U (m, m), S (k) descending, Vt (n, n); with compute_uv false,
// S alone. S is real for complex64 input.
class SVD : public LinalgPrimitive {
 public:
  SVD(Stream stream, bool compute_uv)
      : LinalgPrimitive(stream, compute_uv), compute_uv_(compute_uv) {}
  LOOM_LINALG_PRIMITIVE_BODY(SVD)
  std::vector<Dtype> output_dtypes(const std::vector<array>& inputs) const override;
  std::vector<array> vjp(const std::vector<array>& primals, const std::vector<array>& cotangents,
                         const std::vector<int>& argnums,
                         const std::vector<array>& outputs) override;
  std::vector<array> jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                         const std::vector<int>& argnums) override;

 private:
  bool compute_uv_;
};

// Eigenvalues (ascending, real) and, with compute_vectors, the orthonormal
// eigenvectors (columns) of a symmetric / Hermitian matrix read from the
// triangle `uplo` names ("L" or "U").
class Eigh : public LinalgPrimitive {
 public:
  Eigh(Stream stream, std::string uplo, bool compute_vectors)
      : LinalgPrimitive(stream, compute_vectors),
        uplo_(std::move(uplo)),
        compute_vectors_(compute_vectors) {}
  LOOM_LINALG_PRIMITIVE_BODY(Eigh)
  std::vector<Dtype> output_dtypes(const std::vector<array>& inputs) const override;
  std::vector<array> vjp(const std::vector<array>& primals, const std::vector<array>& cotangents,
                         const std::vector<int>& argnums,
                         const std::vector<array>& outputs) override;
  std::vector<array> jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                         const std::vector<int>& argnums) override;

 private:
  std::string uplo_;
  bool compute_vectors_;
};

// Eigenvalues and right eigenvectors of a general square matrix, complex64
// (as MLX, whatever the real input precision).
class Eig : public LinalgPrimitive {
 public:
  Eig(Stream stream, bool compute_vectors)
      : LinalgPrimitive(stream, compute_vectors), compute_vectors_(compute_vectors) {}
  LOOM_LINALG_PRIMITIVE_BODY(Eig)
  std::vector<Dtype> output_dtypes(const std::vector<array>& inputs) const override;

 private:
  bool compute_vectors_;
};

// X with A X = B, for A (..., n, n) and B (..., n, k) of one batch shape.
class Solve : public LinalgPrimitive {
 public:
  explicit Solve(Stream stream) : LinalgPrimitive(stream, false) {}
  LOOM_LINALG_PRIMITIVE_BODY(Solve)
  std::vector<array> vjp(const std::vector<array>& primals, const std::vector<array>& cotangents,
                         const std::vector<int>& argnums,
                         const std::vector<array>& outputs) override;
  std::vector<array> jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                         const std::vector<int>& argnums) override;
};

#undef LOOM_LINALG_PRIMITIVE_BODY

} // namespace loom
