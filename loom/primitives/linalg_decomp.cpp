// The mx.linalg primitives: shapes, state and transforms. The rules are the
// standard matrix-calculus results (Giles 2008; Murray 2016 for Cholesky;
// Townsend 2016 for the SVD), written with ops so they are lazy and
// differentiable again. Symmetric inputs (eigh, cholesky) get symmetric
// cotangents: the gradient with respect to A treated as symmetric, as in
// JAX and PyTorch.
#include "loom/primitives/linalg_decomp.h"

#include <optional>
#include <typeinfo>

#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/gather.h"
#include "loom/ops/linalg.h"
#include "loom/ops/reduce.h"
#include "loom/ops/shape.h"
#include "loom/ops/slice.h"
#include "loom/ops/sort.h"
#include "loom/primitives/batching.h"

namespace loom {

namespace {

array mT(const array& x) { return swapaxes(x, -1, -2); }

array identity_like(int n, Dtype d) { return eye(n, n, 0, d); }

// The diagonal (..., k) of square matrices (..., k, k).
array diag_part(const array& x) {
  const int n = x.shape(-1);
  return sum(multiply(x, identity_like(n, x.dtype())), -1);
}

// Matrices with v (..., k) on the diagonal.
array diag_embed(const array& v) {
  const int n = v.shape(-1);
  return multiply(expand_dims(v, -1), identity_like(n, v.dtype()));
}

// 1/(v_j - v_i) off the diagonal, 0 on it: the kernel of the eigen- and
// singular-vector rules (v: eigenvalues or squared singular values).
array inverse_gaps(const array& v) {
  array diff = subtract(expand_dims(v, -2), expand_dims(v, -1));
  const int n = v.shape(-1);
  array off = subtract(array(1.0, v.dtype()), identity_like(n, v.dtype()));
  // The diagonal's 0/0 is replaced, not divided.
  array safe = add(diff, identity_like(n, v.dtype()));
  return multiply(reciprocal(safe), off);
}

array sym(const array& x) { return multiply(add(x, mT(x)), array(0.5, x.dtype())); }

array slice_last(const array& x, int axis_from_end, int start, int stop) {
  Shape lo(x.ndim(), 0), hi = x.shape(), st(x.ndim(), 1);
  const int ax = x.ndim() - axis_from_end;
  lo[ax] = start;
  hi[ax] = stop;
  return slice(x, lo, hi, st);
}
array cols(const array& x, int start, int stop) { return slice_last(x, 1, start, stop); }

// Permutes the rows of x (..., m, n) by p (..., m): out[i] = x[p[i]].
array take_rows(const array& x, const array& p) {
  array idx = astype(expand_dims(p, -1), int32);
  return take_along_axis(x, broadcast_to(idx, x.shape()), -2);
}

void require_real(const array& x, const char* prim, const char* transform) {
  if (is_complex(x.dtype())) {
    throw std::invalid_argument(std::string("[") + prim + "::" + transform +
                                "] Not implemented for complex inputs.");
  }
}

} // namespace

// --- shared ------------------------------------------------------------------

bool LinalgPrimitive::is_equivalent(const Primitive& other) const {
  return typeid(*this) == typeid(other) &&
         state() == static_cast<const LinalgPrimitive&>(other).state();
}

std::vector<Dtype> LinalgPrimitive::output_dtypes(const std::vector<array>& inputs) const {
  auto& self = const_cast<LinalgPrimitive&>(*this);
  return std::vector<Dtype>(self.output_shapes(inputs).size(), inputs[0].dtype());
}

std::pair<std::vector<array>, std::vector<int>> LinalgPrimitive::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  const int32_t batch = batch_size(inputs, axes);
  std::vector<array> ins;
  for (size_t i = 0; i < inputs.size(); ++i) {
    ins.push_back(batched(inputs[i], axes[i], batch, stream()));
  }
  // The kernels batch over leading axes: the same primitive on inputs with
  // one more leading axis is the mapped computation.
  std::shared_ptr<Primitive> prim = make_primitive(name(), stream(), state());
  auto* lp = static_cast<LinalgPrimitive*>(prim.get());
  std::vector<array> outs =
      array::make_arrays(prim->output_shapes(ins), lp->output_dtypes(ins), prim, ins);
  return {outs, std::vector<int>(outs.size(), 0)};
}

