#!/usr/bin/env bash
# Sets up and builds (scripts/setup.sh), then runs the main job: logistic
# regression trained with value_and_grad (examples/logistic_regression.py).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/python examples/logistic_regression.py "$@"
