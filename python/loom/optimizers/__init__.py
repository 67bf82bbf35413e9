"""Optimizers and learning-rate schedules (MLX's ``mlx.optimizers``)."""

from .optimizers import (
    SGD,
    AdaDelta,
    Adafactor,
    Adagrad,
    Adam,
    Adamax,
    AdamW,
    Lion,
    MultiOptimizer,
    Muon,
    Optimizer,
    RMSprop,
    clip_grad_norm,
)
from .schedulers import (
    cosine_decay,
    exponential_decay,
    join_schedules,
    linear_schedule,
    step_decay,
)
