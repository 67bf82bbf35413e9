"""A small convolutional network that learns to read handwritten-like digits.

The images are made here, so the example needs nothing beyond NumPy: each of
the ten digits is drawn as a stroke skeleton on a 7×5 grid, then every sample
is rendered at 16×16 through its own random affine map (rotation ±15°, scale
0.8-1.2, shear, shift ±2 px), stroke weight and ink level, with pixel noise.
With ``--data sklearn`` (when scikit-learn is installed) it trains on
scikit-learn's bundled 8×8 ``digits`` instead, upsampled to 16×16.

The model: Conv2d(1→16, 3×3) → ReLU → MaxPool2d(2) → Conv2d(16→32, 3×3) →
ReLU → MaxPool2d(2) → Linear(512→64) → ReLU → Linear(64→10), trained with
Adam on cross-entropy. The defaults (4 epochs of 8000 images, batch 64)
reached 99.80% test accuracy on Loom (99.85% on MLX), about 10 s an epoch on
two busy cores; the target is at least 97%.

    python examples/digits_cnn.py [--epochs 4] [--train 8000] [--test 2000] [--backend mlx]
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time

import numpy as np


def _backend(name: str):
    """The array, nn and optimizers modules of `loom` (default) or `mlx`."""
    return (importlib.import_module(f"{name}.core"), importlib.import_module(f"{name}.nn"),
            importlib.import_module(f"{name}.optimizers"))


# `--backend mlx` runs the same program on MLX, for comparison.
_name = sys.argv[sys.argv.index("--backend") + 1] if "--backend" in sys.argv else "loom"
mx, nn, optim = _backend(_name)

# Stroke skeletons, 7 rows × 5 columns ('#' is ink).
GLYPHS = {
    0: [".###.", "#...#", "#..##", "#.#.#", "##..#", "#...#", ".###."],
    1: ["..#..", ".##..", "#.#..", "..#..", "..#..", "..#..", "#####"],
    2: [".###.", "#...#", "....#", "...#.", "..#..", ".#...", "#####"],
    3: ["####.", "....#", "....#", ".###.", "....#", "....#", "####."],
    4: ["...#.", "..##.", ".#.#.", "#..#.", "#####", "...#.", "...#."],
    5: ["#####", "#....", "####.", "....#", "....#", "#...#", ".###."],
    6: ["..##.", ".#...", "#....", "####.", "#...#", "#...#", ".###."],
    7: ["#####", "....#", "...#.", "..#..", ".#...", ".#...", ".#..."],
    8: [".###.", "#...#", "#...#", ".###.", "#...#", "#...#", ".###."],
    9: [".###.", "#...#", "#...#", ".####", "....#", "...#.", ".##.."],
}
SIZE = 16


def render_digits(count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``count`` images (count, 16, 16, 1) in [0, 1] and their labels."""
    rng = np.random.default_rng(seed)
    glyphs = np.stack([np.array([[c == "#" for c in row] for row in GLYPHS[d]], np.float32)
                       for d in range(10)])
    glyphs = np.pad(glyphs, ((0, 0), (1, 1), (1, 1)))  # a blank border: samples outside read 0
    labels = rng.integers(0, 10, size=count)
    # Inverse affine map from output pixels to glyph coordinates.
    angle = rng.uniform(-0.26, 0.26, count)
    scale = rng.uniform(0.8, 1.2, count)
    shear = rng.uniform(-0.25, 0.25, count)
    shift = rng.uniform(-2.0, 2.0, (count, 2))
    v, u = np.meshgrid(np.arange(SIZE) + 0.5 - SIZE / 2, np.arange(SIZE) + 0.5 - SIZE / 2)
    u = u[None] - shift[:, 0, None, None]  # rows
    v = v[None] - shift[:, 1, None, None]  # columns
    cos, sin = np.cos(angle)[:, None, None], np.sin(angle)[:, None, None]
    r = (cos * u - sin * v) / scale[:, None, None]
    c = (sin * u + cos * v) / scale[:, None, None] + shear[:, None, None] * r
    # A glyph cell is ~1.7 output pixels: the 7×5 grid spans about 12×8.5.
    gr = r / 1.7 + 4.0  # padded glyph rows 0..8, centre 4
    gc = c / 1.7 + 3.0  # padded glyph columns 0..6, centre 3
    r0 = np.clip(np.floor(gr).astype(int), 0, 7)
    c0 = np.clip(np.floor(gc).astype(int), 0, 5)
    fr = np.clip(gr - r0, 0, 1)
    fc = np.clip(gc - c0, 0, 1)
    inside = (gr >= 0) & (gr <= 8) & (gc >= 0) & (gc <= 6)
    n = np.arange(count)[:, None, None]
    at = lambda rr, cc: glyphs[labels[n], rr, cc]
    ink = ((1 - fr) * (1 - fc) * at(r0, c0) + (1 - fr) * fc * at(r0, c0 + 1)
           + fr * (1 - fc) * at(r0 + 1, c0) + fr * fc * at(r0 + 1, c0 + 1)) * inside
    # Stroke weight: a per-sample threshold on the smooth ink, then the ink level.
    weight = rng.uniform(0.15, 0.55, count)[:, None, None]
    images = np.clip((ink - weight) / 0.3 + 0.5, 0, 1)
    images *= rng.uniform(0.6, 1.0, count)[:, None, None]
    images += rng.normal(0, 0.08, images.shape)
    return np.clip(images, 0, 1).astype(np.float32)[..., None], labels.astype(np.int32)


