"""The training examples run end to end (a few steps of a tiny configuration)."""

import os
import subprocess
import sys

from _backend import IS_MLX

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples")


def run_example(name, *args):
    env = dict(os.environ)
    # The example imports the package under test the way a user would; keep
    # the path the test session found it on.
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    result = subprocess.run(
        [sys.executable, os.path.join(EXAMPLES, name), *args],
        capture_output=True, text=True, timeout=300, env=env,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_transformer_lm_trains_briefly():
    out = run_example(
        "transformer_lm.py", "--backend", "mlx" if IS_MLX else "loom",
        "--steps", "30", "--batch", "8", "--context", "32", "--dims", "32", "--heads", "2",
        "--layers", "1", "--warmup", "5", "--lr", "5e-3", "--eval-every", "30", "--eval-batches", "2",
        "--data-mb", "0.2", "--sample", "16",
    )
    losses = [float(line.split()[3]) for line in out.splitlines() if line.startswith("step") and " loss " in line]
    assert len(losses) == 3
    # Random bytes cost 8 bits (ln 256 = 5.55 nats); thirty steps learn the byte statistics.
    assert losses[-1] < 4.5, out
    assert "validation" in out and "sample:" in out
