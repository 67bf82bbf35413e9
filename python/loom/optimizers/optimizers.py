"""Optimizers: a state tree shaped like the parameters, updated one leaf at a time.

``Optimizer.state`` holds ``step`` and every schedulable hyperparameter
(``learning_rate``, ...) as arrays, plus one dict of moments per parameter.
Saving it (``tree_flatten(opt.state, destination={})``) and assigning it back
to a freshly built optimizer resumes training; hyperparameters that cannot
be scheduled (betas, eps) come from the constructor, as in MLX.
"""

from __future__ import annotations

from typing import Callable, List, Optional, Tuple, Union

import loom.core as mx

from ..nn import Module
from ..utils import tree_flatten, tree_map, tree_merge, tree_reduce, tree_unflatten

Schedulable = Union[float, Callable[[mx.array], mx.array]]


def _adam_update(gradient, parameter, m, v, lr, b1, b2, eps, decay, corrections):
    """One parameter's Adam (or AdamW) step: ``(new parameter, m, v)``.

    The same operations, in the same order, as MLX's ``Adam.apply_single``
    (and AdamW's weight decay before it), so the results are bit for bit
    those of the unfused step.
    """
    if decay is not None:
        parameter = parameter * (1 - lr * decay)
    m = b1 * m + (1 - b1) * gradient
    v = b2 * v + (1 - b2) * mx.square(gradient)
    if corrections is None:
        return parameter - lr * m / (mx.sqrt(v) + eps), m, v
    c1, c2 = corrections
    return parameter - c1 * m / (mx.sqrt(v) * c2 + eps), m, v


def _sgd_update(gradient, parameter, v, lr, weight_decay, momentum, dampening, nesterov):
    """SGD's step as MLX's ``SGD.apply_single`` computes it: ``(new parameter, v)``."""
    if weight_decay != 0:
        gradient = gradient + weight_decay * parameter
    if v is None:
        return parameter - lr * gradient, None
    v = momentum * v
    v = v + ((1 - dampening) * gradient if dampening > 0 else gradient)
    step = gradient + momentum * v if nesterov else v
    return parameter - lr * step, v


def _rmsprop_update(gradient, parameter, v, lr, alpha, eps):
    """RMSprop's step as MLX's ``RMSprop.apply_single`` computes it: ``(new parameter, v)``."""
    v = alpha * v + (1 - alpha) * mx.square(gradient)
    return parameter - lr * gradient / (mx.sqrt(v) + eps), v


def _lion_update(gradient, parameter, m, lr, b1, b2, weight_decay):
    """Lion's step as MLX's ``Lion.apply_single`` computes it: ``(new parameter, m)``."""
    c = b1 * m + (1 - b1) * gradient
    m = b2 * m + (1 - b2) * gradient
    if weight_decay > 0:
        parameter = (1 - lr * weight_decay) * parameter
    return parameter - lr * mx.sign(c), m


# Run unfused, a step is up to a dozen element-wise ops, each a pass over the
# parameter's memory (most of an MLP's Adam step beside its GEMMs); compiled,
# it is one pass reading g, p and the moments and writing p and the moments
# (into the old ones' buffers when nothing else holds them). Shapeless: one
# trace per rank and dtype serves every parameter. Inside a transform (grad of
# a step) compile replays the plain ops; under disable_compile it runs them.
_fused_adam = mx.compile(_adam_update, shapeless=True)
_fused_sgd = mx.compile(_sgd_update, shapeless=True)
_fused_rmsprop = mx.compile(_rmsprop_update, shapeless=True)
_fused_lion = mx.compile(_lion_update, shapeless=True)


