"""Bad input: errors are raised when the op is recorded (before any
evaluation), with MLX's exception types and messages, and they leave the
inputs intact and the library usable."""

import gc

import numpy as np
import pytest

from _backend import IS_LOOM, mx


def _lazy_operands():
    """Two unevaluated arrays of shapes (2,3) and (4,5), built from evaluated leaves."""
    a0 = mx.arange(6).astype(mx.float32)
    b0 = mx.arange(20).astype(mx.float32)
    mx.eval(a0, b0)
    return mx.reshape(a0 * 2, (2, 3)), mx.reshape(b0 + 1, (4, 5))


SHAPE_ERRORS = [
    ("add", lambda a, b: a + b, "[broadcast_shapes] Shapes (2,3) and (4,5) cannot be broadcast."),
    ("subtract", lambda a, b: mx.subtract(a, b), "[broadcast_shapes] Shapes (2,3) and (4,5) cannot be broadcast."),
    ("multiply", lambda a, b: a * b, "[broadcast_shapes] Shapes (2,3) and (4,5) cannot be broadcast."),
    ("divide", lambda a, b: a / b, "[broadcast_shapes] Shapes (2,3) and (4,5) cannot be broadcast."),
    ("power", lambda a, b: mx.power(a, b), "[broadcast_shapes] Shapes (2,3) and (4,5) cannot be broadcast."),
    ("maximum", lambda a, b: mx.maximum(a, b), "[broadcast_shapes] Shapes (2,3) and (4,5) cannot be broadcast."),
    ("minimum", lambda a, b: mx.minimum(a, b), "[broadcast_shapes] Shapes (2,3) and (4,5) cannot be broadcast."),
    ("equal", lambda a, b: a == b, "[broadcast_shapes] Shapes (2,3) and (4,5) cannot be broadcast."),
    ("less", lambda a, b: a < b, "[broadcast_shapes] Shapes (2,3) and (4,5) cannot be broadcast."),
    ("where", lambda a, b: mx.where(a > 0, b, 0.0), "[broadcast_shapes] Shapes (2,3) and (4,5) cannot be broadcast."),
    (
        "matmul",
        lambda a, b: a @ b,
        "[matmul] Last dimension of first input with shape (2,3) must match second to last dimension of second input with shape (4,5).",
    ),
    (
        "concatenate",
        lambda a, b: mx.concatenate([a, b], axis=1),
        "[concatenate] All the input array dimensions must match exactly except for the concatenation axis. "
        "However, the provided shapes are (2,3), (4,5), and the concatenation axis is 1.",
    ),
    ("broadcast_to", lambda a, b: mx.broadcast_to(a, (4, 5)), "[broadcast_shapes] Shapes (2,3) and (4,5) cannot be broadcast."),
    ("vjp", lambda a, b: mx.vjp(lambda x: x * 2, [a], [b]), "[vjp] Output shape (2,3) does not match cotangent shape (4,5)."),
]


@pytest.mark.parametrize("name, op, message", SHAPE_ERRORS, ids=[e[0] for e in SHAPE_ERRORS])
def test_shape_mismatch_raises_at_record_time(name, op, message):
    a, b = _lazy_operands()
    gc.collect()
    mx.synchronize()
    before = mx.get_active_memory()
    with pytest.raises(ValueError) as info:
        op(a, b)
    assert str(info.value) == message
    assert "(2,3)" in str(info.value) and "(4,5)" in str(info.value)
    # nothing was evaluated to find out
    assert mx.get_active_memory() == before
    # the inputs are intact and still usable
    assert np.array(a).tolist() == (np.arange(6).reshape(2, 3) * 2.0).tolist()
    assert np.array(b).tolist() == (np.arange(20).reshape(4, 5) + 1.0).tolist()
    assert (a @ mx.ones((3, 5)) + b[:2]).shape == (2, 5)