std::vector<array> LinalgPrimitive::own_outputs(const std::vector<array>& primals,
                                                const std::vector<array>& outputs) {
  bool own = true;
  for (const auto& o : outputs) own = own && o.has_node() && &o.primitive() == this;
  if (own) return outputs;
  std::shared_ptr<Primitive> prim = make_primitive(name(), stream(), state());
  auto* lp = static_cast<LinalgPrimitive*>(prim.get());
  return array::make_arrays(prim->output_shapes(primals), lp->output_dtypes(primals), prim,
                            primals);
}

// --- LUF ---------------------------------------------------------------------

std::vector<Shape> LUF::output_shapes(const std::vector<array>& inputs) {
  Shape lu = inputs[0].shape();
  const int m = lu[lu.size() - 2];
  const int n = lu.back();
  Shape piv(lu.begin(), lu.end() - 2);
  Shape perm = piv;
  piv.push_back(std::min(m, n));
  perm.push_back(m);
  return {lu, piv, perm};
}

std::vector<Dtype> LUF::output_dtypes(const std::vector<array>& inputs) const {
  return {inputs[0].dtype(), uint32, uint32};
}

PrimitiveState LUF::state() const { return {}; }

namespace {
struct LuParts {
  array l, u;
};
LuParts unpack_square(const array& lu) {
  const int n = lu.shape(-1);
  return {add(tril(lu, -1), identity_like(n, lu.dtype())), triu(lu)};
}
void require_square_lu(const array& a, const char* transform) {
  if (a.shape(-1) != a.shape(-2)) {
    throw std::invalid_argument(std::string("[LUF::") + transform +
                                "] Only square matrices are supported (got shape " +
                                shape_to_string(a.shape()) + ").");
  }
}
} // namespace

std::vector<array> LUF::vjp(const std::vector<array>& primals, const std::vector<array>& cotangents,
                            const std::vector<int>&, const std::vector<array>& outs) {
  require_square_lu(primals[0], "vjp");
  std::vector<array> outputs = own_outputs(primals, outs);
  auto [l, u] = unpack_square(outputs[0]);
  const array& g = cotangents[0];
  // X = L⁻¹ (P A) U⁻¹ moves L by L tril(X, -1) and U by triu(X) U; the
  // transpose of that map, then the rows un-permuted.
  array xbar = add(tril(matmul(mT(l), tril(g, -1)), -1), triu(matmul(triu(g), mT(u))));
  array linv = linalg::tri_inv(l, false, stream());
  array uinv = linalg::tri_inv(u, true, stream());
  array pa_bar = matmul(matmul(mT(linv), xbar), mT(uinv));
  return {take_rows(pa_bar, outputs[2])};
}

std::vector<array> LUF::jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                            const std::vector<int>&) {
  require_square_lu(primals[0], "jvp");
  // All three outputs (lu_factor returns two; the permutation is needed).
  std::vector<array> all = array::make_arrays(output_shapes(primals), output_dtypes(primals),
                                              std::make_shared<LUF>(stream()), {primals[0]});
  auto [l, u] = unpack_square(all[0]);
  array q = argsort(all[2], -1);
  array pda = take_rows(tangents[0], q);
  array x =
      matmul(matmul(linalg::tri_inv(l, false, stream()), pda), linalg::tri_inv(u, true, stream()));
  array dlu = add(matmul(l, tril(x, -1)), matmul(triu(x), u));
  return {dlu, zeros_like(all[1]), zeros_like(all[2])};
}