class Optimizer:
    """Base class: subclasses define ``init_single`` and ``apply_single``."""

    def __init__(self, schedulers=None):
        self._initialized = False
        self._state = {"step": mx.array(0, mx.uint64)}
        self._schedulers = dict(schedulers or {})

    def update(self, model: Module, gradients: dict):
        """Apply ``gradients`` to ``model``'s parameters and install the results."""
        model.update(self.apply_gradients(gradients, model))

    def init(self, parameters: dict):
        """Create the state of every parameter not yet in the state (existing state is kept)."""

        def add_missing(params, state):
            if isinstance(params, (list, tuple)):
                state = list(state)
                for i in range(len(state)):
                    state[i] = add_missing(params[i], state[i])
                state.extend(tree_map(lambda _: {}, params[len(state):]))
                return type(params)(state)
            if isinstance(params, dict):
                for k, v in params.items():
                    state[k] = add_missing(v, state[k]) if k in state else tree_map(lambda _: {}, v)
                return state
            return state

        add_missing(parameters, self._state)

        def init_leaf(param, state):
            if not state:
                self.init_single(param, state)
            return state

        tree_map(init_leaf, parameters, self._state)
        self._initialized = True

    def init_single(self, parameter: mx.array, state: dict):
        """Fill ``state`` (an empty dict) with the moments of one parameter."""
        raise NotImplementedError(f"{type(self).__name__} does not define init_single")

    def apply_gradients(self, gradients: dict, parameters: dict):
        """The parameters after one step; ``parameters`` may hold more than ``gradients``."""
        if not self._initialized:
            self.init(gradients)
        for name, schedule in self._schedulers.items():
            self.state[name] = schedule(self.step)
        self.state["step"] = self.step + 1
        return tree_map(self.apply_single, gradients, parameters, self.state)

    def apply_single(self, gradient: mx.array, parameter: mx.array, state: dict):
        """One parameter's new value; may update ``state`` in place."""
        raise NotImplementedError(f"{type(self).__name__} does not define apply_single")

    @property
    def state(self):
        """The state tree (step, hyperparameters, per-parameter moments)."""
        return self._state

    @state.setter
    def state(self, state: dict):
        self._initialized = False
        self._state = state

    @property
    def step(self):
        return self.state["step"]

    @property
    def learning_rate(self):
        return self.state["learning_rate"]

    @learning_rate.setter
    def learning_rate(self, learning_rate: Union[float, mx.array]):
        self.state["learning_rate"] = mx.array(learning_rate)

    def _maybe_schedule(self, name: str, param: Schedulable):
        """Store hyperparameter ``name`` in the state; a callable becomes a schedule of the step."""
        if callable(param):
            self._schedulers[name] = param
            value = param(self.step)
        else:
            value = mx.array(param)
        self.state[name] = value


class MultiOptimizer(Optimizer):
    """Several optimizers, each for the parameters its filter ``fn(path, grad)`` accepts.

    The last optimizer takes everything no filter accepted, so there is one
    filter fewer than optimizers.
    """

    def __init__(self, optimizers, filters: list = []):
        super().__init__()
        self._state = {}
        if len(filters) != len(optimizers) - 1:
            raise ValueError(f"Given {len(filters)} filters but {len(optimizers) - 1} needed.")
        self.optimizers = optimizers
        self.filters = list(filters) + [lambda *args, **kwargs: True]

    def _split(self, gradients: dict):
        if len(self.optimizers) == 1:
            return [gradients]
        parts = [[] for _ in self.optimizers]
        for path, g in tree_flatten(gradients):
            for i, accepts in enumerate(self.filters):
                if accepts(path, g):
                    parts[i].append((path, g))
                    break
        return [tree_unflatten(p) if p else {} for p in parts]

    def init(self, parameters: dict):
        for opt, params in zip(self.optimizers, self._split(parameters)):
            opt.init(params)

    def apply_gradients(self, gradients: dict, parameters: dict):
        tree = {}
        for opt, grads in zip(self.optimizers, self._split(gradients)):
            tree = tree_merge(tree, opt.apply_gradients(grads, parameters))
        return tree

    @property
    def state(self):
        return {"states": [opt.state for opt in self.optimizers]}

    @state.setter
    def state(self, state: dict):
        if "states" not in state or len(state["states"]) != len(self.optimizers):
            raise ValueError("Invalid state provided")
        for opt, s in zip(self.optimizers, state["states"]):
            opt.state = s

    @property
    def learning_rate(self):
        return self.optimizers[0].learning_rate

    @learning_rate.setter
    def learning_rate(self, learning_rate: Union[float, mx.array]):
        for opt in self.optimizers:
            opt.learning_rate = learning_rate