def test_other_shape_errors():
    with pytest.raises(ValueError, match=r"^\[reshape\] Cannot reshape array of size 6 into shape \(4\)\.$"):
        mx.reshape(mx.ones((2, 3)), (4,))
    with pytest.raises(ValueError, match=r"^\[vmap\] Inconsistent axis sizes: 2 and 4\.$"):
        mx.vmap(lambda x, y: x + y)(mx.ones((2, 3)), mx.ones((4, 5)))
    with pytest.raises(ValueError, match=r"Output shape \(2,3\) does not match cotangent shape \(\)"):
        mx.grad(lambda x: x)(mx.ones((2, 3)))
    with pytest.raises(ValueError):
        mx.jvp(lambda x: x * 2, [mx.ones((2, 3))], [mx.ones((4, 5))])
    with pytest.raises(ValueError):
        mx.split(mx.ones((2, 3)), 4, axis=1)
    with pytest.raises(ValueError):
        mx.squeeze(mx.ones((2, 3)), 0)


AXIS_ERRORS = [
    ("sum", lambda a: mx.sum(a, axis=2), IndexError, "Invalid axis 2 for array with 2 dimensions."),
    ("sum-tuple", lambda a: mx.sum(a, axis=(0, 1, 2)), IndexError, "Invalid axis 2 for array with 2 dimensions."),
    ("sum-negative", lambda a: mx.sum(a, axis=-3), IndexError, "Invalid axis -3 for array with 2 dimensions."),
    ("max", lambda a: mx.max(a, axis=2), IndexError, "Invalid axis 2 for array with 2 dimensions."),
    ("all", lambda a: mx.all(a, axis=2), IndexError, "Invalid axis 2 for array with 2 dimensions."),
    ("argmax", lambda a: mx.argmax(a, axis=-3), IndexError, "Invalid axis -3 for array with 2 dimensions."),
    ("mean", lambda a: mx.mean(a, axis=2), IndexError, "[mean] axis 2 is out of bounds for array with 2 dimensions."),
    ("transpose", lambda a: mx.transpose(a, (0, 2)), IndexError, "[transpose] Invalid axis (2) for array with 2 dimensions."),
    ("expand_dims", lambda a: mx.expand_dims(a, -4), IndexError, "[expand_dims] Axis -4 is out of bounds for array with 3 dimensions."),
    ("squeeze", lambda a: mx.squeeze(a, 2), IndexError, "[squeeze] Axis 2 is out of bounds for array with 2 dimensions."),
    ("split", lambda a: mx.split(a, [1], axis=-3), IndexError, "[split] Axis -3 is out of bounds for array with 2 dimensions."),
    ("concatenate", lambda a: mx.concatenate([a, a], axis=3), IndexError, "[concatenate] Axis 3 is out of bounds for array with 2 dimensions."),
    ("vmap", lambda a: mx.vmap(lambda x: x, in_axes=3)(a), IndexError, "[vmap] Invalid vectorization axis 3 for array with shape (2,3)"),
    ("sum-duplicate", lambda a: mx.sum(a, axis=(0, 0)), ValueError, None),
    ("transpose-duplicate", lambda a: mx.transpose(a, (0, 0)), ValueError, None),
    ("expand_dims-duplicate", lambda a: mx.expand_dims(a, (0, 0)), ValueError, None),
]


@pytest.mark.parametrize("name, op, exc, message", AXIS_ERRORS, ids=[e[0] for e in AXIS_ERRORS])
def test_invalid_axes(name, op, exc, message):
    a, _ = _lazy_operands()
    with pytest.raises(exc) as info:
        op(a)
    if message is not None:
        # MLX's text, verbatim; Loom may prefix it with the op's name.
        assert str(info.value).endswith(message)
        if IS_LOOM:
            assert str(info.value).startswith("[")
    assert mx.sum(a, axis=1).tolist() == [6.0, 24.0]