// --- Inverse -------------------------------------------------------------------

std::vector<Shape> Inverse::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape()};
}

PrimitiveState Inverse::state() const { return {{"tri", tri_}, {"upper", upper_}}; }

std::vector<array> Inverse::vjp(const std::vector<array>& primals,
                                const std::vector<array>& cotangents, const std::vector<int>&,
                                const std::vector<array>& outs) {
  std::vector<array> outputs = own_outputs(primals, outs);
  const array& x = outputs[0];
  array g = negative(matmul(matmul(mT(x), cotangents[0]), mT(x)));
  if (tri_) g = upper_ ? triu(g) : tril(g);
  return {g};
}

std::vector<array> Inverse::jvp(const std::vector<array>& primals,
                                const std::vector<array>& tangents, const std::vector<int>&) {
  array x =
      tri_ ? linalg::tri_inv(primals[0], upper_, stream()) : linalg::inv(primals[0], stream());
  array da = tangents[0];
  if (tri_) da = upper_ ? triu(da) : tril(da);
  return {negative(matmul(matmul(x, da), x))};
}

// --- Cholesky ------------------------------------------------------------------

std::vector<Shape> Cholesky::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape()};
}

PrimitiveState Cholesky::state() const { return {{"upper", upper_}}; }

namespace {
// The lower triangle with its diagonal halved.
array phi(const array& x) {
  const int n = x.shape(-1);
  return subtract(tril(x),
                  multiply(x, multiply(identity_like(n, x.dtype()), array(0.5, x.dtype()))));
}
} // namespace

std::vector<array> Cholesky::vjp(const std::vector<array>& primals,
                                 const std::vector<array>& cotangents, const std::vector<int>&,
                                 const std::vector<array>& outs) {
  std::vector<array> outputs = own_outputs(primals, outs);
  require_real(primals[0], "Cholesky", "vjp");
  array l = upper_ ? mT(outputs[0]) : outputs[0];
  array lbar = upper_ ? mT(cotangents[0]) : cotangents[0];
  array linv = linalg::tri_inv(l, false, stream());
  array s = matmul(matmul(mT(linv), phi(matmul(mT(l), lbar))), linv);
  return {sym(s)};
}

std::vector<array> Cholesky::jvp(const std::vector<array>& primals,
                                 const std::vector<array>& tangents, const std::vector<int>&) {
  require_real(primals[0], "Cholesky", "jvp");
  array l = linalg::cholesky(primals[0], false, stream());
  array linv = linalg::tri_inv(l, false, stream());
  array dl = matmul(l, phi(matmul(matmul(linv, sym(tangents[0])), mT(linv))));
  return {upper_ ? mT(dl) : dl};
}

// --- QRF -----------------------------------------------------------------------

std::vector<Shape> QRF::output_shapes(const std::vector<array>& inputs) {
  Shape q = inputs[0].shape();
  const int m = q[q.size() - 2];
  const int n = q.back();
  const int k = std::min(m, n);
  Shape r = q;
  q.back() = k;
  r[r.size() - 2] = k;
  return {q, r};
}

PrimitiveState QRF::state() const { return {}; }

namespace {
// Cotangent of A = Q R for m >= n (R square and invertible).
array qr_backward_tall(const array& q, const array& r, const array& gq, const array& gr,
                       const Stream& s) {
  array m = subtract(matmul(r, mT(gr)), matmul(mT(gq), q));
  array copyltu = add(tril(m), mT(tril(m, -1)));
  array b = add(gq, matmul(q, copyltu));
  return matmul(b, mT(linalg::tri_inv(r, true, s)));
}
} // namespace

