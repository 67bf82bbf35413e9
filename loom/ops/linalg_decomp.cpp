// mx.linalg: argument checks with MLX 0.32.4's messages, then one LAPACK
// primitive (primitives/linalg_decomp.h) or a composite of ops. Composites
// (det, slogdet, lu, pinv, norm, cross, cholesky_inv, solve_triangular)
// inherit their gradients from the primitives they are built on.
#include "loom/primitives/linalg_decomp.h"

#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>

#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/linalg.h"
#include "loom/ops/reduce.h"
#include "loom/ops/shape.h"
#include "loom/ops/slice.h"
#include "loom/ops/utils.h"

namespace loom::linalg {

namespace {

array mT(const array& x, StreamOrDevice s) { return swapaxes(x, -1, -2, s); }

// The CPU stream of a LAPACK op; MLX's error for a GPU one.
Stream cpu_stream(StreamOrDevice s, const char* op) {
  Stream st = to_stream(s);
  if (st.device.type != Device::cpu) {
    throw std::invalid_argument(std::string("[linalg::") + op +
                                "] This op is not yet supported on the GPU. Explicitly pass a CPU "
                                "stream to run it.");
  }
  return st;
}

void check_ndim(const array& a, const char* op, const char* prefix = "Arrays") {
  if (a.ndim() < 2) {
    throw std::invalid_argument(std::string("[linalg::") + op + "] " + prefix +
                                " must have >= 2 dimensions. Received array with " +
                                std::to_string(a.ndim()) + " dimensions.");
  }
}

void check_real(const array& a, const char* op) {
  if (a.dtype() != float32 && a.dtype() != float64) {
    throw std::invalid_argument(std::string("[linalg::") + op +
                                "] Arrays must have type float32 or float64. Received array with "
                                "type " +
                                dtype_name(a.dtype()) + ".");
  }
}

void check_inexact(const array& a, const char* op) {
  if (a.dtype() != float32 && a.dtype() != float64 && a.dtype() != complex64) {
    throw std::invalid_argument(std::string("[linalg::") + op +
                                "] Arrays must have type float32, float64 or complex64. Received "
                                "array with type " +
                                dtype_name(a.dtype()) + ".");
  }
}

// MLX's message, then the shape it got (MLX leaves it out).
void check_square(const array& a, const char* op, const char* message) {
  if (a.shape(-1) != a.shape(-2)) {
    throw std::invalid_argument(std::string("[linalg::") + op + "] " + message +
                                " Received array with shape " + shape_to_string(a.shape()) + ".");
  }
}

// Integers and booleans compute in float32 (det, slogdet, norm).
array as_float(const array& a, StreamOrDevice s) {
  return is_inexact(a.dtype()) ? a : astype(a, float32, s);
}

std::vector<array> make(std::shared_ptr<LinalgPrimitive> prim, const array& a) {
  std::vector<array> ins{a};
  return array::make_arrays(prim->output_shapes(ins), prim->output_dtypes(ins), prim, ins);
}

std::vector<array> luf(const array& a, const Stream& st) {
  return make(std::make_shared<LUF>(st), a);
}

array diag_part(const array& x, StreamOrDevice s) {
  const int n = x.shape(-1);
  return sum(multiply(x, eye(n, n, 0, x.dtype(), s), s), -1, false, s);
}

std::string format_ord(double ord) {
  std::ostringstream os;
  os << ord;
  return os.str();
}

} // namespace

// --- factorizations ------------------------------------------------------------

std::vector<array> lu_factor(const array& a, StreamOrDevice s) {
  Stream st = cpu_stream(s, "lu_factor");
  check_ndim(a, "lu_factor");
  check_real(a, "lu_factor");
  std::vector<array> out = luf(a, st);
  return {out[0], out[1]};
}

std::vector<array> lu(const array& a, StreamOrDevice s) {
  Stream st = cpu_stream(s, "lu");
  check_ndim(a, "lu");
  check_real(a, "lu");
  std::vector<array> out = luf(a, st);
  const int m = a.shape(-2);
  const int n = a.shape(-1);
  const int k = std::min(m, n);
  const array& packed = out[0];
  Shape lo(a.ndim(), 0), hi_l = a.shape(), hi_u = a.shape(), step(a.ndim(), 1);
  hi_l.back() = k;
  hi_u[a.ndim() - 2] = k;
  array l = add(tril(slice(packed, lo, hi_l, step, st), -1, st), eye(m, k, 0, a.dtype(), st), st);
  array u = triu(slice(packed, lo, hi_u, step, st), 0, st);
  return {out[2], l, u};
}

std::vector<array> qr(const array& a, StreamOrDevice s) {
  Stream st = cpu_stream(s, "qr");
  check_ndim(a, "qr");
  check_real(a, "qr");
  return make(std::make_shared<QRF>(st), a);
}

std::vector<array> svd(const array& a, bool compute_uv, StreamOrDevice s) {
  Stream st = cpu_stream(s, "svd");
  check_ndim(a, "svd", "Input array");
  check_inexact(a, "svd");
  return make(std::make_shared<SVD>(st, compute_uv), a);
}

array inv(const array& a, StreamOrDevice s) {
  Stream st = cpu_stream(s, "inv");
  check_ndim(a, "inv");
  check_real(a, "inv");
  check_square(a, "inv", "Inverses are only defined for square matrices.");
  return make(std::make_shared<Inverse>(st, false, false), a)[0];
}

array tri_inv(const array& a, bool upper, StreamOrDevice s) {
  // MLX names the general inverse in tri_inv's errors.
  Stream st = cpu_stream(s, "inv");
  check_ndim(a, "inv");
  check_real(a, "inv");
  check_square(a, "inv", "Inverses are only defined for square matrices.");
  return make(std::make_shared<Inverse>(st, true, upper), a)[0];
}

array cholesky(const array& a, bool upper, StreamOrDevice s) {
  Stream st = cpu_stream(s, "cholesky");
  check_ndim(a, "cholesky");
  check_real(a, "cholesky");
  check_square(a, "cholesky", "Cholesky decomposition is only defined for square matrices.");
  return make(std::make_shared<Cholesky>(st, upper), a)[0];
}

array cholesky_inv(const array& l, bool upper, StreamOrDevice s) {
  Stream st = cpu_stream(s, "cholesky_inv");
  check_ndim(l, "cholesky_inv");
  check_real(l, "cholesky_inv");
  check_square(l, "cholesky_inv", "Cholesky inverse is only defined for square matrices.");
  // A⁻¹ = L⁻ᵀ L⁻¹ (lower) or U⁻¹ U⁻ᵀ (upper).
  array t = tri_inv(l, upper, st);
  return upper ? matmul(t, mT(t, st), st) : matmul(mT(t, st), t, st);
}

array pinv(const array& a, StreamOrDevice s) {
  Stream st = cpu_stream(s, "pinv");
  check_ndim(a, "pinv");
  check_real(a, "pinv");
  const int m = a.shape(-2);
  const int n = a.shape(-1);
  const int k = std::min(m, n);
  if (k == 0) return zeros(Shape(mT(a, st).shape()), a.dtype(), st);
  std::vector<array> usv = svd(a, true, st);
  Shape lo(a.ndim(), 0), step(a.ndim(), 1);
  Shape hu = usv[0].shape(), hv = usv[2].shape();
  hu.back() = k;
  hv[hv.size() - 2] = k;
  array u1 = slice(usv[0], lo, hu, step, st);
  array vt1 = slice(usv[2], lo, hv, step, st);
  // Singular values below max(m, n) * eps * s_max count as zero (NumPy's rule).
  const double eps = a.dtype() == float64 ? std::numeric_limits<double>::epsilon()
                                          : std::numeric_limits<float>::epsilon();
  array smax = max(usv[1], -1, true, st);
  array cutoff = multiply(smax, array(eps * std::max(m, n), a.dtype()), st);
  array keep = greater(usv[1], cutoff, st);
  array sinv = where(keep, reciprocal(where(keep, usv[1], array(1.0, a.dtype()), st), st),
                     array(0.0, a.dtype()), st);
  return matmul(mT(vt1, st), multiply(expand_dims(sinv, -1, st), mT(u1, st), st), st);
}

// --- eigen-decompositions ------------------------------------------------------

std::vector<array> eigh(const array& a, const std::string& uplo, StreamOrDevice s) {
  Stream st = cpu_stream(s, "eigh");
  check_ndim(a, "eigh");
  check_inexact(a, "eigh");
  check_square(a, "eigh", "Only defined for square matrices.");
  // MLX reads the upper triangle for "U" and the lower for anything else.
  return make(std::make_shared<Eigh>(st, uplo == "U" ? "U" : "L", true), a);
}

array eigvalsh(const array& a, const std::string& uplo, StreamOrDevice s) {
  Stream st = cpu_stream(s, "eigvalsh");
  check_ndim(a, "eigvalsh");
  check_inexact(a, "eigvalsh");
  check_square(a, "eigvalsh", "Only defined for square matrices.");
  return make(std::make_shared<Eigh>(st, uplo == "U" ? "U" : "L", false), a)[0];
}

std::vector<array> eig(const array& a, StreamOrDevice s) {
  Stream st = cpu_stream(s, "eig");
  check_ndim(a, "eig");
  check_inexact(a, "eig");
  check_square(a, "eig", "Only defined for square matrices.");
  return make(std::make_shared<Eig>(st, true), a);
}

array eigvals(const array& a, StreamOrDevice s) {
  Stream st = cpu_stream(s, "eigvals");
  check_ndim(a, "eigvals");
  check_inexact(a, "eigvals");
  check_square(a, "eigvals", "Only defined for square matrices.");
  return make(std::make_shared<Eig>(st, false), a)[0];
}

// --- solves and determinants -----------------------------------------------------

array solve(const array& a, const array& b, StreamOrDevice s) {
  Stream st = cpu_stream(s, "solve");
  if (a.ndim() < 2) {
    throw std::invalid_argument(
        "[linalg::solve] First input must have >= 2 dimensions. Received "
        "array with " +
        std::to_string(a.ndim()) + " dimensions.");
  }
  if (b.ndim() < 1) {
    throw std::invalid_argument(
        "[linalg::solve] Second input must have >= 1 dimensions. Received "
        "array with 0 dimensions.");
  }
  if (a.shape(-1) != a.shape(-2)) {
    throw std::invalid_argument(
        "[linalg::solve] First input must be a square matrix. Received array with shape " +
        shape_to_string(a.shape()) + ".");
  }
  const bool vector = b.ndim() == 1;
  const int rhs_axis = vector ? b.ndim() - 1 : b.ndim() - 2;
  if (b.shape(rhs_axis) != a.shape(-1)) {
    throw std::invalid_argument("[linalg::solve] Last dimension of first input with shape " +
                                shape_to_string(a.shape()) +
                                " must match second to last dimension of second input with shape " +
                                shape_to_string(b.shape()) + ".");
  }
  const Dtype dtype = promote_types(a.dtype(), b.dtype());
  if (dtype != float32 && dtype != float64) {
    throw std::invalid_argument(
        "[linalg::solve] Arrays must have type float32 or float64. "
        "Received arrays with types " +
        dtype_name(a.dtype()) + " and " + dtype_name(b.dtype()) + ".");
  }
  array aa = astype(a, dtype, st);
  // A 1-D b is one right-hand side for every matrix of a (NumPy's rule).
  array bb = astype(vector ? expand_dims(b, -1, st) : b, dtype, st);
  Shape batch = broadcast_shapes(Shape(aa.shape().begin(), aa.shape().end() - 2),
                                 Shape(bb.shape().begin(), bb.shape().end() - 2));
  Shape ashape = batch, bshape = batch;
  ashape.insert(ashape.end(), {a.shape(-2), a.shape(-1)});
  bshape.insert(bshape.end(), {bb.shape(-2), bb.shape(-1)});
  aa = broadcast_to(aa, ashape, st);
  bb = broadcast_to(bb, bshape, st);
  array x(bshape, dtype, std::make_shared<Solve>(st), {aa, bb});
  return vector ? squeeze(x, std::vector<int>{-1}, st) : x;
}

array solve_triangular(const array& a, const array& b, bool upper, StreamOrDevice s) {
  Stream st = cpu_stream(s, "solve_triangular");
  if (a.ndim() < 2) {
    throw std::invalid_argument(
        "[linalg::solve_triangular] First input must have >= 2 "
        "dimensions. Received array with " +
        std::to_string(a.ndim()) + " dimensions.");
  }
  if (a.shape(-1) != a.shape(-2)) {
    throw std::invalid_argument(
        "[linalg::solve_triangular] First input must be a square matrix. "
        "Received array with shape " +
        shape_to_string(a.shape()) + ".");
  }
  const int rhs_axis = b.ndim() == 1 ? 0 : b.ndim() - 2;
  if (b.ndim() == 0 || b.shape(rhs_axis) != a.shape(-1)) {
    throw std::invalid_argument(
        "[linalg::solve_triangular] Last dimension of first input with "
        "shape " +
        shape_to_string(a.shape()) +
        " must match second to last dimension of second input with shape " +
        shape_to_string(b.shape()) + ".");
  }
  // As MLX: the triangular inverse times b (tri_inv reads one triangle).
  return matmul(tri_inv(a, upper, st), b, st);
}

namespace {
// det and slogdet from the LU factors: the permutation's sign and diag(U).
struct LuDet {
  array sign, diag;
};
LuDet lu_det(const array& a_in, const char* op, StreamOrDevice s) {
  Stream st = cpu_stream(s, op);
  check_ndim(a_in, op);
  check_square(a_in, op, "Only defined for square matrices.");
  array a = as_float(a_in, st);
  check_real(a, op);
  const int n = a.shape(-1);
  std::vector<array> f = luf(a, st);
  // Each pivot that is not its own row is one transposition.
  array swaps = sum(not_equal(f[1], arange(0, n, 1, st), st), -1, false, st);
  array odd = equal(remainder(swaps, array(2, swaps.dtype()), st), array(1, swaps.dtype()), st);
  array sign = where(odd, array(-1.0, a.dtype()), array(1.0, a.dtype()), st);
  return {sign, diag_part(f[0], st)};
}
} // namespace

array det(const array& a, StreamOrDevice s) {
  LuDet d = lu_det(a, "det", s);
  return multiply(d.sign, prod(d.diag, -1, false, s), s);
}

std::vector<array> slogdet(const array& a, StreamOrDevice s) {
  LuDet d = lu_det(a, "slogdet", s);
  array sgn = multiply(d.sign, prod(sign(d.diag, s), -1, false, s), s);
  array logabs = sum(log(abs(d.diag, s), s), -1, false, s);
  return {sgn, logabs};
}

// --- cross -----------------------------------------------------------------------

array cross(const array& a_in, const array& b_in, int axis, StreamOrDevice s) {
  // The axis counts from the end of each operand, so operands of different
  // ranks broadcast as usual.
  const int ax_a = normalize_axis(axis, a_in.ndim(), "linalg::cross") - a_in.ndim();
  const int ax_b = ax_a + b_in.ndim();
  if (ax_b < 0) {
    throw std::invalid_argument("[linalg::cross] The axis " + std::to_string(axis) +
                                " is out of range for the second input with shape " +
                                shape_to_string(b_in.shape()) + ".");
  }
  auto prepare = [&](const array& x) {
    const int d = x.shape(ax_a);
    if (d != 2 && d != 3) {
      throw std::invalid_argument("[linalg::cross] The specified axis must have size 2 or 3.");
    }
    if (d == 3) return x;
    // A 2-vector is a 3-vector in the plane: its third component is 0.
    std::vector<std::pair<int, int>> widths(x.ndim(), {0, 0});
    widths[x.ndim() + ax_a] = {0, 1};
    return pad(x, widths, array(0, x.dtype()), "constant", s);
  };
  array a = prepare(a_in);
  array b = prepare(b_in);
  auto part = [&](const array& x, int i) {
    Shape lo(x.ndim(), 0), hi = x.shape(), step(x.ndim(), 1);
    lo[x.ndim() + ax_a] = i;
    hi[x.ndim() + ax_a] = i + 1;
    return slice(x, lo, hi, step, s);
  };
  array a0 = part(a, 0), a1 = part(a, 1), a2 = part(a, 2);
  array b0 = part(b, 0), b1 = part(b, 1), b2 = part(b, 2);
  array c0 = subtract(multiply(a1, b2, s), multiply(a2, b1, s), s);
  array c1 = subtract(multiply(a2, b0, s), multiply(a0, b2, s), s);
  array c2 = subtract(multiply(a0, b1, s), multiply(a1, b0, s), s);
  return concatenate({c0, c1, c2}, ax_a, s);
}

// --- norm ------------------------------------------------------------------------

namespace {

array abs_float(const array& a, StreamOrDevice s) { return abs(as_float(a, s), s); }

array vector_norm(const array& a, double ord, int axis, bool keepdims, StreamOrDevice s) {
  std::vector<int> ax{axis};
  array x = abs_float(a, s);
  if (std::isinf(ord)) return ord > 0 ? max(x, ax, keepdims, s) : min(x, ax, keepdims, s);
  if (ord == 0)
    return sum(astype(not_equal(x, array(0, x.dtype()), s), x.dtype(), s), ax, keepdims, s);
  if (ord == 1) return sum(x, ax, keepdims, s);
  if (ord == 2) return sqrt(sum(square(x, s), ax, keepdims, s), s);
  array p(ord, x.dtype());
  return power(sum(power(x, p, s), ax, keepdims, s), reciprocal(p, s), s);
}

// Singular values of the matrices on axes (r, c), computed on the CPU.
array singular_values(const array& a, int r, int c, StreamOrDevice s) {
  array m = moveaxis(moveaxis(a, r, -1, s), c > r ? c - 1 : c, -1, s);
  return svd(as_float(m, s), false, Device(Device::cpu))[0];
}

array keep_matrix_dims(const array& x, int r, int c, int ndim, bool keepdims, StreamOrDevice s) {
  if (!keepdims) return x;
  return expand_dims(x, {std::min(r, c), std::max(r, c)}, s);
}

array matrix_norm(const array& a, double ord, int r, int c, bool keepdims, StreamOrDevice s) {
  if (ord == 2 || ord == -2) {
    array sv = singular_values(a, r, c, s);
    array v = ord > 0 ? max(sv, -1, false, s) : min(sv, -1, false, s);
    return keep_matrix_dims(v, r, c, a.ndim(), keepdims, s);
  }
  // 1-norms sum down columns (over rows) and pick a column; inf-norms sum
  // across rows and pick a row.
  int sum_axis, pick_axis;
  if (ord == 1 || ord == -1) {
    sum_axis = r;
    pick_axis = c;
  } else if (std::isinf(ord)) {
    sum_axis = c;
    pick_axis = r;
  } else {
    throw std::invalid_argument("[linalg::norm] Invalid ord " + format_ord(ord) +
                                " for matrix norm.");
  }
  array sums = sum(abs_float(a, s), std::vector<int>{sum_axis}, true, s);
  array v = ord > 0 ? max(sums, std::vector<int>{pick_axis}, true, s)
                    : min(sums, std::vector<int>{pick_axis}, true, s);
  return keepdims ? v : squeeze(v, std::vector<int>{r, c}, s);
}

std::vector<int> norm_axes(const array& a, const std::optional<std::vector<int>>& axis) {
  std::vector<int> ax;
  if (axis) {
    ax = normalize_axes(*axis, a.ndim(), "linalg::norm");
  } else {
    for (int i = 0; i < a.ndim(); ++i) ax.push_back(i);
  }
  if (ax.size() == 2 && ax[0] == ax[1]) {
    throw std::invalid_argument("Duplicate axes detected in reduction.");
  }
  return ax;
}

} // namespace

array norm(const array& a, std::optional<double> ord, std::optional<std::vector<int>> axis,
           bool keepdims, StreamOrDevice s) {
  if (!ord) {
    // The 2-norm of the flattened array or along the axes given (the
    // Frobenius norm for two).
    std::vector<int> ax = norm_axes(a, axis);
    if (axis && ax.size() > 2)
      throw std::invalid_argument("[linalg::norm] Received too many axes for norm.");
    return sqrt(sum(square(abs_float(a, s), s), ax, keepdims, s), s);
  }
  std::vector<int> ax = norm_axes(a, axis);
  if (ax.size() == 1) return vector_norm(a, *ord, ax[0], keepdims, s);
  if (ax.size() == 2) return matrix_norm(a, *ord, ax[0], ax[1], keepdims, s);
  throw std::invalid_argument("[linalg::norm] Received too many axes for norm.");
}

array norm(const array& a, const std::string& ord, std::optional<std::vector<int>> axis,
           bool keepdims, StreamOrDevice s) {
  std::vector<int> ax = norm_axes(a, axis);
  if (ax.size() != 2) {
    throw std::invalid_argument("[linalg::norm] Norm '" + ord +
                                "' only supported for matrices, but received " +
                                std::to_string(ax.size()) + " axis/axes.");
  }
  if (ord == "fro") return sqrt(sum(square(abs_float(a, s), s), ax, keepdims, s), s);
  if (ord == "nuc") {
    array v = sum(singular_values(a, ax[0], ax[1], s), -1, false, s);
    return keep_matrix_dims(v, ax[0], ax[1], a.ndim(), keepdims, s);
  }
  throw std::invalid_argument("[linalg::norm] Invalid ord value '" + ord + "' for matrix norm.");
}

} // namespace loom::linalg
