"""``python -m benchmarks``: Loom side by side with its peers."""

from __future__ import annotations

import argparse
import os
import sys

from benchmarks import report
from benchmarks.frameworks import IMPLS
from benchmarks.runner import REPO_ROOT, Config, Runner, WorkerProcess
from benchmarks.worker import load_workloads
from benchmarks.workloads import select

DEFAULT_OUTPUT = os.path.join(REPO_ROOT, "benchmarks", "results", "latest.json")
DEFAULT_DOCS = os.path.join(REPO_ROOT, "docs", "performance.md")


def _venv_python(name):
    path = os.path.join(REPO_ROOT, name, "bin", "python")
    return path if os.access(path, os.X_OK) else None


def default_loom_python():
    """$LOOM_PYTHON, else Loom's own environment (.venv, made by
    scripts/setup.sh), else the interpreter running the runner."""
    return os.environ.get("LOOM_PYTHON") or _venv_python(".venv") or sys.executable


def default_peers_python():
    """$PEERS_PYTHON, else .venv-peers (benchmarks/README.md), else this one."""
    return os.environ.get("PEERS_PYTHON") or _venv_python(".venv-peers") or sys.executable


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Time every workload for Loom and each installed peer (NumPy, MLX, "
                    "PyTorch, JAX) in one run, against the machine's copy and GEMM limits.")
    p.add_argument("--quick", action="store_true",
                   help="smaller sizes and fewer repetitions (under 3 minutes)")
    p.add_argument("--filter", action="append", default=[], metavar="NAME",
                   help="run workloads whose name contains NAME or whose group is NAME "
                        "(repeatable; the limit rows always run)")
    p.add_argument("--impl", default=",".join(IMPLS),
                   help=f"comma-separated implementations (default: {','.join(IMPLS)})")
    p.add_argument("--peers-only", action="store_true", help="leave Loom out")
    p.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    p.add_argument("--output", default=DEFAULT_OUTPUT, help="JSON results file")
    p.add_argument("--update-docs", action="store_true",
                   help="rewrite the generated table of docs/performance.md")
    p.add_argument("--docs", default=DEFAULT_DOCS, help=argparse.SUPPRESS)
    p.add_argument("--list", action="store_true", help="list the workloads and stop")
    p.add_argument("--loom-python", default=None,
                   help="interpreter that imports loom.core (default: $LOOM_PYTHON, else "
                        ".venv/bin/python, else this one)")
    p.add_argument("--peers-python", default=None,
                   help="interpreter that imports the peers (default: $PEERS_PYTHON, else "
                        ".venv-peers/bin/python, else this one)")
    p.add_argument("--loom-path", default=os.environ.get("LOOM_PYTHONPATH"),
                   help="directory put first on the Loom worker's PYTHONPATH "
                        "(default: $LOOM_PYTHONPATH)")
    p.add_argument("--warmup", type=int, help="untimed calls per implementation")
    p.add_argument("--reps", type=int, help="most timed calls per implementation")
    p.add_argument("--min-reps", type=int, help="fewest timed calls per implementation")
    p.add_argument("--budget", type=float,
                   help="seconds of timed calls per implementation and workload")
    p.add_argument("--timeout", type=float, help="seconds before a silent worker is killed")
    p.add_argument("--pause", type=float, help="idle seconds before each call")
    p.add_argument("--quiet-max", type=float,
                   help="most seconds to wait, after the pause, until no worker's threads "
                        "use the CPU (0: do not wait)")
    p.add_argument("--workloads", default="benchmarks.workloads:all_workloads",
                   help=argparse.SUPPRESS)
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    return p.parse_args(argv)


def make_config(args):
    impls = tuple(i.strip() for i in args.impl.split(",") if i.strip())
    unknown = [i for i in impls if i not in IMPLS]
    if unknown:
        raise SystemExit(f"unknown implementation(s): {', '.join(unknown)}; "
                         f"choose from {', '.join(IMPLS)}")
    if args.peers_only:
        impls = tuple(i for i in impls if i != "loom")
    overrides = {k: v for k, v in dict(
        warmup=args.warmup, max_reps=args.reps, min_reps=args.min_reps, budget_s=args.budget,
        timeout_s=args.timeout, pause_s=args.pause,
        quiet_max_s=args.quiet_max).items() if v is not None}
    common = dict(impls=impls, device=args.device, filters=tuple(args.filter),
                  workloads=args.workloads,
                  loom_python=args.loom_python or default_loom_python(),
                  peer_python=args.peers_python or default_peers_python(),
                  loom_path=args.loom_path,
                  log=None if args.quiet else (lambda s: print(s, file=sys.stderr, flush=True)))
    common.update(overrides)
    return Config.quick_defaults(**common) if args.quick else Config(**common)


def loom_has_gpu(config):
    """Start a Loom worker on the GPU: (True, '') or (False, why not)."""
    worker = WorkerProcess("loom", config)
    hello = worker.receive(config.start_timeout_s)
    worker.close()
    return hello.get("status") == "ok", hello.get("reason", "")


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    config = make_config(args)
    workloads = select(list(load_workloads(config.workloads, config.quick).values()),
                       config.filters)
    if args.list:
        for w in workloads:
            print(f"{w.group:10} {w.name}")
        return 0
    if not workloads:
        print("no workload matches the filter", file=sys.stderr)
        return 2
    if args.update_docs and config.filters:
        print("--update-docs rewrites the whole table: run it without --filter", file=sys.stderr)
        return 2

    if config.device == "gpu" and "loom" in config.impls:
        ok, why = loom_has_gpu(config)
        if not ok:
            print(f"Loom has no CUDA backend yet ({why}); --device gpu stops here. "
                  "Add --peers-only to time the peers alone.")
            return 0

    meta, limits, records = Runner(config).run(workloads)
    if not records:
        print("No implementation could run:")
        for impl, info in meta["impls"].items():
            print(f"  {impl}: {info.get('reason', info.get('status'))}")
        return 1
    for impl, info in meta.get("impls", {}).items():
        if info.get("blas_core"):
            print(f"{impl}: BLAS core {info['blas_core']}")
    print(report.text_table(records, limits, meta))
    report.write_json(args.output, meta, limits, records)
    print(f"\nJSON: {os.path.relpath(args.output)}; took {meta['elapsed_s']:.0f} s")
    if args.update_docs:
        report.update_docs(args.docs, report.markdown_section(meta, limits, records))
        print(f"updated {os.path.relpath(args.docs)}")
    return 0