class SGD(Optimizer):
    """Stochastic gradient descent with optional momentum, dampening, Nesterov and L2 weight decay.

    ``v = momentum * v + (1 - dampening) * g``; ``p -= lr * v`` (or
    ``lr * (g + momentum * v)`` with Nesterov).
    """

    def __init__(
        self,
        learning_rate: Schedulable,
        momentum: float = 0.0,
        weight_decay: float = 0.0,
        dampening: float = 0.0,
        nesterov: bool = False,
    ):
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening.")
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.momentum = momentum
        self.weight_decay = weight_decay
        self.dampening = dampening
        self.nesterov = nesterov

    def init_single(self, parameter: mx.array, state: dict):
        state["v"] = mx.zeros_like(parameter)

    def apply_single(self, gradient: mx.array, parameter: mx.array, state: dict):
        lr = self.learning_rate.astype(gradient.dtype)
        v = state.get("v") if self.momentum > 0 else None
        parameter, v = _fused_sgd(gradient, parameter, v, lr, self.weight_decay, self.momentum,
                                  self.dampening, self.nesterov)
        if v is not None:
            state["v"] = v
        return parameter


class RMSprop(Optimizer):
    """``v = alpha v + (1 - alpha) g^2``; ``p -= lr g / (sqrt(v) + eps)``."""

    def __init__(self, learning_rate: Schedulable, alpha: float = 0.99, eps: float = 1e-8):
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.alpha = alpha
        self.eps = eps
        if self.alpha < 0.0:
            raise ValueError(f"RMSprop alpha should be >=0, {self.alpha} was provided instead")
        if self.eps <= 0.0:
            raise ValueError(f"RMSprop epsilon should be >0, {self.eps} was provided instead")

    def init_single(self, parameter: mx.array, state: dict):
        state["v"] = mx.zeros_like(parameter)

    def apply_single(self, gradient: mx.array, parameter: mx.array, state: dict):
        lr = self.learning_rate.astype(gradient.dtype)
        parameter, state["v"] = _fused_rmsprop(gradient, parameter, state["v"], lr, self.alpha,
                                               self.eps)
        return parameter


class Adagrad(Optimizer):
    """``v += g^2``; ``p -= lr g / (sqrt(v) + eps)``."""

    def __init__(self, learning_rate: Schedulable, eps: float = 1e-8):
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.eps = eps
        if self.eps <= 0.0:
            raise ValueError(f"Adagrad epsilon should be >0, {self.eps} was provided instead")

    def init_single(self, parameter: mx.array, state: dict):
        state["v"] = mx.zeros_like(parameter)

    def apply_single(self, gradient: mx.array, parameter: mx.array, state: dict):
        lr = self.learning_rate.astype(gradient.dtype)
        v = state["v"] + mx.square(gradient)
        state["v"] = v
        return parameter - lr * gradient / (mx.sqrt(v) + self.eps)


