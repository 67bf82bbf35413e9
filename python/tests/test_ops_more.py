"""diag, diagonal, trace, einsum/einsum_path, view, as_strided, depends,
get_array_buffer_size, float8 conversions and random.permutation /
truncated_normal: values against NumPy, errors, and transforms."""

import gc

import numpy as np
import pytest

from _backend import mx

RNG = np.random.default_rng(7)


def randn(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def close(a, b, rtol=1e-5, atol=1e-5):
    np.testing.assert_allclose(np.array(a), b, rtol=rtol, atol=atol)


# --- diagonal / diag / trace -----------------------------------------------------


@pytest.mark.parametrize("offset", [-3, -1, 0, 1, 2, 5])
@pytest.mark.parametrize("axes", [(0, 1), (1, 0), (0, 2), (2, 1), (-1, -3)])
def test_diagonal_matches_numpy(offset, axes):
    x = randn(3, 4, 5)
    got = mx.diagonal(mx.array(x), offset, *axes)
    np.testing.assert_array_equal(np.array(got), np.diagonal(x, offset, *axes))
    np.testing.assert_array_equal(
        np.array(mx.array(x).diagonal(offset, *axes)), np.diagonal(x, offset, *axes)
    )


def test_diagonal_of_a_transposed_view_and_ints():
    x = np.arange(24, dtype=np.int32).reshape(4, 6)
    got = mx.diagonal(mx.array(x).T, 1)
    np.testing.assert_array_equal(np.array(got), np.diagonal(x.T, 1))


@pytest.mark.parametrize("k", [-2, 0, 3])
def test_diag_builds_and_extracts(k):
    v = randn(4)
    np.testing.assert_array_equal(np.array(mx.diag(mx.array(v), k=k)), np.diag(v, k))
    m = randn(4, 6)
    np.testing.assert_array_equal(np.array(mx.diag(mx.array(m), k)), np.diag(m, k))
    np.testing.assert_array_equal(np.array(mx.array(m).diag(k)), np.diag(m, k))


@pytest.mark.parametrize("offset", [-1, 0, 2])
def test_trace_matches_numpy(offset):
    x = randn(4, 5, 3)
    close(mx.trace(mx.array(x), offset, 0, 1), np.trace(x, offset, 0, 1))
    close(mx.trace(mx.array(x), offset, 2, 0), np.trace(x, offset, 2, 0))
    t = mx.trace(mx.array(np.arange(9, dtype=np.int8).reshape(3, 3)))
    assert t.dtype == mx.int32 and t.item() == 12
    assert mx.trace(mx.ones((3, 3)), dtype=mx.float16).dtype == mx.float16


def test_diagonal_and_trace_gradients():
    x = mx.array(randn(3, 4))
    g = mx.grad(lambda a: mx.trace(a, 1).sum())(x)
    expected = np.zeros((3, 4), np.float32)
    for i in range(3):
        expected[i, i + 1] = 1
    np.testing.assert_array_equal(np.array(g), expected)
    g = mx.grad(lambda a: (mx.diag(a) * mx.arange(3)).sum())(mx.array(randn(3)))
    np.testing.assert_array_equal(np.array(g), [0, 1, 2])
    # vmap over a batch of matrices
    xs = randn(5, 3, 3)
    got = mx.vmap(lambda a: mx.diagonal(a))(mx.array(xs))
    np.testing.assert_array_equal(np.array(got), np.diagonal(xs, 0, 1, 2))


def test_diag_family_errors():
    with pytest.raises(ValueError, match=r"\[diag\] array must be 1-D or 2-D"):
        mx.diag(mx.ones((2, 2, 2)))
    with pytest.raises(ValueError, match=r"\[diagonal\] Array must have at least two"):
        mx.diagonal(mx.ones((3,)))
    with pytest.raises(ValueError, match=r"\[diagonal\] axis1 and axis2 cannot be the same"):
        mx.diagonal(mx.ones((3, 3)), 0, 0, 0)
    with pytest.raises(ValueError, match=r"\[trace\] Array must have at least two"):
        mx.trace(mx.ones(3))
    assert mx.diagonal(mx.ones((2, 3)), 5).shape == (0,)


# --- einsum --------------------------------------------------------------------------

EINSUM_CASES = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("ij,jk", [(3, 4), (4, 5)]),
    ("ij,kj->ik", [(3, 4), (5, 4)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 8), (2, 3, 6, 8)]),
    ("bhqk,bhkd->bhqd", [(2, 3, 4, 6), (2, 3, 6, 8)]),
    ("ii->i", [(4, 4)]),
    ("ii", [(4, 4)]),
    ("iji->j", [(3, 5, 3)]),
    ("ij->ji", [(3, 4)]),
    ("ij->", [(3, 4)]),
    ("ba", [(3, 4)]),
    ("i,i->", [(5,), (5,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ij,kl->ijkl", [(2, 3), (4, 5)]),
    ("ij,jk,kl->il", [(3, 4), (4, 5), (5, 6)]),
    ("ij,jk,kl,lm->im", [(10, 2), (2, 30), (30, 3), (3, 40)]),
    ("ab,bc,cd,de,ea", [(3, 3)] * 5),
    ("i,i,i", [(3,)] * 3),
    ("...ij,...jk->...ik", [(2, 3, 4), (4, 5)]),
    ("...ij,...jk", [(2, 2, 3), (3, 4)]),
    ("i...->...", [(3, 2, 4)]),
    ("...i->...", [(2, 3)]),
    ("ijk,jil->kl", [(3, 4, 5), (4, 3, 2)]),
    ("ij,ij->ij", [(3, 4), (3, 4)]),
    ("i,i", [(3,), (1,)]),
    ("ij,jk->ik", [(2, 3), (1, 4)]),
    ("abc,cd,ae->bde", [(2, 3, 4), (4, 5), (2, 6)]),
]


@pytest.mark.parametrize("subscripts,shapes", EINSUM_CASES)
def test_einsum_matches_numpy(subscripts, shapes):
    ops = [randn(*s) for s in shapes]
    got = mx.einsum(subscripts, *[mx.array(o) for o in ops])
    expected = np.einsum(subscripts, *[o.astype(np.float64) for o in ops])
    close(got, expected, rtol=1e-4, atol=1e-4)


def test_einsum_dtypes_and_noncontiguous():
    a = randn(4, 3)
    got = mx.einsum("ij,jk->ik", mx.array(a).T, mx.array(a))
    close(got, a.T @ a, rtol=1e-5)
    got = mx.einsum("ij->ji", mx.ones((2, 3), dtype=mx.int8))
    assert got.dtype == mx.int8 and got.shape == (3, 2)
    assert mx.einsum("ij->", mx.ones((2, 3), dtype=mx.int8)).dtype == mx.int32
    h = mx.einsum("ij,jk->ik", mx.ones((2, 2), dtype=mx.float16), mx.ones((2, 2)))
    assert h.dtype == mx.float32


def test_einsum_gradient_matches_matmul():
    a, b = mx.array(randn(3, 4)), mx.array(randn(4, 5))
    ga, gb = mx.grad(lambda x, y: mx.einsum("ij,jk->ik", x, y).sum(), argnums=(0, 1))(a, b)
    ea, eb = mx.grad(lambda x, y: (x @ y).sum(), argnums=(0, 1))(a, b)
    close(ga, np.array(ea))
    close(gb, np.array(eb))
    got = mx.vmap(lambda x: mx.einsum("ij,j->i", x, mx.ones(4)))(mx.array(randn(2, 3, 4)))
    assert got.shape == (2, 3)


def test_einsum_path_reports_as_mlx():
    ops = [mx.ones(s) for s in [(3, 4), (4, 5), (5, 6)]]
    path, report = mx.einsum_path("ij,jk,kl->il", *ops)
    assert path == [(1, 2), (0, 1)] or path == [(0, 1), (0, 1)]
    ops = [mx.ones(s) for s in [(2, 3), (3, 4), (4, 5)]]
    path, report = mx.einsum_path("ij,jk,kl->il", *ops)
    assert path == [(1, 2), (0, 1)]
    assert report == (
        "  Complete contraction:  ij,jk,kl->il\n"
        "         Naive scaling:  4\n"
        "     Optimized scaling:  3\n"
        "      Naive FLOP count:  360\n"
        "  Optimized FLOP count:  180\n"
    )
    ops = [mx.ones(s) for s in [(10, 2), (2, 30), (30, 3), (3, 40)]]
    path, report = mx.einsum_path("ij,jk,kl,lm->im", *ops)
    assert path == [(1, 2), (1, 2), (0, 1)]
    assert "Naive FLOP count:  288000\n" in report and "Optimized FLOP count:  2440\n" in report
    path, _ = mx.einsum_path("ab,bc,cd,de,ea", *[mx.ones((3, 3))] * 5)
    assert path == [(0, 1)] * 4
    path, report = mx.einsum_path("ii", mx.ones((3, 3)))
    assert path == [(0,)] and "Naive FLOP count:  6\n" in report
    # Outer products only: MLX rescans the pairs with the newest tensor
    # (NumPy would take (0, 1) in both).
    path, _ = mx.einsum_path("a,d,df,e->fea", mx.ones(3), mx.ones(5), mx.ones((5, 3)), mx.ones(1))
    assert path == [(1, 2), (1, 2), (0, 1)]
    shapes = [(2, 3, 2), (5, 6), (2, 3, 2), (2,)]
    path, _ = mx.einsum_path("cfc,ab,dge,c->f", *[mx.ones(s) for s in shapes])
    assert path == [(0, 3), (0, 2), (0, 1)]


def test_einsum_errors():
    with pytest.raises(ValueError, match=r"\[einsum\] Number of operands, 1, does not match"):
        mx.einsum("ij,jk", mx.ones((2, 3)))
    with pytest.raises(ValueError, match=r"\[einsum\] Cannot broadcast dimension 0 of input 1"):
        mx.einsum("ij,jk->ik", mx.ones((2, 3)), mx.ones((4, 4)))
    with pytest.raises(ValueError, match=r"\[einsum\] Invalid number of subscripts 1"):
        mx.einsum("i->", mx.ones((2, 2)))
    with pytest.raises(ValueError, match=r"\[einsum\] Dimensions of repeated subscripts"):
        mx.einsum("ii", mx.ones((2, 3)))
    with pytest.raises(ValueError, match=r"\[einsum\] Repeat indices not allowed in output"):
        mx.einsum("i->ii", mx.ones((2,)))
    with pytest.raises(ValueError, match=r"\[einsum\] Subscripts must be letters, but got '1'"):
        mx.einsum("i1", mx.ones((2, 2)))


# --- view / as_strided ---------------------------------------------------------------


def test_view_reinterprets_bytes():
    x = np.arange(6, dtype=np.float32)
    np.testing.assert_array_equal(np.array(mx.view(mx.array(x), mx.int32)), x.view(np.int32))
    np.testing.assert_array_equal(np.array(mx.array(x).view(mx.uint8)), x.view(np.uint8))
    b = np.arange(4, dtype=np.uint8)
    np.testing.assert_array_equal(np.array(mx.view(mx.array(b), mx.float16)), b.view(np.float16))
    m = np.arange(6, dtype=np.float32).reshape(2, 3)
    got = mx.view(mx.array(m).T, mx.uint8)
    np.testing.assert_array_equal(np.array(got), np.ascontiguousarray(m.T).view(np.uint8))
    assert mx.vmap(lambda y: mx.view(y, mx.uint8))(mx.ones((3, 2))).shape == (3, 8)
    g = mx.grad(lambda y: mx.view(y, mx.float32).sum())(mx.array(x))
    np.testing.assert_array_equal(np.array(g), np.ones(6))


def test_view_errors():
    with pytest.raises(ValueError, match=r"\[view\] When viewing as a larger dtype"):
        mx.view(mx.arange(3, dtype=mx.uint8), mx.float16)
    with pytest.raises(ValueError, match=r"\[view\] Changing the type of a scalar"):
        mx.view(mx.array(1.0), mx.uint8)


def test_as_strided_windows():
    x = np.arange(12, dtype=np.float32)
    got = mx.as_strided(mx.array(x), (3, 4), (2, 1), 1)
    expected = np.lib.stride_tricks.as_strided(x[1:], (3, 4), (8, 4))
    np.testing.assert_array_equal(np.array(got), expected)
    np.testing.assert_array_equal(np.array(mx.as_strided(mx.array(x))), x)
    m = x.reshape(3, 4)
    got = mx.as_strided(mx.array(m).T, (12,), (1,))
    np.testing.assert_array_equal(np.array(got), m.T.reshape(-1))
    # overlapping windows accumulate in the gradient
    g = mx.grad(lambda y: mx.as_strided(y, (2, 2), (1, 2)).sum())(mx.arange(6.0))
    np.testing.assert_array_equal(np.array(g), [1, 1, 1, 1, 0, 0])


@pytest.mark.loom_only
def test_as_strided_bounds_and_vmap():
    with pytest.raises(ValueError, match=r"\[as_strided\] A window of shape"):
        mx.as_strided(mx.arange(6.0), (3, 3), (3, 1))
    with pytest.raises(ValueError, match=r"\[as_strided\] Got 3 strides"):
        mx.as_strided(mx.arange(6.0), (2, 2), (1, 2, 3))
    got = mx.vmap(lambda y: mx.as_strided(y, (2,), (2,)))(mx.array(np.arange(12.0).reshape(3, 4)))
    np.testing.assert_array_equal(np.array(got), [[0, 2], [4, 6], [8, 10]])


# --- depends / buffer sizes ------------------------------------------------------------


def test_depends_passes_inputs_and_gradients():
    a, b = mx.array([1.0, 2.0]), mx.array([3.0])
    out = mx.depends(a, b)
    np.testing.assert_array_equal(np.array(out), [1, 2])
    outs = mx.depends([a, a], [b])
    assert isinstance(outs, list) and len(outs) == 2
    g = mx.grad(lambda x: mx.depends(x * 2, b).sum())(a)
    np.testing.assert_array_equal(np.array(g), [2, 2])
    g = mx.grad(lambda y: mx.depends(a, y * 2).sum())(b)
    np.testing.assert_array_equal(np.array(g), [0])


def test_get_array_buffer_size():
    a, b = mx.array([1.0, 2.0]), mx.array([3.0])
    mx.eval(a, b)
    size = mx.get_array_buffer_size(a, [b, a], {"x": 3})
    assert size >= 12 and size == mx.get_array_buffer_size(a) + mx.get_array_buffer_size(b)
    with pytest.raises(ValueError, match=r"\[get_array_buffer_size\] Arrays must be evaluated"):
        mx.get_array_buffer_size(mx.ones((10,)) + 1)


# --- float8 --------------------------------------------------------------------------


def test_fp8_round_trip_and_rounding():
    codes = mx.arange(256).astype(mx.uint8)
    values = np.array(mx.from_fp8(codes, mx.float32))
    assert np.isnan(values[127]) and np.isnan(values[255])
    assert values[126] == 448 and values[1] == 2.0**-9 and values[56] == 1.0
    finite = np.array([i for i in range(256) if i not in (127, 255)], np.uint8)
    back = np.array(mx.to_fp8(mx.array(values[finite])))
    np.testing.assert_array_equal(back[finite != 128], finite[finite != 128])
    x = mx.array([0.0, -0.0, 1.0, 448.0, 449.0, 1000.0, np.inf, -np.inf, 2**-9, 2**-10,
                  3 * 2**-11, 1.0625, 1.1875, -3.3, 2**-6, 0.9 * 2**-6])
    assert mx.to_fp8(x).tolist() == [0, 128, 56, 126, 126, 126, 126, 254, 1, 0, 1, 56, 58, 197, 8, 7]
    assert mx.from_fp8(codes).dtype == mx.bfloat16
    assert mx.to_fp8(mx.array([1.0, 2.0], dtype=mx.float16)).tolist() == [56, 64]


def test_fp8_errors():
    with pytest.raises(ValueError, match=r"\[to_fp8\] Only real floating types"):
        mx.to_fp8(mx.array([1, 2]))
    with pytest.raises(ValueError, match=r"\[from_fp8\] Input must have type uint8"):
        mx.from_fp8(mx.array([1.0]))
    with pytest.raises(ValueError, match=r"\[from_fp8\] Only real floating types"):
        mx.from_fp8(mx.array([1], dtype=mx.uint8), mx.int32)


# --- random ----------------------------------------------------------------------------


def test_permutation():
    k = mx.random.key(3)
    p = mx.random.permutation(8, key=k)
    assert p.dtype == mx.uint32
    assert p.tolist() == [5, 4, 0, 7, 3, 2, 1, 6]
    assert sorted(p.tolist()) == list(range(8))
    x = mx.arange(12).reshape(3, 4)
    got = mx.random.permutation(x, axis=1, key=k)
    assert sorted(np.array(got)[0].tolist()) == [0, 1, 2, 3]
    got = np.array(got)  # every row permuted the same way
    np.testing.assert_array_equal(got, got[:1] + 4 * np.arange(3)[:, None])


def test_truncated_normal():
    k = mx.random.key(3)
    got = mx.random.truncated_normal(-1, 1, (4,), key=k)
    close(got, [-0.463502, -0.969105, 0.182822, -0.28657], rtol=1e-4, atol=1e-5)
    many = np.array(mx.random.truncated_normal(-0.5, 2.0, (20000,), key=k))
    assert many.min() >= -0.5 and many.max() <= 2.0
    assert mx.random.truncated_normal(mx.zeros((2, 1)), mx.ones((3,)), key=k).shape == (2, 3)
    assert mx.random.truncated_normal(0, 1, dtype=mx.float16, key=k).dtype == mx.float16
    with pytest.raises(ValueError, match=r"\[trunc_normal\] trunc_normal only accepts floating"):
        mx.random.truncated_normal(0, 1, dtype=mx.int32)


@pytest.mark.loom_only
def test_new_ops_do_not_leak():
    def cycle():
        a = mx.array(randn(8, 8))
        outs = [
            mx.einsum("ij,jk,kl->il", a, a, a),
            mx.trace(a),
            mx.as_strided(a, (4, 4), (8, 1)),
            mx.view(a, mx.int32),
            mx.from_fp8(mx.to_fp8(a)),
            *mx.depends([a], [a * 2]),
        ]
        mx.eval(outs)
        mx.eval(mx.grad(lambda x: mx.einsum("ij,jk->", x, x) + mx.trace(x))(a))

    for _ in range(3):
        cycle()
    gc.collect()
    mx.synchronize()
    base = mx.get_active_memory()
    for _ in range(20):
        cycle()
    gc.collect()
    mx.synchronize()
    assert mx.get_active_memory() == base
