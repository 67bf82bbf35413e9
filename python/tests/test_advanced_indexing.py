"""Indexing with arrays against NumPy: integer arrays and lists mixed with
integers, slices, None and Ellipsis (NumPy's placement of the indexed
dimensions), assignment, ``array.at`` with repeated indices, take /
take_along_axis / put_along_axis, dynamic slices, and Loom's boolean masks."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from _backend import IS_MLX, mx
from _helpers import assert_array, from_numpy


class _Keys:
    def __getitem__(self, key):
        return key


K = _Keys()
AN = np.arange(4 * 5 * 6, dtype=np.int32).reshape(4, 5, 6)

# Index expressions, with lists standing for integer arrays (converted below
# to each backend's arrays as well as used as lists).
GET_CASES = [
    K[[0, 2]],
    K[[-1, 0, 1]],
    K[[[0, 1], [2, 3]]],
    K[:, [1, 3]],
    K[:, :, [5, 0, -1]],
    K[[0, 1], [1, 2]],
    K[[0, 1], :, [1, 2]],  # separated: indexed dims first
    K[:, [0, 1], [1, 2]],  # adjacent: in place
    K[1, :, [0, 2]],  # integer + array separated by a slice
    K[:, 1, [0, 2]],  # integer + array adjacent
    K[[0, 1], None, [1, 2]],  # None separates
    K[:, None, [0, 1]],
    K[None, [0, 1], [1, 0]],
    K[[0, 1], [1, 0], None],
    K[[[0], [1]], ..., [1, 2]],
    K[..., [0, 5]],
    K[:, [0, 1], ..., [1, 2]],  # an empty Ellipsis still separates (NumPy)
    K[::-1, [0, 2], 1:5:2],
    K[[2, 0], ::-2, [[1], [3]]],
    K[[3], [4], [5]],
    K[[0, 0, 0]],
    K[[]],
]


# MLX 0.32.4 ignores an empty Ellipsis between array indices; Loom follows NumPy.
MLX_DIVERGES = {repr(K[:, [0, 1], ..., [1, 2]])}


def _to_backend(key):
    """The key with its lists replaced by backend arrays."""
    def conv(k):
        if isinstance(k, list):
            return mx.array(np.array(k, dtype=np.int32)) if len(k) else mx.array(np.zeros(0, np.int32))
        return k
    return tuple(conv(k) for k in key) if isinstance(key, tuple) else conv(key)


def _np_key(key):
    def conv(k):
        return np.array(k, dtype=np.intp) if isinstance(k, list) else k
    return tuple(conv(k) for k in key) if isinstance(key, tuple) else conv(key)


def _cases(keys):
    return [pytest.param(k, marks=pytest.mark.loom_only) if repr(k) in MLX_DIVERGES else k for k in keys]


@pytest.mark.parametrize("key", _cases(GET_CASES), ids=repr)
def test_getitem_with_arrays(key):
    assert_array(mx.array(AN)[_to_backend(key)], AN[_np_key(key)], "int32")


@pytest.mark.parametrize("key", GET_CASES[:8], ids=repr)
def test_getitem_with_lists(key):
    assert_array(mx.array(AN)[key], AN[_np_key(key)], "int32")


# MLX 0.32.4 writes K[1, :, [0, 2]] to the wrong place (the advanced
# dimensions of a separated integer/array pair); Loom follows NumPy.
SET_CASES = [pytest.param(k, marks=pytest.mark.loom_only) if k == K[1, :, [0, 2]] or repr(k) in MLX_DIVERGES
             else k for k in GET_CASES]


@pytest.mark.parametrize("key", SET_CASES, ids=repr)
def test_setitem_with_arrays(key):
    np_key = _np_key(key)
    region = AN[np_key]
    values = np.arange(region.size, dtype=np.int32).reshape(region.shape) + 1000
    expected = AN.copy()
    expected[np_key] = values
    a = mx.array(AN)
    a[_to_backend(key)] = mx.array(values)
    marks = np.zeros(AN.shape, np.int32)
    np.add.at(marks, np_key, 1)
    if marks.max() > 1:
        # Repeated indices: which write wins is unspecified; the others hold.
        once = marks <= 1
        assert np.array_equal(np.array(a)[once], expected[once])
    else:
        assert_array(a, expected, "int32")


def test_setitem_broadcasts_scalars_and_rows():
    a = mx.array(np.zeros((3, 4), np.float32))
    a[mx.array([0, 2])] = 5.0
    a[1, mx.array([1, 3])] = mx.array([7.0, 8.0])
    expected = np.zeros((3, 4), np.float32)
    expected[[0, 2]] = 5.0
    expected[1, [1, 3]] = [7.0, 8.0]
    assert_array(a, expected, "float32")


@pytest.mark.parametrize(
    "op, np_op",
    [
        ("add", np.add),
        ("subtract", np.subtract),
        ("multiply", np.multiply),
        ("divide", np.divide),
        ("maximum", np.maximum),
        ("minimum", np.minimum),
    ],
)
def test_at_accumulates_repeated_indices(op, np_op):
    rng = np.random.default_rng(0)
    base = rng.uniform(1, 2, size=(5, 3)).astype(np.float32)
    idx = np.array([0, 2, 0, 4, 2, 0])
    vals = rng.uniform(1, 2, size=(6, 3)).astype(np.float32)
    expected = base.copy()
    np_op.at(expected, idx, vals)
    out = getattr(mx.array(base).at[mx.array(idx)], op)(mx.array(vals))
    assert_array(out, expected, "float32", rtol=1e-5, atol=1e-6)


def test_at_with_mixed_index_and_basic_index():
    base = np.zeros((3, 4), np.float32)
    out = mx.array(base).at[1:, mx.array([0, 0, 3])].add(1.0)
    expected = base.copy()
    np.add.at(expected, (slice(1, None), np.array([0, 0, 3])), 1.0)
    assert_array(out, expected, "float32")
    out = mx.array(base).at[::2, 1].add(mx.array([1.0, 2.0]))
    expected = base.copy()
    expected[::2, 1] += [1.0, 2.0]
    assert_array(out, expected, "float32")


def test_at_integer_add_keeps_dtype():
    out = mx.array([1, 2, 3]).at[mx.array([0, 0])].add(5)
    assert out.dtype == mx.int32
    assert out.tolist() == [11, 2, 3]


def test_negative_step_slices_before_the_start():
    # issue 6 defect 1
    x = mx.array([1, 2, 3])
    assert x[-5::-1].tolist() == []
    assert x[-4::-2].tolist() == []
    y = mx.array([[1.0], [2.0]])
    y[:, -2::-2] = 7.0
    assert y.tolist() == [[1.0], [2.0]]
    z = mx.array([5.0])
    z[-2::-2] = 1.0
    assert z.tolist() == [5.0]


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_take(axis):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    idx = np.array([[0, -1], [2, 1]])
    expected = np.take(a, idx, axis=axis)
    assert_array(mx.take(mx.array(a), mx.array(idx), axis=axis), expected, "float32")


def test_take_scalar_index_and_errors():
    a = mx.array(np.arange(6).reshape(2, 3))
    assert mx.take(a, 1).tolist() == 1
    assert mx.take(a, 1, axis=1).tolist() == [1, 4]
    with pytest.raises(IndexError):
        mx.take(a, mx.array([1]), axis=2)
    with pytest.raises(ValueError):
        mx.take(a, mx.array([1.0]))


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_take_along_axis(axis):
    rng = np.random.default_rng(1)
    a = rng.normal(size=(3, 4)).astype(np.float32)
    idx = np.argsort(a, axis=axis)
    assert_array(mx.take_along_axis(mx.array(a), mx.array(idx), axis=axis),
                 np.take_along_axis(a, idx, axis=axis), "float32")


def test_take_along_axis_broadcasts_and_flattens():
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    idx = np.array([[2, 0]])
    assert_array(mx.take_along_axis(mx.array(a), mx.array(idx), axis=1),
                 np.take_along_axis(a, np.broadcast_to(idx, (2, 2)), axis=1), "int32")
    assert mx.take_along_axis(mx.array(a), mx.array([1, 0, 5]), axis=None).tolist() == [1, 0, 5]
    with pytest.raises(ValueError):
        mx.take_along_axis(mx.array(a), mx.array([1]), 1)


def test_put_along_axis():
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    out = mx.put_along_axis(mx.array(a), mx.array([[1], [0]]), mx.array([[7], [8]]), 1)
    assert out.tolist() == [[0, 7, 2], [8, 4, 5]]
    out = mx.put_along_axis(mx.array(a), mx.array([[1]]), mx.array([[7], [8]]), 1)
    assert out.tolist() == [[0, 7, 2], [3, 8, 5]]
    out = mx.put_along_axis(mx.array(a), mx.array([1, 0]), mx.array(9), None)
    assert out.tolist() == [[9, 9, 2], [3, 4, 5]]


def test_dynamic_slice_semantics():
    # issue 6 defect 11: slice_size is the output's full shape, as in MLX.
    a = mx.array(np.arange(6).reshape(2, 3))
    assert mx.slice(a, mx.array([1]), (0,), (1, 2)).tolist() == [[3, 4]]
    assert mx.slice(a, mx.array([1, 1]), (0, 1), (1, 2)).tolist() == [[4, 5]]
    assert mx.slice(a, mx.array(1), (0,), (1, 2)).tolist() == [[3, 4]]
    with pytest.raises(ValueError):
        mx.slice(a, mx.array([1]), (0,), (1,))
    with pytest.raises(ValueError):
        mx.slice(a, mx.array([1, 1]), (0,), (1, 2))
    with pytest.raises(ValueError):
        mx.slice(a, mx.array([1.0]), (0,), (1, 2))


def test_dynamic_slice_update():
    a = mx.array(np.arange(6).reshape(2, 3))
    assert mx.slice_update(a, mx.array([[9]]), mx.array([1, 1]), (0, 1)).tolist() == [[0, 1, 2], [3, 9, 5]]
    assert mx.slice_update(a, mx.array([9]), mx.array([1]), (0,)).tolist() == [[0, 1, 2], [9, 4, 5]]
    z = mx.zeros((4, 4))
    out = mx.slice_update(z, mx.ones((2, 2)), mx.array([1, 2]), (0, 1))
    expected = np.zeros((4, 4), np.float32)
    expected[1:3, 2:4] = 1
    assert_array(out, expected, "float32")


@pytest.mark.loom_only  # MLX: "vmap over start indices not yet supported"
def test_dynamic_slice_under_vmap_and_grad():
    # The start index is data, read at evaluation: vmap over it works.
    a = mx.array(np.arange(12, dtype=np.float32).reshape(3, 4))
    starts = mx.array([[0], [1], [2]])
    out = mx.vmap(lambda s: mx.slice(a, s, (1,), (3, 2)), in_axes=0)(starts)
    assert out.shape == (3, 3, 2)
    assert out[2].tolist() == np.arange(12).reshape(3, 4)[:, 2:4].tolist()
    g = mx.grad(lambda x: mx.slice(x, mx.array([1]), (1,), (3, 2)).sum())(a)
    expected = np.zeros((3, 4), np.float32)
    expected[:, 1:3] = 1
    assert_array(g, expected, "float32")


def test_gather_gradient_accumulates_repeats():
    x = mx.array([1.0, 2.0, 3.0])
    g = mx.grad(lambda v: (v[mx.array([0, 0, 2])] * mx.array([1.0, 2.0, 3.0])).sum())(x)
    assert g.tolist() == [3.0, 0.0, 3.0]
    g = mx.grad(lambda v: mx.take(v, mx.array([1, 1]), axis=0).sum())(x)
    assert g.tolist() == [0.0, 2.0, 0.0]


def test_vmap_of_indexing():
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    idx = np.array([[0, 5], [1, 1], [2, 3], [4, 0]])
    # batched source and indices
    out = mx.vmap(lambda r, i: r[i])(mx.array(a), mx.array(idx))
    assert_array(out, np.take_along_axis(a, idx, axis=1), "float32")
    # batched source only
    out = mx.vmap(lambda r: r[mx.array([5, 0])])(mx.array(a))
    assert_array(out, a[:, [5, 0]], "float32")
    # batched indices only
    row = mx.array(a[0])
    out = mx.vmap(lambda i: row[i])(mx.array(idx))
    assert_array(out, a[0][idx], "float32")
    # batched scatter
    out = mx.vmap(lambda r, i: r.at[i].add(1.0))(mx.array(a), mx.array(idx))
    expected = a.copy()
    for b in range(4):
        np.add.at(expected[b], idx[b], 1.0)
    assert_array(out, expected, "float32")


@pytest.mark.loom_only
def test_out_of_range_index_raises_at_evaluation():
    # Evaluation errors arrive as RuntimeError naming the op and its inputs.
    a = mx.arange(10)
    with pytest.raises(RuntimeError, match=r"\[gather\] Index 12 is out of bounds for axis 0 with size 10"):
        mx.eval(mx.take(a, mx.array([12])))
    with pytest.raises(RuntimeError, match="out of bounds"):
        mx.eval(a[mx.array([-11])])
    with pytest.raises(RuntimeError, match="out of bounds"):
        mx.eval(a.at[mx.array([10])].add(1))


@pytest.mark.loom_only
def test_boolean_mask_get_and_set():
    an = np.arange(12, dtype=np.float32).reshape(3, 4)
    mask = an % 3 == 0
    assert_array(mx.array(an)[mx.array(mask)], an[mask], "float32")
    rows = np.array([True, False, True])
    assert_array(mx.array(an)[mx.array(rows)], an[rows], "float32")
    assert_array(mx.array(an)[:, [True, False, False, True]], an[:, [True, False, False, True]], "float32")
    a = mx.array(an)
    a[mx.array(mask)] = 0.0
    expected = an.copy()
    expected[mask] = 0.0
    assert_array(a, expected, "float32")
    with pytest.raises(IndexError):
        mx.array(an)[mx.array([True, False])]


# --- property test against NumPy ---------------------------------------------

SHAPE = (4, 3, 5)


@st.composite
def index_expressions(draw):
    """Random mixes of ints, slices (negative steps too), integer arrays,
    None and Ellipsis for an array of shape SHAPE."""
    entries = []
    axis = 0
    size = draw(st.integers(1, 3))  # one length for every array, so they broadcast
    use_ellipsis = draw(st.booleans())
    n_axes = draw(st.integers(0, len(SHAPE)))
    ellipsis_at = draw(st.integers(0, n_axes)) if use_ellipsis else -1
    for k in range(n_axes):
        if k == ellipsis_at:
            entries.append(Ellipsis)
        if draw(st.integers(0, 5)) == 0:
            entries.append(None)
        dim = SHAPE[axis] if ellipsis_at < 0 or k < ellipsis_at else SHAPE[len(SHAPE) - (n_axes - k)]
        kind = draw(st.sampled_from(["int", "slice", "array"]))
        if kind == "int":
            entries.append(draw(st.integers(-dim, dim - 1)))
        elif kind == "slice":
            bound = st.none() | st.integers(-dim - 2, dim + 2)
            step = draw(st.none() | st.integers(-3, 3).filter(lambda s: s != 0))
            entries.append(slice(draw(bound), draw(bound), step))
        else:
            entries.append(draw(st.lists(st.integers(-dim, dim - 1), min_size=size, max_size=size)))
        axis += 1
    if ellipsis_at == n_axes:
        entries.append(Ellipsis)
    return tuple(entries)


def _mlx_diverges(key):
    """Keys where MLX 0.32.4 departs from NumPy (Loom follows NumPy): integers
    mixed with arrays place the indexed dimensions differently, and MLX
    cannot assign through None mixed with arrays."""
    lists = [i for i, k in enumerate(key) if isinstance(k, list)]
    has_int = any(isinstance(k, int) and not isinstance(k, bool) for k in key)
    # NumPy counts an Ellipsis between array indices as separating them
    # (even an empty one); MLX does not.
    split_by_ellipsis = any(k is Ellipsis and lists and lists[0] < i < lists[-1] for i, k in enumerate(key))
    return bool(lists) and (has_int or any(k is None for k in key) or split_by_ellipsis)


def _backend_key(key):
    return tuple(mx.array(np.array(k, dtype=np.int32)) if isinstance(k, list) else k for k in key)


def _numpy_key(key):
    return tuple(np.array(k, dtype=np.intp) if isinstance(k, list) else k for k in key)


BASE = np.arange(int(np.prod(SHAPE)), dtype=np.int32).reshape(SHAPE)


@settings(max_examples=300, deadline=None)
@given(index_expressions())
def test_random_index_expressions_get(key):
    expected = BASE[_numpy_key(key)]
    if IS_MLX and (_mlx_diverges(key) or (expected.size == 0 and any(isinstance(k, list) for k in key))):
        return  # MLX 0.32.4 can crash (SIGFPE) gathering into an empty result
    assert_array(mx.array(BASE)[_backend_key(key)], expected, "int32")


@settings(max_examples=300, deadline=None)
@given(index_expressions())
def test_random_index_expressions_set(key):
    np_key = _numpy_key(key)
    region = BASE[np_key]
    if IS_MLX and (_mlx_diverges(key) or (region.size == 0 and any(isinstance(k, list) for k in key))):
        return
    # Only keys addressing each element once have a defined result.
    marks = np.zeros(BASE.shape, np.int32)
    np.add.at(marks, np_key, 1)
    if marks.max(initial=0) > 1:
        return
    values = (np.arange(np.size(region), dtype=np.int32) + 1000).reshape(np.shape(region))
    expected = BASE.copy()
    expected[np_key] = values
    a = mx.array(BASE)
    a[_backend_key(key)] = mx.array(values)
    assert_array(a, expected, "int32")


# --- derivatives against finite differences ---------------------------------

import test_gradients_fd as fd  # noqa: E402

_IDX = np.array([[2, 0], [1, 2]])
_REP = np.array([0, 3, 0, 1])


def _np_at_add(x, v):
    out = x.copy()
    np.add.at(out, _REP, v)
    return out


def _np_set(x, v):
    out = x.copy()
    out[[1, 3], 1:] = v
    return out


def _mx_set(x, v):
    x = x * 1
    x[mx.array([1, 3]), 1:] = v
    return x


GRAD_CASES = [
    fd.Case("getitem-array", lambda x: x[mx.array(_IDX)], lambda x: x[_IDX], [((4, 3), fd.U)]),
    fd.Case("getitem-mixed", lambda x: x[1:, mx.array([2, 0, 2])], lambda x: x[1:, [2, 0, 2]], [((4, 3), fd.U)]),
    fd.Case("take-axis1", lambda x: mx.take(x, mx.array(_IDX), axis=1), lambda x: np.take(x, _IDX, axis=1), [((4, 3), fd.U)]),
    fd.Case("take_along_axis", lambda x: mx.take_along_axis(x, mx.array(np.array([[2], [0], [1], [1]])), axis=1),
            lambda x: np.take_along_axis(x, np.array([[2], [0], [1], [1]]), axis=1), [((4, 3), fd.U)]),
    fd.Case("at-add-repeated", lambda x, v: x.at[mx.array(_REP)].add(v), _np_at_add, [((4, 3), fd.U), ((4, 3), fd.U)]),
    fd.Case("setitem", _mx_set, _np_set, [((4, 3), fd.U), ((2, 2), fd.U)]),
    fd.Case("at-maximum", lambda x, v: x.at[mx.array([0, 2])].maximum(v),
            lambda x, v: (lambda o: (np.maximum.at(o, [0, 2], v), o)[1])(x.copy()),
            [((4, 3), fd.distinct), ((2, 3), fd.distinct)]),
    fd.Case("at-minimum", lambda x, v: x.at[mx.array([1, 3])].minimum(v),
            lambda x, v: (lambda o: (np.minimum.at(o, [1, 3], v), o)[1])(x.copy()),
            [((4, 3), fd.distinct), ((2, 3), fd.distinct)]),
    fd.Case("put_along_axis", lambda x, v: mx.put_along_axis(x, mx.array(np.array([[1], [0], [2], [1]])), v, axis=1),
            lambda x, v: (lambda o: (np.put_along_axis(o, np.array([[1], [0], [2], [1]]), v, axis=1), o)[1])(x.copy()),
            [((4, 3), fd.U), ((4, 1), fd.U)]),
    fd.Case("sort", lambda x: mx.sort(x, axis=0), lambda x: np.sort(x, axis=0), [((4, 3), fd.distinct)]),
    fd.Case("topk", lambda x: mx.sort(mx.topk(x, 2, axis=1), axis=1), lambda x: np.sort(x, axis=1)[:, -2:], [((4, 3), fd.distinct)]),
]


def _loom_only(cases, names):
    return [pytest.param(c, marks=pytest.mark.loom_only) if c.name in names else c for c in cases]


# MLX 0.32.4 fails the gradient of an assignment through an array and a slice
# ("[reshape] Cannot reshape ..."), and has no jvp for scatters.
@pytest.mark.parametrize("case", _loom_only(GRAD_CASES, {"setitem"}), ids=repr)
def test_grad_matches_finite_differences(case):
    values = fd._inputs(case)
    loss, loss_ref = fd._scalarised(case, fd._weights(case, values))
    argnums = tuple(range(len(values)))
    grads = mx.grad(loss, argnums=argnums)(*fd._mx(values))
    grads = grads if isinstance(grads, tuple) else (grads,)
    for i, g in enumerate(grads):
        fd._check(g, fd._fd_gradient(loss_ref, values, i), f"d/d arg{i}")


@pytest.mark.parametrize("case", _loom_only(GRAD_CASES, {"setitem", "at-add-repeated", "at-maximum", "at-minimum"}),
                         ids=repr)
def test_jvp_matches_finite_differences(case):
    values = fd._inputs(case, seed=2)
    rng = np.random.default_rng(3)
    tangents = [rng.uniform(-1, 1, size=v.shape).astype(np.float32).astype(np.float64) for v in values]
    _, (jt,) = mx.jvp(case.fn, fd._mx(values), fd._mx(tangents))
    hi = [v + fd.EPS * t for v, t in zip(values, tangents)]
    lo = [v - fd.EPS * t for v, t in zip(values, tangents)]
    fd._check(jt, (case.ref(*hi) - case.ref(*lo)) / (2 * fd.EPS), "tangent")


@pytest.mark.parametrize("case", _loom_only(GRAD_CASES, {"setitem"}), ids=repr)
def test_vmap_of_grad_over_each_argument(case):
    n = len(case.inputs)
    for arg in range(n):
        per_example = [fd._inputs(case, seed=10 + b) for b in range(3)]
        loss, loss_ref = fd._scalarised(case, fd._weights(case, per_example[0], seed=4))
        batched = np.stack([v[arg] for v in per_example])
        shared = list(per_example[0])
        in_axes = tuple(0 if i == arg else None for i in range(n))
        args = [mx.array(batched.astype(np.float32)) if i == arg else mx.array(shared[i].astype(np.float32)) for i in range(n)]
        grads = mx.vmap(mx.grad(loss, argnums=arg), in_axes=in_axes)(*args)
        expected = np.stack([
            fd._fd_gradient(loss_ref, [batched[b] if i == arg else shared[i] for i in range(n)], arg) for b in range(3)
        ])
        fd._check(grads, expected, f"vmap(grad) over arg{arg}")


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "complex64"])
def test_gather_and_scatter_dtypes(dtype):
    from _helpers import to_numpy
    base = np.arange(12).reshape(4, 3) % 5
    if dtype == "complex64":
        a = mx.array(base.astype(np.complex64) * (1 + 1j))
    else:
        a = from_numpy(base, dtype)
    ref = to_numpy(a)
    idx = np.array([3, 0, 3])
    assert np.array_equal(to_numpy(a[mx.array(idx)]), ref[idx])
    assert np.array_equal(to_numpy(mx.take(a, mx.array([2, 0]), axis=1)), ref[:, [2, 0]])
    b = a * 1 if dtype != "bool" else a
    b[mx.array([1, 2])] = a[mx.array([0, 0])]
    expected = ref.copy()
    expected[[1, 2]] = ref[[0, 0]]
    assert np.array_equal(to_numpy(b), expected)
    if dtype not in ("bool",):
        out = a.at[mx.array([0, 0, 2])].add(a[mx.array([1, 1, 1])])
        expected = ref.copy()
        np.add.at(expected, [0, 0, 2], ref[[1, 1, 1]])
        assert np.array_equal(to_numpy(out), expected.astype(ref.dtype))


def test_indexing_non_contiguous_sources_and_targets():
    an = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    a = mx.array(an).transpose(2, 0, 1)[::2]
    view = an.transpose(2, 0, 1)[::2]
    idx = np.array([[2, 0], [1, 1]])
    assert_array(a[:, mx.array(idx)], view[:, idx], "float32")
    b = mx.array(an).transpose(2, 0, 1)
    b[mx.array([4, 0]), 1:, mx.array([3, 2])] = mx.array(-1.0)
    expected = an.transpose(2, 0, 1).copy()
    expected[[4, 0], 1:, [3, 2]] = -1.0
    assert_array(b, expected, "float32")