class AdaDelta(Optimizer):
    """AdaDelta (Zeiler 2012): step sizes from running averages of ``g^2`` and of past steps."""

    def __init__(self, learning_rate: Schedulable, rho: float = 0.9, eps: float = 1e-6):
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.rho = rho
        self.eps = eps
        if self.rho < 0.0:
            raise ValueError(f"AdaDelta rho should be >=0, {self.rho} was provided instead")
        if self.eps <= 0.0:
            raise ValueError(f"AdaDelta epsilon should be >0, {self.eps} was provided instead")

    def init_single(self, parameter: mx.array, state: dict):
        state["v"] = mx.zeros_like(parameter)
        state["u"] = mx.zeros_like(parameter)

    def apply_single(self, gradient: mx.array, parameter: mx.array, state: dict):
        lr = self.learning_rate.astype(gradient.dtype)
        rho, eps = self.rho, self.eps
        v = rho * state["v"] + (1 - rho) * mx.square(gradient)
        d = mx.sqrt(state["u"] + eps) / mx.sqrt(v + eps) * gradient
        state["u"] = rho * state["u"] + (1 - rho) * mx.square(d)
        state["v"] = v
        return parameter - lr * d


class Adam(Optimizer):
    """Adam (Kingma & Ba). As MLX, no bias correction unless ``bias_correction=True``."""

    def __init__(
        self,
        learning_rate: Schedulable,
        betas: List[float] = [0.9, 0.999],
        eps: float = 1e-8,
        bias_correction: bool = False,
    ):
        super().__init__()
        for i, beta in enumerate(betas):
            if not 0.0 <= beta < 1.0:
                raise ValueError(
                    f"Adam beta{i + 1} should be in [0, 1), {beta} was provided instead"
                )
        if not 0.0 <= eps:
            raise ValueError(f"Adam epsilon should be >=0, {eps} was provided instead")
        self._maybe_schedule("learning_rate", learning_rate)
        self.betas = betas
        self.eps = eps
        self.bias_correction = bias_correction

    def init_single(self, parameter: mx.array, state: dict):
        state["m"] = mx.zeros_like(parameter)
        state["v"] = mx.zeros_like(parameter)

    # AdamW's decoupled weight decay (None: plain Adam).
    _decay: Optional[float] = None

    def apply_single(self, gradient: mx.array, parameter: mx.array, state: dict):
        lr = self.learning_rate.astype(gradient.dtype)
        b1, b2 = self.betas
        corrections = None
        if self.bias_correction:
            step = self.step
            c1 = (lr / (1 - b1**step)).astype(gradient.dtype)
            c2 = mx.rsqrt(1 - b2**step).astype(gradient.dtype)
            corrections = (c1, c2)
        parameter, state["m"], state["v"] = _fused_adam(
            gradient, parameter, state["m"], state["v"], lr, b1, b2, self.eps, self._decay,
            corrections)
        return parameter


class AdamW(Adam):
    """Adam with decoupled weight decay: ``p *= 1 - lr * weight_decay`` before the Adam step.

    ``bias_correction`` defaults to False, as in MLX (PyTorch corrects).
    """

    def __init__(
        self,
        learning_rate: Schedulable,
        betas: List[float] = [0.9, 0.999],
        eps: float = 1e-8,
        weight_decay: float = 0.01,
        bias_correction: bool = False,
    ):
        super().__init__(
            learning_rate=learning_rate, betas=betas, eps=eps, bias_correction=bias_correction
        )
        self.weight_decay = weight_decay

    @property
    def _decay(self) -> float:
        return self.weight_decay


class Adamax(Adam):
    """Adam with an infinity-norm second moment: ``v = max(b2 v, |g|)``."""

    def __init__(
        self, learning_rate: Schedulable, betas: List[float] = [0.9, 0.999], eps: float = 1e-8
    ):
        super().__init__(learning_rate, betas, eps)

    def apply_single(self, gradient: mx.array, parameter: mx.array, state: dict):
        lr = self.learning_rate.astype(gradient.dtype)
        b1, b2 = self.betas
        m = b1 * state["m"] + (1 - b1) * gradient
        v = mx.maximum(b2 * state["v"], mx.abs(gradient))
        state["m"] = m
        state["v"] = v
        return parameter - lr * m / (v + self.eps)


