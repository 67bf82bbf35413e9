"""A byte-level decoder-only transformer language model, trained on the
Python standard library's own source files (found through ``sysconfig``, so
every machine has the data).

The training loop is the one an MLX user writes: ``nn.value_and_grad`` over
the model, AdamW with a linear warm-up joined to a cosine decay, gradient
clipping, one ``mx.eval`` per step, periodic validation loss in bits per
byte, and checkpoints (model and optimizer state) when the core can save
them. Then it samples a few lines of text.

    python examples/transformer_lm.py --steps 300
    python examples/transformer_lm.py --backend mlx   # the same script on MLX
"""

from __future__ import annotations

import argparse
import glob
import importlib
import math
import os
import sysconfig
import time

import numpy as np

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--backend", choices=["loom", "mlx"], default="loom")
parser.add_argument("--steps", type=int, default=600)
parser.add_argument("--batch", type=int, default=32)
parser.add_argument("--context", type=int, default=128)
parser.add_argument("--dims", type=int, default=192)
parser.add_argument("--heads", type=int, default=4)
parser.add_argument("--layers", type=int, default=3)
parser.add_argument("--lr", type=float, default=2e-3)
parser.add_argument("--warmup", type=int, default=50)
parser.add_argument("--clip", type=float, default=1.0)
parser.add_argument("--eval-every", type=int, default=100)
parser.add_argument("--eval-batches", type=int, default=8)
parser.add_argument("--data-mb", type=float, default=4.0, help="megabytes of source text to read")
parser.add_argument("--checkpoint", default="", help="path prefix for .safetensors checkpoints")
parser.add_argument("--resume", action="store_true", help="load the checkpoint before training")
parser.add_argument("--time-limit", type=float, default=0, help="stop training after this many seconds (0: none)")
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--sample", type=int, default=200, help="bytes of text to generate at the end")
args = parser.parse_args()

mx = importlib.import_module(f"{args.backend}.core")
nn = importlib.import_module(f"{args.backend}.nn")
optim = importlib.import_module(f"{args.backend}.optimizers")
utils = importlib.import_module(f"{args.backend}.utils")


def load_corpus(megabytes: float) -> np.ndarray:
    """The bytes of the standard library's .py files, in a fixed order, up to ``megabytes``."""
    root = sysconfig.get_paths()["stdlib"]
    files = sorted(glob.glob(os.path.join(root, "*.py")))
    limit = int(megabytes * 1e6)
    chunks, total = [], 0
    for path in files:
        with open(path, "rb") as f:
            data = f.read()
        chunks.append(data)
        total += len(data)
        if total >= limit:
            break
    return np.frombuffer(b"".join(chunks)[:limit], dtype=np.uint8)


class TransformerLM(nn.Module):
    """Token embedding, learned positions, pre-norm causal blocks, tied output projection."""

    def __init__(self, vocab: int, dims: int, heads: int, layers: int, context: int):
        super().__init__()
        self.embedding = nn.Embedding(vocab, dims)
        self.positions = nn.Embedding(context, dims)
        self.blocks = [
            nn.TransformerEncoderLayer(dims, heads, mlp_dims=4 * dims, activation=nn.gelu)
            for _ in range(layers)
        ]
        self.norm = nn.LayerNorm(dims)

    def __call__(self, tokens):
        L = tokens.shape[1]
        mask = nn.MultiHeadAttention.create_additive_causal_mask(L)
        x = self.embedding(tokens) + self.positions(mx.arange(L))
        for block in self.blocks:
            x = block(x, mask)
        return self.embedding.as_linear(self.norm(x))


def batches(data: np.ndarray, batch: int, context: int, rng: np.random.Generator):
    """Random windows of ``context + 1`` bytes: inputs and next-byte targets."""
    while True:
        starts = rng.integers(0, len(data) - context - 1, size=batch)
        window = np.stack([data[s : s + context + 1] for s in starts]).astype(np.int32)
        yield mx.array(window[:, :-1]), mx.array(window[:, 1:])


def loss_fn(model, x, y):
    logits = model(x)
    return nn.losses.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="mean")


def bits_per_byte(model, data, batch, context, count, seed) -> float:
    rng = np.random.default_rng(seed)
    stream = batches(data, batch, context, rng)
    model.eval()
    total = 0.0
    for _ in range(count):
        x, y = next(stream)
        total += loss_fn(model, x, y).item()
    model.train()
    return total / count / math.log(2)


