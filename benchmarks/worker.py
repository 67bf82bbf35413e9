"""A worker process: one implementation, driven by the runner over a pipe.

Started as ``python -m benchmarks.worker --impl NAME``. It reads one JSON
request per line on stdin and answers one JSON line on the original stdout;
anything the frameworks print goes to stderr. Requests:

  {"cmd": "prepare", "workload": NAME}  build the inputs and the call
  {"cmd": "run", "n": K, "memory": B}   K timed calls (the first also measures
                                        memory when B is true)
  {"cmd": "release"}                    drop the inputs, clear caches
  {"cmd": "quit"}

Each answer has "status": "ok", "pending" (Loom lacks a feature), "n/a" (a
peer lacks one) or "error", and "reason" unless ok. A timed call ends only
when the work is done: the adapter's ``sync`` evaluates lazy arrays (mlx,
loom) and blocks on asynchronous ones (jax, CUDA).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import os
import platform
import subprocess
import sys
import time
import traceback

from benchmarks import frameworks
from benchmarks.frameworks import NotApplicable, Pending, Unavailable

PENDING_HINTS = ("not implemented", "not yet implemented", "symbol lookup error",
                 "undefined symbol")


def missing_symbol(text):
    """'not built yet: loom::erf' from a dynamic loader's message
    '... undefined symbol: _ZN4loom3erf...'."""
    for line in text.splitlines():
        if "undefined symbol" in line:
            symbol = line.rsplit("undefined symbol:", 1)[-1].strip().split()[0]
            try:
                demangled = subprocess.run(["c++filt", symbol], capture_output=True,
                                           text=True, timeout=10).stdout.strip()
            except (OSError, subprocess.SubprocessError):
                demangled = ""
            name = demangled.split("(", 1)[0] if demangled else symbol
            return f"not built yet: {name}"
    return "not built yet (symbol lookup error)"


def classify(exc, impl):
    """Map an exception raised by a workload to (status, reason)."""
    if isinstance(exc, Pending):
        return "pending", str(exc)
    if isinstance(exc, NotApplicable):
        return "n/a", str(exc)
    text = f"{type(exc).__name__}: {exc}"
    if impl == "loom":
        if "undefined symbol" in str(exc):
            return "pending", missing_symbol(str(exc))
        if isinstance(exc, AttributeError) and "loom" in str(exc):
            return "pending", text
        if any(h in str(exc).lower() for h in PENDING_HINTS):
            return "pending", text
    return "error", text[:500]


def load_workloads(spec, quick):
    """``spec`` is ``module:function``; the function takes ``quick``."""
    module_name, _, func = spec.partition(":")
    module = importlib.import_module(module_name)
    return {w.name: w for w in getattr(module, func or "all_workloads")(quick=quick)}


def timed_calls(fw, call, n):
    times = []
    for _ in range(n):
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            start = time.perf_counter()
            out = call()
            fw.sync(out)
            elapsed = time.perf_counter() - start
        finally:
            if gc_was_enabled:
                gc.enable()
        del out
        times.append(elapsed)
    return times


class Worker:
    def __init__(self, fw, workloads):
        self.fw = fw
        self.workloads = workloads
        self.call = None

    def handle(self, request):
        cmd = request.get("cmd")
        if cmd == "prepare":
            return self.prepare(request["workload"])
        if cmd == "run":
            return self.run(int(request.get("n", 1)), bool(request.get("memory")))
        if cmd == "release":
            self.call = None
            self.fw.take_inputs()
            self.fw.clear_cache()
            return {"status": "ok"}
        return {"status": "error", "reason": f"unknown command {cmd!r}"}

    def prepare(self, name):
        self.call = None
        workload = self.workloads.get(name)
        if workload is None:
            return {"status": "error", "reason": f"unknown workload {name!r}"}
        self.fw.take_inputs()
        self.call = workload.build(self.fw)
        self.fw.sync(self.fw.take_inputs())
        return {"status": "ok"}

    def run(self, n, memory):
        if self.call is None:
            return {"status": "error", "reason": "run before prepare"}
        answer = {"status": "ok", "times": []}
        if memory:
            start = time.perf_counter()
            answer["memory"] = self.fw.measure_memory(self.call)
            answer["times"].append(time.perf_counter() - start)
            n -= 1
        answer["times"] += timed_calls(self.fw, self.call, n)
        return answer


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.worker")
    parser.add_argument("--impl", required=True)
    parser.add_argument("--device", default="cpu", choices=("cpu", "gpu"))
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--workloads", default="benchmarks.workloads:all_workloads")
    args = parser.parse_args(argv)

    # Answers go to the original stdout; whatever else is printed goes to stderr.
    channel = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)

    def answer(obj):
        channel.write(json.dumps(obj) + "\n")
        channel.flush()

    try:
        fw = frameworks.load(args.impl, args.device)
        info = fw.info()
    except Unavailable as e:
        answer({"status": "unavailable", "reason": str(e)})
        return 0
    except Exception as e:  # a broken install: say why, keep the run going
        status, reason = classify(e, args.impl)
        answer({"status": "unavailable" if status == "error" else status, "reason": reason})
        return 0
    info.update({"python": sys.executable, "python_version": platform.python_version(),
                 "pid": os.getpid()})
    workloads = load_workloads(args.workloads, args.quick)
    answer({"status": "ok", "info": info})

    worker = Worker(fw, workloads)
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        if request.get("cmd") == "quit":
            break
        try:
            reply = worker.handle(request)
        except BaseException as e:  # noqa: BLE001 - reported to the runner
            if isinstance(e, KeyboardInterrupt):
                raise
            worker.call = None
            status, reason = classify(e, args.impl)
            reply = {"status": status, "reason": reason}
            if status == "error":
                traceback.print_exc(file=sys.stderr)
        answer(reply)
    return 0


if __name__ == "__main__":
    sys.exit(main())
