#!/usr/bin/env bash
# Builds two Loom source trees and times them with one benchmark runner, to
# show what a change did to speed (e.g. issue 6's "no CPU regression" check).
# Each tree is pip-installed into its own directory; the runner of the NEW
# tree times both (a workload the old tree lacks is reported as an error row
# and left out of the comparison). Needs the build dependencies installed and
# no network. Writes <out>/{old,new}.json and prints the table.
#   usage: bash scripts/bench_revisions.sh OLD_TREE NEW_TREE OUT [runner args]
#   e.g.   bash scripts/bench_revisions.sh /tmp/old . /tmp/cmp --quick --filter add
set -euo pipefail
old=$(realpath "$1") new=$(realpath "$2") out=$3
shift 3
mkdir -p "$out"
out=$(realpath "$out")
PY=${PYTHON:-python3}
for side in old new; do
  tree=${!side}
  start=$(date +%s)
  (cd "$tree" && CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) $PY -m pip install -q --no-index \
    --no-build-isolation --no-deps --target "$out/site-$side" --upgrade \
    -Cbuild-dir="$out/build-$side" -Ccmake.define.LOOM_CUDA=OFF .) >"$out/build-$side.log" 2>&1 ||
    { tail -40 "$out/build-$side.log"; exit 1; }
  echo "built $side ($tree) in $(( $(date +%s) - start )) s"
done
for side in old new; do
  (cd "$new" && $PY -m benchmarks --impl loom --loom-python "$PY" --loom-path "$out/site-$side" \
    --output "$out/$side.json" -q "$@")
done
$PY - "$out" <<'PY'
import json, sys
out = sys.argv[1]
rows = {}
for side in ("old", "new"):
    for r in json.load(open(f"{out}/{side}.json"))["records"]:
        if r["impl"] == "loom" and r["status"] == "ok":
            rows.setdefault(r["workload"], {})[side] = r
print("| workload | old median / min (ms) | new median / min (ms) | new/old (min) |")
print("| --- | --- | --- | --- |")
for name, r in rows.items():
    if len(r) < 2:
        continue
    o, n = r["old"], r["new"]
    print(f"| {name} | {o['median_ms']:.3g} / {o['min_ms']:.3g} | {n['median_ms']:.3g} / "
          f"{n['min_ms']:.3g} | {n['min_ms'] / o['min_ms']:.2f} |")
PY