def test_invalid_dtypes():
    with pytest.raises(TypeError):
        mx.zeros((2,), dtype="float32")
    with pytest.raises(TypeError):
        mx.zeros((2,), dtype=np.float32)
    with pytest.raises(TypeError):
        mx.array([1, 2]).astype("foo")
    with pytest.raises(TypeError):
        mx.array([1, 2]).astype(None)
    with pytest.raises(ValueError, match=r"\[matmul\] Only inexact types are supported"):
        mx.matmul(mx.ones((2, 2), dtype=mx.int32), mx.ones((2, 2), dtype=mx.int32))
    with pytest.raises(ValueError, match=r"\[negative\]"):
        mx.negative(mx.array([True]))
    with pytest.raises(ValueError):
        mx.random.uniform(shape=(2,), dtype=mx.int32)


def test_item_and_scalar_conversions_of_non_scalars():
    a = mx.array([1, 2])
    for convert in (lambda v: v.item(), float, int, bool):
        with pytest.raises(ValueError, match=r"^\[convert\] Only length-1 arrays can be converted to Python scalars\.$"):
            convert(a)
    assert a.tolist() == [1, 2]


def test_transform_argument_errors():
    with pytest.raises(ValueError, match=r"argument index 2"):
        mx.grad(lambda x: x.sum(), argnums=2)(mx.ones((2,)))
    with pytest.raises(ValueError):
        mx.grad(lambda x: x.sum())(3.0)
    with pytest.raises(ValueError, match="scalar"):
        mx.grad(lambda x: (x.sum(), x))(mx.ones((2,)))
    with pytest.raises(ValueError):
        mx.vjp(mx.sin, [mx.array(1.0)], [])


def test_errors_leave_the_library_usable():
    a, b = _lazy_operands()
    for bad in (lambda: a + b, lambda: a @ b, lambda: mx.sum(a, axis=5), lambda: a.item(), lambda: mx.reshape(b, (7,))):
        with pytest.raises((ValueError, IndexError)):
            bad()
    # the same graph, now well-formed, evaluates to the right values
    c = a @ mx.transpose(b[:, :3]) + 1
    an = np.arange(6, dtype=np.float64).reshape(2, 3) * 2
    bn = np.arange(20, dtype=np.float64).reshape(4, 5) + 1
    np.testing.assert_allclose(np.array(c), an @ bn[:, :3].T + 1)
    g = mx.grad(lambda x: mx.sum(x * x))(a)
    np.testing.assert_allclose(np.array(g), 2 * an)


def test_error_inside_a_custom_vjp_leaves_the_library_usable():
    @mx.custom_function
    def f(x):
        return x * 3

    @f.vjp
    def f_vjp(primals, cotangent, output):
        raise ValueError("Abort!")

    x = mx.array([1.0, 2.0])
    with pytest.raises(ValueError, match="Abort!"):
        mx.grad(lambda v: mx.sum(f(v)))(x)
    assert f(x).tolist() == [3.0, 6.0]
    assert mx.grad(lambda v: mx.sum(v * 3))(x).tolist() == [3.0, 3.0]


def test_error_inside_a_transformed_function_leaves_the_library_usable():
    def bad(x):
        x * 2  # some graph is recorded before the failure
        raise RuntimeError("user error")

    x = mx.array([1.0, 2.0])
    for transform in (mx.grad, mx.vmap, mx.checkpoint):
        with pytest.raises(RuntimeError, match="user error"):
            transform(bad)(x)
    with pytest.raises(RuntimeError, match="user error"):
        mx.vjp(bad, [x], [x])
    with pytest.raises(RuntimeError, match="user error"):
        mx.jvp(bad, [x], [x])
    assert mx.grad(lambda v: mx.sum(v * v))(x).tolist() == [2.0, 4.0]
    assert mx.vmap(lambda v: v + 1)(x).tolist() == [2.0, 3.0]