class Lion(Optimizer):
    """Lion (Chen et al. 2023): the sign of an interpolated momentum, with decoupled weight decay."""

    def __init__(
        self, learning_rate: Schedulable, betas: List[float] = [0.9, 0.99], weight_decay: float = 0.0
    ):
        super().__init__()
        for i, beta in enumerate(betas):
            if not 0.0 <= beta < 1.0:
                raise ValueError(
                    f"Lion beta{i + 1} should be in [0, 1), {beta} was provided instead"
                )
        self._maybe_schedule("learning_rate", learning_rate)
        self.betas = betas
        self.weight_decay = weight_decay

    def init_single(self, parameter: mx.array, state: dict):
        state["m"] = mx.zeros_like(parameter)

    def apply_single(self, gradient: mx.array, parameter: mx.array, state: dict):
        lr = self.learning_rate.astype(gradient.dtype)
        parameter, state["m"] = _fused_lion(gradient, parameter, state["m"], lr, *self.betas,
                                            self.weight_decay)
        return parameter


class Adafactor(Optimizer):
    """Adafactor (Shazeer & Stern 2018): factored second moments for matrices.

    Without a ``learning_rate`` the step size is relative
    (``min(1e-2, 1/sqrt(step))``, scaled by the parameter's RMS).
    """

    def __init__(
        self,
        learning_rate: Optional[Schedulable] = None,
        eps: Tuple[float, float] = (1e-30, 1e-3),
        clip_threshold: float = 1.0,
        decay_rate: float = -0.8,
        beta_1: Optional[float] = None,
        weight_decay: float = 0.0,
        scale_parameter: bool = True,
        relative_step: bool = True,
        warmup_init: bool = False,
    ):
        super().__init__()
        if learning_rate is not None:
            self._maybe_schedule("learning_rate", learning_rate)
        self.eps = eps
        self.clip_threshold = clip_threshold
        self.decay_rate = decay_rate
        self.beta_1 = beta_1
        self.weight_decay = weight_decay
        self.scale_parameter = scale_parameter
        self.relative_step = relative_step
        self.warmup_init = warmup_init

    def init_single(self, parameter: mx.array, state: dict):
        if parameter.ndim >= 2:
            shape, dtype = parameter.shape, parameter.dtype
            state["exp_avg_sq_row"] = mx.zeros(shape[:-1], dtype=dtype)
            state["exp_avg_sq_col"] = mx.zeros(shape[:-2] + shape[-1:], dtype=dtype)
        else:
            state["exp_avg_sq"] = mx.zeros_like(parameter)
        if self.beta_1 is not None:
            state["exp_avg"] = mx.zeros_like(parameter)

    @staticmethod
    def _rms(x):
        return mx.sqrt(mx.mean(mx.square(x)))

    def _step_size(self, step, parameter_rms):
        if self.relative_step:
            min_step = 1e-6 * step if self.warmup_init else 1e-2
            size = mx.minimum(min_step, mx.rsqrt(step))
        else:
            size = self.learning_rate
        size = size.astype(parameter_rms.dtype)
        scale = mx.maximum(self.eps[1], parameter_rms) if self.scale_parameter else 1.0
        return scale * size

    def apply_single(self, gradient: mx.array, parameter: mx.array, state: dict):
        step = self.step
        parameter_rms = self._rms(parameter)
        lr = self._step_size(step, parameter_rms)
        beta_2 = 1.0 - (step**self.decay_rate).astype(parameter_rms.dtype)
        update = mx.square(gradient) + self.eps[0]
        if gradient.ndim >= 2:
            row = beta_2 * state["exp_avg_sq_row"] + (1 - beta_2) * mx.mean(update, axis=-1)
            col = beta_2 * state["exp_avg_sq_col"] + (1 - beta_2) * mx.mean(update, axis=-2)
            state["exp_avg_sq_row"] = row
            state["exp_avg_sq_col"] = col
            # The rank-one estimate of the second moment: row * col / mean(row).
            r = mx.rsqrt(row / mx.mean(row, axis=-1, keepdims=True))
            c = mx.rsqrt(col)
            update = mx.expand_dims(r, -1) * mx.expand_dims(c, -2) * gradient
        else:
            sq = beta_2 * state["exp_avg_sq"] + (1 - beta_2) * update
            state["exp_avg_sq"] = sq
            update = mx.rsqrt(sq) * gradient
        update = update / mx.maximum(1.0, self._rms(update) / self.clip_threshold)
        update = lr * update
        if self.beta_1 is not None:
            avg = self.beta_1 * state["exp_avg"] + (1 - self.beta_1) * update
            state["exp_avg"] = avg
            update = avg
        if self.weight_decay != 0:
            parameter = parameter + parameter * (-self.weight_decay * lr)
        return parameter - update


