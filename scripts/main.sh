#!/usr/bin/env bash
# Sets up and builds (scripts/setup.sh), then runs the main job: a byte-level
# transformer language model trained on the Python standard library's sources
# (examples/transformer_lm.py; about 4-5 minutes on 2 idle cores). Arguments
# are passed on, e.g. `bash scripts/main.sh --resume` or `--steps 100`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The main job's own extras: the progress bar and the loss-curve plot.
if ! .venv/bin/python -c "import tqdm, matplotlib" >/dev/null 2>&1; then
  echo "== installing tqdm and matplotlib into .venv"
  .venv/bin/python -m pip install -q tqdm matplotlib
fi
# The run is sized to train in ~4 minutes on 2 idle cores; the time limit keeps a slower or
# busy machine inside 5 minutes (it then stops early, validates and checkpoints).
.venv/bin/python examples/transformer_lm.py --time-limit 270 "$@"