def sklearn_digits(seed: int) -> tuple[tuple, tuple]:
    from sklearn.datasets import load_digits  # only with --data sklearn

    data = load_digits()
    x = (data.images / 16.0).astype(np.float32)
    x = np.repeat(np.repeat(x, 2, axis=1), 2, axis=2)[..., None]  # 8×8 -> 16×16
    y = data.target.astype(np.int32)
    order = np.random.default_rng(seed).permutation(len(y))
    x, y = x[order], y[order]
    split = int(0.8 * len(y))
    return (x[:split], y[:split]), (x[split:], y[split:])


class DigitsCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc1 = nn.Linear(32 * 4 * 4, 64)
        self.fc2 = nn.Linear(64, 10)

    def __call__(self, x: mx.array) -> mx.array:
        x = self.pool(nn.relu(self.conv1(x)))
        x = self.pool(nn.relu(self.conv2(x)))
        x = nn.relu(self.fc1(x.reshape(x.shape[0], -1)))
        return self.fc2(x)


def loss_fn(model: DigitsCNN, x: mx.array, y: mx.array) -> mx.array:
    return nn.losses.cross_entropy(model(x), y, reduction="mean")


def accuracy(model: DigitsCNN, x: np.ndarray, y: np.ndarray, batch: int = 500) -> float:
    correct = 0
    for i in range(0, len(y), batch):
        pred = mx.argmax(model(mx.array(x[i:i + batch])), axis=1)
        correct += int(mx.sum(pred == mx.array(y[i:i + batch])).item())
    return correct / len(y)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", choices=("loom", "mlx"), default="loom")
    p.add_argument("--data", choices=("rendered", "sklearn"), default="rendered")
    p.add_argument("--train", type=int, default=8000, help="rendered training images")
    p.add_argument("--test", type=int, default=2000, help="rendered test images")
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    if args.data == "sklearn":
        (xtr, ytr), (xte, yte) = sklearn_digits(args.seed)
    else:
        xtr, ytr = render_digits(args.train, args.seed)
        xte, yte = render_digits(args.test, args.seed + 1)
    print(f"data: {args.data}, {len(ytr)} training and {len(yte)} test images of 16x16")

    mx.random.seed(args.seed)
    model = DigitsCNN()
    mx.eval(model.parameters())
    optimizer = optim.Adam(learning_rate=args.lr)
    step = nn.value_and_grad(model, loss_fn)
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()
    for epoch in range(args.epochs):
        order = rng.permutation(len(ytr))
        total, batches = 0.0, 0
        for i in range(0, len(order) - args.batch + 1, args.batch):
            idx = order[i:i + args.batch]
            loss, grads = step(model, mx.array(xtr[idx]), mx.array(ytr[idx]))
            optimizer.update(model, grads)
            mx.eval(loss, model.parameters(), optimizer.state)
            total += loss.item()
            batches += 1
        acc = accuracy(model, xte, yte)
        print(f"epoch {epoch + 1}: train loss {total / max(1, batches):.4f}, "
              f"test accuracy {100 * acc:.2f}% ({time.perf_counter() - start:.1f} s)")
    print(f"final test accuracy: {100 * accuracy(model, xte, yte):.2f}%")


if __name__ == "__main__":
    main()
