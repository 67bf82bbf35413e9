"""Logistic regression trained with value_and_grad on data generated here.

A small example (the main job is examples/transformer_lm.py): it exercises
lazy evaluation, the transforms, random numbers and the memory API end to
end, and prints the loss as it learns. Runs on the CPU in a few seconds.
"""

from __future__ import annotations

import argparse
import time

import loom.core as mx


def make_data(num_examples: int, num_features: int, key: mx.array) -> tuple[mx.array, mx.array, mx.array]:
    """Linearly separable-ish data from a hidden weight vector, with label noise."""
    k_true, k_x, k_noise = mx.random.split(key, 3)
    w_true = mx.random.normal((num_features,), key=k_true)
    x = mx.random.normal((num_examples, num_features), key=k_x)
    logits = x @ w_true + 0.5 * mx.random.normal((num_examples,), key=k_noise)
    y = (logits > 0).astype(mx.float32)
    return x, y, w_true


def loss_fn(params: dict[str, mx.array], x: mx.array, y: mx.array) -> mx.array:
    """Mean binary cross-entropy of sigmoid(x @ w + b), written stably."""
    logits = x @ params["w"] + params["b"]
    # log(1 + exp(-|z|)) + max(z, 0) - z * y
    return mx.mean(mx.log(1 + mx.exp(-mx.abs(logits))) + mx.maximum(logits, 0) - logits * y)


def accuracy(params: dict[str, mx.array], x: mx.array, y: mx.array) -> float:
    predictions = (x @ params["w"] + params["b"]) > 0
    return mx.mean(predictions == (y > 0.5)).item()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--examples", type=int, default=4096)
    parser.add_argument("--features", type=int, default=32)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--lr", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    x, y, _ = make_data(args.examples, args.features, mx.random.key(args.seed))
    params = {"w": mx.zeros((args.features,)), "b": mx.array(0.0)}
    mx.eval(x, y, params)

    loss_and_grad = mx.value_and_grad(loss_fn)
    start = time.perf_counter()
    for step in range(args.steps):
        loss, grads = loss_and_grad(params, x, y)
        params = {k: params[k] - args.lr * grads[k] for k in params}
        # One evaluation per step: the loss and the new parameters together.
        mx.eval(loss, params)
        if step % 20 == 0 or step == args.steps - 1:
            print(f"step {step:4d}  loss {loss.item():.4f}  accuracy {accuracy(params, x, y):.3f}")
    elapsed = time.perf_counter() - start
    print(f"{args.steps} steps in {elapsed:.2f} s; active memory {mx.get_active_memory() / 2**20:.1f} MiB, "
          f"peak {mx.get_peak_memory() / 2**20:.1f} MiB")
    final = loss_fn(params, x, y).item()
    if final > 0.4:
        raise SystemExit(f"training did not converge: final loss {final:.4f}")


if __name__ == "__main__":
    main()
