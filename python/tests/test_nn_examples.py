"""The training examples run end to end (a few steps of a tiny configuration)."""

import json
import os
import subprocess
import sys

import pytest

from _backend import IS_MLX

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples")
BACKEND = "mlx" if IS_MLX else "loom"


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


TINY_LM = ("--backend", BACKEND, "--batch", "8", "--context", "32", "--dims", "32", "--heads", "2",
           "--layers", "1", "--warmup", "5", "--lr", "5e-3", "--eval-every", "15", "--eval-batches", "2",
           "--final-eval-batches", "2", "--data-mb", "0.2", "--no-progress")


def train_losses(out):
    return [float(line.split()[3]) for line in out.splitlines() if line.startswith("step") and " loss " in line]


def test_transformer_lm_trains_briefly(tmp_path):
    prefix = str(tmp_path / "lm")
    plot = tmp_path / "loss.png"
    out = run_example("transformer_lm.py", *TINY_LM, "--steps", "30", "--sample", "16",
                      "--checkpoint", prefix, "--plot", str(plot))
    losses = train_losses(out)
    assert len(losses) == 3, out
    # Random bytes cost 8 bits; thirty steps learn the byte statistics.
    assert losses[-1] < 6.5, out
    assert "validation" in out and "sample:" in out
    for suffix in (".model.safetensors", ".optimizer.safetensors", ".history.json"):
        assert os.path.exists(prefix + suffix), suffix
    history = json.load(open(prefix + ".history.json"))
    assert [s for s, _ in history["valid"]] == [15, 30]
    assert len(history["train"]) == 30
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert "matplotlib is not installed" in out
    else:
        assert plot.stat().st_size > 1000


def test_transformer_lm_resumes_where_the_checkpoint_left_off(tmp_path):
    prefix = str(tmp_path / "lm")
    common = (*TINY_LM, "--sample", "0", "--plot", "", "--checkpoint", prefix)
    straight = run_example("transformer_lm.py", *common, "--steps", "30",
                           "--checkpoint", str(tmp_path / "straight"))
    run_example("transformer_lm.py", *common, "--steps", "30", "--time-limit", "1e-9")
    resumed = run_example("transformer_lm.py", *common, "--steps", "30", "--resume")
    assert "resumed from" in resumed and "at step 1" in resumed
    # The resumed run continues the schedule and the data stream (each step's batch is a function
    # of the step), so it ends where an uninterrupted run of the same length ends.
    final = [line for line in resumed.splitlines() if line.startswith("final validation")]
    expected = [line for line in straight.splitlines() if line.startswith("final validation")]
    assert final and expected
    assert abs(float(final[0].split()[3]) - float(expected[0].split()[3])) < 1e-3, (resumed, straight)
    history = json.load(open(prefix + ".history.json"))
    assert [s for s, _ in history["train"]] == list(range(1, 31))


def test_transformer_lm_eager_and_compiled_steps_agree():
    args = (*TINY_LM, "--steps", "10", "--sample", "0", "--plot", "", "--checkpoint", "")
    compiled = train_losses(run_example("transformer_lm.py", *args))
    eager = train_losses(run_example("transformer_lm.py", *args, "--no-compile"))
    assert compiled == pytest.approx(eager, abs=2e-3)


@pytest.mark.loom_only  # the small example imports loom.core directly
def test_logistic_regression_example_converges():
    out = run_example("logistic_regression.py", "--steps", "60")
    last = [line for line in out.splitlines() if line.startswith("step")][-1]
    assert float(last.split()[3]) < 0.4, out