std::vector<array> QRF::vjp(const std::vector<array>& primals, const std::vector<array>& cotangents,
                            const std::vector<int>&, const std::vector<array>& outs) {
  std::vector<array> outputs = own_outputs(primals, outs);
  require_real(primals[0], "QRF", "vjp");
  const array& a = primals[0];
  const array &q = outputs[0], &r = outputs[1];
  const int m = a.shape(-2);
  const int n = a.shape(-1);
  if (m >= n) return {qr_backward_tall(q, r, cotangents[0], cotangents[1], stream())};
  // Wide: A = [X | Y] with X = Q U square; Y = Q V moves Q through X alone.
  array y = cols(a, m, n);
  array u = cols(r, 0, m);
  array gv = cols(cotangents[1], m, n);
  array gy = matmul(q, gv);
  array gq = add(cotangents[0], matmul(y, mT(gv)));
  array gx = qr_backward_tall(q, u, gq, cols(cotangents[1], 0, m), stream());
  return {concatenate({gx, gy}, -1)};
}

std::vector<array> QRF::jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                            const std::vector<int>&) {
  require_real(primals[0], "QRF", "jvp");
  const array& a = primals[0];
  if (a.shape(-2) < a.shape(-1)) {
    throw std::invalid_argument(
        "[QRF::jvp] Only matrices with at least as many rows as columns "
        "are supported (got shape " +
        shape_to_string(a.shape()) + ").");
  }
  std::vector<array> qr = linalg::qr(a, stream());
  const array &q = qr[0], &r = qr[1];
  array dx_rinv = matmul(tangents[0], linalg::tri_inv(r, true, stream()));
  array qt = matmul(mT(q), dx_rinv);
  array low = tril(qt, -1);
  array dom = subtract(low, mT(low));
  array dq = add(matmul(q, subtract(dom, qt)), dx_rinv);
  array dr = matmul(subtract(qt, dom), r);
  return {dq, dr};
}

// --- SVD -----------------------------------------------------------------------

std::vector<Shape> SVD::output_shapes(const std::vector<array>& inputs) {
  const Shape& a = inputs[0].shape();
  const int m = a[a.size() - 2];
  const int n = a.back();
  Shape batch(a.begin(), a.end() - 2);
  Shape s = batch;
  s.push_back(std::min(m, n));
  if (!compute_uv_) return {s};
  Shape u = batch, vt = batch;
  u.insert(u.end(), {m, m});
  vt.insert(vt.end(), {n, n});
  return {u, s, vt};
}

std::vector<Dtype> SVD::output_dtypes(const std::vector<array>& inputs) const {
  Dtype d = inputs[0].dtype();
  Dtype real = d == complex64 ? float32 : d;
  if (!compute_uv_) return {real};
  return {d, real, d};
}

PrimitiveState SVD::state() const { return {{"compute_uv", compute_uv_}}; }

std::vector<array> SVD::vjp(const std::vector<array>& primals, const std::vector<array>& cotangents,
                            const std::vector<int>&, const std::vector<array>& outs) {
  std::vector<array> outputs = own_outputs(primals, outs);
  require_real(primals[0], "SVD", "vjp");
  const array& a = primals[0];
  const int m = a.shape(-2);
  const int n = a.shape(-1);
  const int k = std::min(m, n);
  std::vector<array> usv = compute_uv_ ? outputs : linalg::svd(a, true, stream());
  array u1 = cols(usv[0], 0, k);
  array s = usv[1];
  array v1 = cols(mT(usv[2]), 0, k);
  array gs = compute_uv_ ? cotangents[1] : cotangents[0];
  array inner = diag_embed(gs);
  std::optional<array> ga_extra;
  if (compute_uv_) {
    array gu1 = cols(cotangents[0], 0, k);
    array gv1 = cols(mT(cotangents[2]), 0, k);
    array f = inverse_gaps(square(s));
    array utgu = matmul(mT(u1), gu1);
    array vtgv = matmul(mT(v1), gv1);
    array j = multiply(f, subtract(utgu, mT(utgu)));
    array kk = multiply(f, subtract(vtgv, mT(vtgv)));
    inner = add(inner, add(multiply(j, expand_dims(s, -2)), multiply(expand_dims(s, -1), kk)));
    array sinv = reciprocal(s);
    if (m > k) {
      // The part of gU outside the column space of U.
      array perp = subtract(gu1, matmul(u1, utgu));
      ga_extra = matmul(multiply(perp, expand_dims(sinv, -2)), mT(v1));
    }
    if (n > k) {
      array perp = subtract(mT(gv1), matmul(mT(gv1), matmul(v1, mT(v1))));
      array t = matmul(u1, multiply(expand_dims(sinv, -1), perp));
      ga_extra = ga_extra ? add(*ga_extra, t) : t;
    }
  }
  array ga = matmul(matmul(u1, inner), mT(v1));
  return {ga_extra ? add(ga, *ga_extra) : ga};
}

