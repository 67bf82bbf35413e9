#!/usr/bin/env bash
# Sets up and builds (scripts/setup.sh), then runs every test: the C++ tests
# through ctest and the Python suites through pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo "== C++ tests (ctest)"
ctest --test-dir build/release --output-on-failure -j2
echo "== Python tests (pytest)"
# Run from python/tests so the installed package, not the source tree, is imported.
.venv/bin/python -m pytest -q -p no:cacheprovider python/tests benchmarks/tests