class Muon(Optimizer):
    """Muon: momentum whose matrix updates are orthogonalised by Newton-Schulz iterations.

    Parameters of rank 1 get the plain momentum step; higher ranks are
    flattened to ``(shape[0], -1)`` for the orthogonalisation.
    """

    def __init__(
        self,
        learning_rate: Schedulable,
        momentum: float = 0.95,
        weight_decay: float = 0.01,
        nesterov: bool = True,
        ns_steps: int = 5,
    ):
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.momentum = momentum
        self.weight_decay = weight_decay
        self.nesterov = nesterov
        self.ns_steps = ns_steps

    def init_single(self, parameter: mx.array, state: dict):
        state["v"] = mx.zeros_like(parameter)

    @staticmethod
    def _orthogonalize(X, steps: int):
        if X.ndim != 2:
            raise ValueError(
                f"Expected a 2D array for Newton-Schulz iteration, got shape {X.shape} instead."
            )
        # Quintic iteration coefficients tuned for fast convergence of the singular values.
        a, b, c = (3.4445, -4.7750, 2.0315)
        tall = X.shape[-2] > X.shape[-1]
        if tall:
            X = X.T
        X = X / (mx.sqrt(mx.sum(mx.square(X))) + 1e-7)
        for _ in range(steps):
            A = X @ X.T
            B = mx.addmm(b * A, A, A, beta=1.0, alpha=c)
            X = mx.addmm(a * X, B, X, beta=1.0, alpha=1.0)
        return X.T if tall else X

    def apply_single(self, gradient: mx.array, parameter: mx.array, state: dict):
        if self.weight_decay != 0:
            gradient = gradient + self.weight_decay * parameter
        v = self.momentum * state["v"] + (1 - self.momentum) * gradient
        state["v"] = v
        update = gradient * (1 - self.momentum) + v * self.momentum if self.nesterov else v
        lr = self.learning_rate.astype(gradient.dtype)
        if update.ndim >= 2:
            shape = update.shape
            if update.ndim > 2:
                update = update.reshape(shape[0], -1)
            update = self._orthogonalize(update, steps=self.ns_steps)
            if len(shape) > 2:
                update = update.reshape(shape)
            lr = lr * max(1, update.shape[-2] / update.shape[-1]) ** 0.5
        return parameter - lr * update


def clip_grad_norm(grads, max_norm: float):
    """Rescale ``grads`` so their global L2 norm is at most ``max_norm``.

    Returns ``(clipped_grads, total_norm)``, the norm before clipping.
    """
    if max_norm < 0:
        raise ValueError(f"max_norm should be >=0, {max_norm} was provided instead")

    def squared_norm(g):
        if g.dtype == mx.float16:
            g = g.astype(mx.float32)
        return g.square().sum()

    total_norm = mx.sqrt(tree_reduce(lambda acc, g: acc + squared_norm(g), grads, 0.0))
    normalizer = mx.minimum(max_norm / (total_norm + 1e-6), 1.0)

    def scale(g):
        if mx.issubdtype(g.dtype, mx.floating):
            return (g * normalizer).astype(g.dtype)
        return g * normalizer

    return tree_map(scale, grads), total_norm