std::vector<array> SVD::jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                            const std::vector<int>&) {
  require_real(primals[0], "SVD", "jvp");
  const array& a = primals[0];
  const int m = a.shape(-2);
  const int n = a.shape(-1);
  const int k = std::min(m, n);
  if (compute_uv_ && m != n) {
    throw std::invalid_argument(
        "[SVD::jvp] The tangents of the full U and Vt are defined for square matrices only (got "
        "shape " +
        shape_to_string(a.shape()) + "); use compute_uv=False for singular values.");
  }
  std::vector<array> usv = linalg::svd(a, true, stream());
  array u1 = cols(usv[0], 0, k);
  array s = usv[1];
  array v1 = cols(mT(usv[2]), 0, k);
  array dp = matmul(matmul(mT(u1), tangents[0]), v1);
  array ds = diag_part(dp);
  if (!compute_uv_) return {ds};
  array f = inverse_gaps(square(s));
  array dps = multiply(dp, expand_dims(s, -2));
  array sdp = multiply(expand_dims(s, -1), dp);
  array du = matmul(u1, multiply(f, add(dps, mT(dps))));
  array dv = matmul(v1, multiply(f, add(sdp, mT(sdp))));
  return {du, ds, mT(dv)};
}

// --- Eigh ----------------------------------------------------------------------

std::vector<Shape> Eigh::output_shapes(const std::vector<array>& inputs) {
  const Shape& a = inputs[0].shape();
  Shape w(a.begin(), a.end() - 1);
  if (!compute_vectors_) return {w};
  return {w, a};
}

std::vector<Dtype> Eigh::output_dtypes(const std::vector<array>& inputs) const {
  Dtype d = inputs[0].dtype();
  Dtype real = d == complex64 ? float32 : d;
  if (!compute_vectors_) return {real};
  return {real, d};
}

PrimitiveState Eigh::state() const {
  return {{"uplo", uplo_}, {"compute_vectors", compute_vectors_}};
}

std::vector<array> Eigh::vjp(const std::vector<array>& primals,
                             const std::vector<array>& cotangents, const std::vector<int>&,
                             const std::vector<array>& outs) {
  std::vector<array> outputs = own_outputs(primals, outs);
  require_real(primals[0], "Eigh", "vjp");
  std::vector<array> wv = compute_vectors_ ? outputs : linalg::eigh(primals[0], uplo_, stream());
  const array &w = wv[0], &v = wv[1];
  array inner = diag_embed(cotangents[0]);
  if (compute_vectors_) {
    inner = add(inner, multiply(inverse_gaps(w), matmul(mT(v), cotangents[1])));
  }
  return {sym(matmul(matmul(v, inner), mT(v)))};
}

std::vector<array> Eigh::jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                             const std::vector<int>&) {
  require_real(primals[0], "Eigh", "jvp");
  std::vector<array> wv = linalg::eigh(primals[0], uplo_, stream());
  const array &w = wv[0], &v = wv[1];
  array x = matmul(matmul(mT(v), sym(tangents[0])), v);
  array dw = diag_part(x);
  if (!compute_vectors_) return {dw};
  return {dw, matmul(v, multiply(inverse_gaps(w), x))};
}

