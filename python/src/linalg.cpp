// The loom.core.linalg submodule, the matmul family (gather_mm, segmented_mm,
// block_masked_mm), matrix_norm and random.multivariate_normal.
#include <cmath>

#include "utils.h"

namespace loom::bindings {

namespace {

nb::tuple as_tuple(const std::vector<array>& xs) {
  nb::list items;
  for (const auto& x : xs) items.append(nb::cast(x));
  return nb::tuple(items);
}

// axis: None, an int or a sequence of ints.
std::optional<std::vector<int>> read_axis(nb::handle axis) {
  if (axis.is_none()) return std::nullopt;
  if (PyLong_Check(axis.ptr())) return std::vector<int>{nb::cast<int>(axis)};
  return nb::cast<std::vector<int>>(axis);
}

array norm_binding(const array& a, nb::handle ord, nb::handle axis, bool keepdims,
                   const StreamArg& s) {
  std::optional<std::vector<int>> ax = read_axis(axis);
  if (ord.is_none()) return linalg::norm(a, std::nullopt, ax, keepdims, s);
  if (PyUnicode_Check(ord.ptr()))
    return linalg::norm(a, nb::cast<std::string>(ord), ax, keepdims, s);
  if (PyBool_Check(ord.ptr()) || !(PyLong_Check(ord.ptr()) || PyFloat_Check(ord.ptr()))) {
    throw nb::type_error("[linalg::norm] ord must be None, an int, a float or a string.");
  }
  return linalg::norm(a, nb::cast<double>(ord), ax, keepdims, s);
}

constexpr const char* kNormDoc =
    "Matrix or vector norm.\n\n"
    "With ``ord=None`` the 2-norm of the flattened array (or, along ``axis``,\n"
    "of each vector / the Frobenius norm of each matrix). Vector ``ord``:\n"
    "``inf``, ``-inf``, ``0`` (non-zeros), any other number ``p``\n"
    "(``sum(|x|**p)**(1/p)``). Matrix ``ord``: ``'fro'``, ``'nuc'``, ``inf``,\n"
    "``-inf``, ``1``, ``-1``, ``2``, ``-2``.\n\n"
    "Args:\n"
    "    a (array): Input array.\n"
    "    ord (int, float or str, optional): Order of the norm. Default: ``None``.\n"
    "    axis (int or list(int), optional): One axis (vector norm) or two (matrix\n"
    "      norm). Default: ``None``.\n"
    "    keepdims (bool, optional): Keep the reduced axes with size one.\n\n"
    "Returns:\n    array: The norm.";

} // namespace

void init_linalg(nb::module_& parent) {
  nb::module_ m = parent.def_submodule("linalg", "Linear algebra (LAPACK on the CPU).");
  m.attr("__name__") = "loom.core.linalg";
  nb::module_::import_("sys").attr("modules")["loom.core.linalg"] = m;

  auto norm_sig = [](const char* name) {
    return std::string("def ") + name +
           "(a: array, /, ord: None | int | float | str = None, axis: None | int | list[int] = "
           "None, keepdims: bool = False, *, stream: StreamOrDevice = None) -> array";
  };
  const std::string linalg_norm_sig = norm_sig("norm");
  m.def("norm", &norm_binding, nb::arg(), nb::arg("ord").none() = nb::none(),
        nb::arg("axis").none() = nb::none(), nb::arg("keepdims") = false, nb::kw_only(),
        nb::arg("stream") = nb::none(), nb::sig(linalg_norm_sig.c_str()), kNormDoc);
  // MLX exposes the same function at the top level as matrix_norm.
  parent.attr("matrix_norm") = m.attr("norm");

  m.def(
      "qr", [](const array& a, const StreamArg& s) { return as_tuple(linalg::qr(a, s)); },
      nb::arg("a"), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def qr(a: array, *, stream: StreamOrDevice = None) -> tuple[array, array]"),
      "The reduced QR factorization ``a = Q @ R`` of the last two axes: ``Q``\n"
      "has orthonormal columns, ``R`` is upper triangular.\n\n"
      "Returns:\n    tuple(array, array): ``Q`` and ``R``.");
  m.def(
      "svd",
      [](const array& a, bool compute_uv, const StreamArg& s) -> nb::object {
        std::vector<array> out = linalg::svd(a, compute_uv, s);
        if (!compute_uv) return nb::cast(out[0]);
        return as_tuple(out);
      },
      nb::arg("a"), nb::arg("compute_uv") = true, nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def svd(a: array, compute_uv: bool = True, *, stream: StreamOrDevice = None) -> "
              "tuple[array, array, array]"),
      "The singular value decomposition ``a = U @ diag(S) @ Vt`` (full ``U``\n"
      "and ``Vt``; ``S`` descending).\n\n"
      "Returns:\n    ``(U, S, Vt)``, or ``S`` alone when ``compute_uv`` is False.");
  m.def(
      "inv", [](const array& a, const StreamArg& s) { return linalg::inv(a, s); }, nb::arg("a"),
      nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def inv(a: array, *, stream: StreamOrDevice = None) -> array"),
      "The inverse of each square matrix (raises at evaluation for a singular one).");
  m.def(
      "tri_inv",
      [](const array& a, bool upper, const StreamArg& s) { return linalg::tri_inv(a, upper, s); },
      nb::arg("a"), nb::arg("upper") = false, nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def tri_inv(a: array, upper: bool = False, *, stream: StreamOrDevice = None) -> "
              "array"),
      "The inverse of the lower (or upper) triangle of each square matrix.");
  m.def(
      "pinv", [](const array& a, const StreamArg& s) { return linalg::pinv(a, s); }, nb::arg("a"),
      nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def pinv(a: array, *, stream: StreamOrDevice = None) -> array"),
      "The Moore-Penrose pseudo-inverse, from the SVD.");
  m.def(
      "cholesky",
      [](const array& a, bool upper, const StreamArg& s) { return linalg::cholesky(a, upper, s); },
      nb::arg("a"), nb::arg("upper") = false, nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def cholesky(a: array, upper: bool = False, *, stream: StreamOrDevice = None) -> "
              "array"),
      "The Cholesky factor ``L`` (``a = L @ L.T``) or, with ``upper``, ``U``\n"
      "(``a = U.T @ U``) of symmetric positive definite matrices.");
  m.def(
      "cholesky_inv",
      [](const array& a, bool upper, const StreamArg& s) {
        return linalg::cholesky_inv(a, upper, s);
      },
      nb::arg("a"), nb::arg("upper") = false, nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def cholesky_inv(a: array, upper: bool = False, *, stream: StreamOrDevice = None) "
              "-> array"),
      "The inverse of ``A`` from its Cholesky factor ``a``.");
  m.def(
      "eig", [](const array& a, const StreamArg& s) { return as_tuple(linalg::eig(a, s)); },
      nb::arg("a"), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def eig(a: array, *, stream: StreamOrDevice = None) -> tuple[array, array]"),
      "Eigenvalues and right eigenvectors (columns) of general square\n"
      "matrices, as complex64.");
  m.def(
      "eigvals", [](const array& a, const StreamArg& s) { return linalg::eigvals(a, s); },
      nb::arg("a"), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def eigvals(a: array, *, stream: StreamOrDevice = None) -> array"),
      "Eigenvalues of general square matrices, as complex64.");
  m.def(
      "eigh",
      [](const array& a, const std::string& uplo, const StreamArg& s) {
        return as_tuple(linalg::eigh(a, uplo, s));
      },
      nb::arg("a"), nb::arg("UPLO") = "L", nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def eigh(a: array, UPLO: str = 'L', *, stream: StreamOrDevice = None) -> "
              "tuple[array, array]"),
      "Eigenvalues (ascending) and orthonormal eigenvectors of symmetric or\n"
      "Hermitian matrices, read from the ``UPLO`` triangle.");
  m.def(
      "eigvalsh",
      [](const array& a, const std::string& uplo, const StreamArg& s) {
        return linalg::eigvalsh(a, uplo, s);
      },
      nb::arg("a"), nb::arg("UPLO") = "L", nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def eigvalsh(a: array, UPLO: str = 'L', *, stream: StreamOrDevice = None) -> "
              "array"),
      "Eigenvalues (ascending) of symmetric or Hermitian matrices.");
  m.def(
      "lu", [](const array& a, const StreamArg& s) { return as_tuple(linalg::lu(a, s)); },
      nb::arg("a"), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def lu(a: array, *, stream: StreamOrDevice = None) -> tuple[array, array, "
              "array]"),
      "The LU factorization with partial pivoting: ``(p, L, U)`` with\n"
      "``a[i] == (L @ U)[p[i]]``.");
  m.def(
      "lu_factor",
      [](const array& a, const StreamArg& s) { return as_tuple(linalg::lu_factor(a, s)); },
      nb::arg("a"), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def lu_factor(a: array, *, stream: StreamOrDevice = None) -> tuple[array, "
              "array]"),
      "The packed LU factors and the 0-based pivots (LAPACK's getrf).");
  m.def(
      "solve",
      [](const array& a, const array& b, const StreamArg& s) { return linalg::solve(a, b, s); },
      nb::arg("a"), nb::arg("b"), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def solve(a: array, b: array, *, stream: StreamOrDevice = None) -> array"),
      "The solution ``x`` of ``a @ x = b``.");
  m.def(
      "solve_triangular",
      [](const array& a, const array& b, bool upper, const StreamArg& s) {
        return linalg::solve_triangular(a, b, upper, s);
      },
      nb::arg("a"), nb::arg("b"), nb::kw_only(), nb::arg("upper") = false,
      nb::arg("stream") = nb::none(),
      nb::sig("def solve_triangular(a: array, b: array, *, upper: bool = False, stream: "
              "StreamOrDevice = None) -> array"),
      "The solution of ``a @ x = b`` for a lower (or upper) triangular ``a``.");
  m.def(
      "cross",
      [](const array& a, const array& b, int axis, const StreamArg& s) {
        return linalg::cross(a, b, axis, s);
      },
      nb::arg("a"), nb::arg("b"), nb::arg("axis") = -1, nb::kw_only(),
      nb::arg("stream") = nb::none(),
      nb::sig("def cross(a: array, b: array, axis: int = -1, *, stream: StreamOrDevice = None) "
              "-> array"),
      "The cross product of 3-vectors (or 2-vectors, as 3-vectors with a zero\n"
      "third component) along ``axis``.");
  m.def(
      "det", [](const array& a, const StreamArg& s) { return linalg::det(a, s); }, nb::arg("a"),
      nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def det(a: array, *, stream: StreamOrDevice = None) -> array"),
      "The determinant of each square matrix (from the LU factors).");
  m.def(
      "slogdet", [](const array& a, const StreamArg& s) { return as_tuple(linalg::slogdet(a, s)); },
      nb::arg("a"), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def slogdet(a: array, *, stream: StreamOrDevice = None) -> tuple[array, array]"),
      "The sign and the natural log of the absolute value of the determinant.");

  // --- the matmul family (top level) ---
  parent.def(
      "gather_mm",
      [](const array& a, const array& b, const std::optional<array>& lhs,
         const std::optional<array>& rhs, bool sorted,
         const StreamArg& s) { return gather_mm(a, b, lhs, rhs, sorted, s); },
      nb::arg(), nb::arg(), nb::arg("lhs_indices").none() = nb::none(),
      nb::arg("rhs_indices").none() = nb::none(), nb::kw_only(), nb::arg("sorted_indices") = false,
      nb::arg("stream") = nb::none(),
      nb::sig("def gather_mm(a: array, b: array, /, lhs_indices: array | None = None, "
              "rhs_indices: array | None = None, *, sorted_indices: bool = False, stream: "
              "StreamOrDevice = None) -> array"),
      "Matrix multiplication with matrix-level gather: ``a[lhs_indices] @\n"
      "b[rhs_indices]`` with flat indices into the batch dimensions (all but\n"
      "the last two) of each operand, without materialising the gathers.");
  parent.def(
      "segmented_mm",
      [](const array& a, const array& b, const array& segments, const StreamArg& s) {
        return segmented_mm(a, b, segments, s);
      },
      nb::arg(), nb::arg(), nb::arg("segments"), nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def segmented_mm(a: array, b: array, /, segments: array, *, stream: "
              "StreamOrDevice = None) -> array"),
      "One matrix product per segment ``[start, end)`` of the inner dimension:\n"
      "``out[i] = a[:, s0:s1] @ b[s0:s1, :]`` for segments of shape ``(..., 2)``.");
  parent.def(
      "block_masked_mm",
      [](const array& a, const array& b, int block_size, const std::optional<array>& mask_out,
         const std::optional<array>& mask_lhs, const std::optional<array>& mask_rhs,
         const StreamArg& s) {
        return block_masked_mm(a, b, block_size, mask_out, mask_lhs, mask_rhs, s);
      },
      nb::arg(), nb::arg(), nb::arg("block_size") = 64, nb::arg("mask_out").none() = nb::none(),
      nb::arg("mask_lhs").none() = nb::none(), nb::arg("mask_rhs").none() = nb::none(),
      nb::kw_only(), nb::arg("stream") = nb::none(),
      nb::sig("def block_masked_mm(a: array, b: array, /, block_size: int = 64, mask_out: array "
              "| None = None, mask_lhs: array | None = None, mask_rhs: array | None = None, *, "
              "stream: StreamOrDevice = None) -> array"),
      "Matrix multiplication with ``block_size x block_size`` blocks of the\n"
      "inputs and the output masked: boolean masks keep or zero a block, other\n"
      "masks scale it.");

  nb::module_ random = nb::borrow<nb::module_>(parent.attr("random"));
  random.def(
      "multivariate_normal",
      [](const array& mean, const array& cov, const ShapeSeqArg& shape, std::optional<Dtype> dtype,
         const std::optional<array>& key, const StreamArg& s) {
        return random::multivariate_normal(mean, cov, to_shape(shape), dtype.value_or(float32), key,
                                           s);
      },
      nb::arg("mean"), nb::arg("cov"), nb::arg("shape") = nb::list(),
      nb::arg("dtype").none() = float32, nb::arg("key").none() = nb::none(),
      nb::arg("stream") = nb::none(),
      nb::sig("def multivariate_normal(mean: array, cov: array, shape: Sequence[int] = [], "
              "dtype: Dtype | None = float32, key: array | None = None, stream: StreamOrDevice "
              "= None) -> array"),
      "Jointly normal samples with the given mean ``(..., n)`` and positive\n"
      "semi-definite covariance ``(..., n, n)``. Only float32.");
}

} // namespace loom::bindings