def sample(model, prompt: bytes, length: int, context: int, temperature: float = 0.8) -> bytes:
    model.eval()
    tokens = list(prompt)
    for _ in range(length):
        window = mx.array(np.array(tokens[-context:], dtype=np.int32)[None])
        logits = model(window)[0, -1] / temperature
        tokens.append(int(mx.random.categorical(logits).item()))
    model.train()
    return bytes(tokens[len(prompt):])


def save_checkpoint(prefix: str, model, optimizer) -> None:
    model.save_weights(prefix + ".model.safetensors")
    mx.save_safetensors(prefix + ".optimizer.safetensors", utils.tree_flatten(optimizer.state, destination={}))


def main() -> None:
    mx.random.seed(args.seed)
    data = load_corpus(args.data_mb)
    split = int(0.95 * len(data))
    train, valid = data[:split], data[split:]
    print(
        f"corpus: {len(data) / 1e6:.2f} MB of standard-library source "
        f"({len(train)} train, {len(valid)} valid bytes)"
    )

    model = TransformerLM(256, args.dims, args.heads, args.layers, args.context)
    mx.eval(model.parameters())
    n_params = sum(v.size for _, v in utils.tree_flatten(model.parameters()))
    print(
        f"model: {args.layers} layers, width {args.dims}, context {args.context}: "
        f"{n_params / 1e6:.2f}M parameters"
    )

    warmup = optim.linear_schedule(0.0, args.lr, args.warmup)
    decay = optim.cosine_decay(args.lr, max(1, args.steps - args.warmup), 0.1 * args.lr)
    schedule = optim.join_schedules([warmup, decay], [args.warmup])
    optimizer = optim.AdamW(learning_rate=schedule, weight_decay=0.01)

    if args.resume and args.checkpoint:
        model.load_weights(args.checkpoint + ".model.safetensors")
        optimizer.state = utils.tree_unflatten(mx.load(args.checkpoint + ".optimizer.safetensors"))
        print(f"resumed from {args.checkpoint} at step {optimizer.state['step'].item()}")

    loss_and_grad = nn.value_and_grad(model, loss_fn)
    stream = batches(train, args.batch, args.context, np.random.default_rng(args.seed))
    tokens_per_step = args.batch * args.context
    start = time.perf_counter()
    window_start, window_tokens = start, 0
    for step in range(1, args.steps + 1):
        x, y = next(stream)
        loss, grads = loss_and_grad(model, x, y)
        grads, grad_norm = optim.clip_grad_norm(grads, args.clip)
        optimizer.update(model, grads)
        mx.eval(model.parameters(), optimizer.state, loss, grad_norm)
        window_tokens += tokens_per_step
        if step % 10 == 0 or step == args.steps:
            now = time.perf_counter()
            rate = window_tokens / (now - window_start)
            window_start, window_tokens = now, 0
            print(
                f"step {step:5d}  loss {loss.item():.3f}  ({loss.item() / math.log(2):.3f} bits/byte)  "
                f"grad-norm {grad_norm.item():.2f}  lr {optimizer.learning_rate.item():.2e}  {rate:,.0f} tokens/s",
                flush=True,
            )
        out_of_time = args.time_limit > 0 and time.perf_counter() - start > args.time_limit
        if step % args.eval_every == 0 or step == args.steps or out_of_time:
            bpb = bits_per_byte(model, valid, args.batch, args.context, args.eval_batches, seed=1)
            print(f"step {step:5d}  validation {bpb:.3f} bits/byte  ({time.perf_counter() - start:.0f} s)", flush=True)
            if args.checkpoint:
                save_checkpoint(args.checkpoint, model, optimizer)
                print(f"           checkpoint written to {args.checkpoint}.*.safetensors")
        if out_of_time:
            print(f"time limit of {args.time_limit:g} s reached at step {step}")
            break

    elapsed = time.perf_counter() - start
    print(f"trained {step} steps in {elapsed:.1f} s ({step * tokens_per_step / elapsed:,.0f} tokens/s)")
    if args.sample > 0:
        text = sample(model, b"def ", args.sample, args.context)
        print("sample:\n" + text.decode("utf-8", errors="replace"))


if __name__ == "__main__":
    main()