// --- Eig -----------------------------------------------------------------------

std::vector<Shape> Eig::output_shapes(const std::vector<array>& inputs) {
  const Shape& a = inputs[0].shape();
  Shape w(a.begin(), a.end() - 1);
  if (!compute_vectors_) return {w};
  return {w, a};
}

std::vector<Dtype> Eig::output_dtypes(const std::vector<array>&) const {
  if (!compute_vectors_) return {complex64};
  return {complex64, complex64};
}

PrimitiveState Eig::state() const { return {{"compute_vectors", compute_vectors_}}; }

// --- Solve ---------------------------------------------------------------------

std::vector<Shape> Solve::output_shapes(const std::vector<array>& inputs) {
  return {inputs[1].shape()};
}

PrimitiveState Solve::state() const { return {}; }

namespace {
array solve_aligned(const array& a, const array& b, const Stream& s) {
  return array(b.shape(), b.dtype(), std::make_shared<Solve>(s), {a, b});
}
} // namespace

std::vector<array> Solve::vjp(const std::vector<array>& primals,
                              const std::vector<array>& cotangents, const std::vector<int>& argnums,
                              const std::vector<array>& outs) {
  std::vector<array> outputs = own_outputs(primals, outs);
  array gb = solve_aligned(mT(primals[0]), cotangents[0], stream());
  std::vector<array> grads;
  for (int arg : argnums) {
    grads.push_back(arg == 0 ? negative(matmul(gb, mT(outputs[0]))) : gb);
  }
  return grads;
}

std::vector<array> Solve::jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                              const std::vector<int>& argnums) {
  array x = solve_aligned(primals[0], primals[1], stream());
  array rhs = zeros_like(primals[1]);
  for (size_t i = 0; i < argnums.size(); ++i) {
    rhs = argnums[i] == 0 ? subtract(rhs, matmul(tangents[i], x)) : add(rhs, tangents[i]);
  }
  return {solve_aligned(primals[0], rhs, stream())};
}

LOOM_REGISTER_PRIMITIVE(LUF,
                        [](Stream s, const PrimitiveState&) { return std::make_shared<LUF>(s); });
LOOM_REGISTER_PRIMITIVE(Inverse, [](Stream s, const PrimitiveState& st) {
  return std::make_shared<Inverse>(s, state_get<bool>(st, "Inverse", "tri"),
                                   state_get<bool>(st, "Inverse", "upper"));
});
LOOM_REGISTER_PRIMITIVE(Cholesky, [](Stream s, const PrimitiveState& st) {
  return std::make_shared<Cholesky>(s, state_get<bool>(st, "Cholesky", "upper"));
});
LOOM_REGISTER_PRIMITIVE(QRF,
                        [](Stream s, const PrimitiveState&) { return std::make_shared<QRF>(s); });
LOOM_REGISTER_PRIMITIVE(SVD, [](Stream s, const PrimitiveState& st) {
  return std::make_shared<SVD>(s, state_get<bool>(st, "SVD", "compute_uv"));
});
LOOM_REGISTER_PRIMITIVE(Eigh, [](Stream s, const PrimitiveState& st) {
  return std::make_shared<Eigh>(s, state_get<std::string>(st, "Eigh", "uplo"),
                                state_get<bool>(st, "Eigh", "compute_vectors"));
});
LOOM_REGISTER_PRIMITIVE(Eig, [](Stream s, const PrimitiveState& st) {
  return std::make_shared<Eig>(s, state_get<bool>(st, "Eig", "compute_vectors"));
});
LOOM_REGISTER_PRIMITIVE(Solve,
                        [](Stream s, const PrimitiveState&) { return std::make_shared<Solve>(s); });

} // namespace loom
