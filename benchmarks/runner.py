"""The runner: one worker process per implementation, driven in lockstep.

Each implementation runs in its own process (``benchmarks.worker``), started
with the interpreter that can import it, so Loom and the peers never share an
import path, a crash or a symbol-lookup failure of one is a row, not the end
of the run, and the process's peak memory belongs to one framework. The
runner itself imports no framework.

For each workload every worker builds its inputs, then the runner interleaves
the implementations call by call (warm-up rounds, then timed rounds, the
order rotating each round), so that a slow minute of a shared machine falls
on all of them alike.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import select
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Optional

from benchmarks import report, stats
from benchmarks.frameworks import IMPLS, environment
from benchmarks.worker import missing_symbol

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass
class Config:
    impls: tuple = IMPLS
    device: str = "cpu"
    quick: bool = False
    filters: tuple = ()
    warmup: int = 2  # untimed calls; the first also measures memory
    max_reps: int = 10
    min_reps: int = 3
    budget_s: float = 5.0  # timed calls per implementation stop at about this
    timeout_s: float = 300.0  # one request; past it the worker is killed
    start_timeout_s: float = 180.0
    # Idle time before each call: BLAS and OpenMP threads spin for tens of ms
    # after a call returns, which would slow the next implementation's call.
    # After the pause the runner also waits (up to quiet_max_s) until no
    # worker's threads use the CPU (see wait_until_quiet).
    pause_s: float = 0.05
    quiet_max_s: float = 0.5
    workloads: str = "benchmarks.workloads:all_workloads"
    loom_python: Optional[str] = None
    loom_path: Optional[str] = None
    peer_python: Optional[str] = None
    log: object = field(default=None, repr=False)  # a callable taking a line, or None

    @classmethod
    def quick_defaults(cls, **kwargs):
        base = dict(quick=True, warmup=1, max_reps=3, min_reps=1, budget_s=1.0, pause_s=0.02,
                    timeout_s=120.0)
        base.update(kwargs)
        return cls(**base)


class WorkerProcess:
    """The runner's end of one worker."""

    def __init__(self, impl, config):
        self.impl = impl
        self.config = config
        self.info = None
        self.status = "starting"
        self.reason = ""
        self._buffer = b""
        python = (config.loom_python if impl == "loom" else config.peer_python) or sys.executable
        env = dict(os.environ)
        paths = [REPO_ROOT]
        if impl == "loom" and config.loom_path:
            paths.insert(0, config.loom_path)
        if env.get("PYTHONPATH"):
            paths.append(env["PYTHONPATH"])
        env["PYTHONPATH"] = os.pathsep.join(paths)
        env["PYTHONUNBUFFERED"] = "1"
        if impl == "jax":
            env.setdefault("JAX_PLATFORMS", "cuda" if config.device == "gpu" else "cpu")
            env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        if impl == "torch" and config.device == "cpu":
            env.setdefault("CUDA_VISIBLE_DEVICES", "")
        self._stderr = tempfile.TemporaryFile()
        cmd = [python, "-m", "benchmarks.worker", "--impl", impl, "--device", config.device,
               "--workloads", config.workloads]
        if config.quick:
            cmd.append("--quick")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._stderr, cwd=REPO_ROOT, env=env)

    # --- the pipe ----------------------------------------------------------------
    def send(self, request):
        try:
            self.proc.stdin.write((json.dumps(request) + "\n").encode())
            self.proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError):
            return False

    def receive(self, timeout):
        """The next answer, or a status 'error'/'timeout'/'pending' answer if
        the worker died or did not answer in time."""
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                return {"status": "timeout", "reason": f"no answer within {timeout:.0f} s"}
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                return self._died()
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return json.loads(line)

    def request(self, request, timeout):
        if not self.send(request):
            return self._died()
        return self.receive(timeout)

    def _died(self):
        code = self.proc.wait()
        tail = self.stderr_tail()
        self.status = "dead"
        lowered = tail.lower()
        if self.impl == "loom" and ("symbol lookup error" in lowered
                                    or "undefined symbol" in lowered):
            return {"status": "pending", "reason": missing_symbol(tail)}
        last = tail.strip().splitlines()[-1] if tail.strip() else ""
        return {"status": "error", "reason": f"worker died (exit {code}) {last}".strip()}

    def stderr_tail(self, limit=4000):
        try:
            self._stderr.seek(0, os.SEEK_END)
            size = self._stderr.tell()
            self._stderr.seek(max(0, size - limit))
            return self._stderr.read().decode(errors="replace")
        except (OSError, ValueError):
            return ""

    @property
    def alive(self):
        return self.status == "ok" and self.proc.poll() is None

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.status = "dead"

    def close(self):
        if self.proc.poll() is None:
            self.send({"cmd": "quit"})
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()
        self._stderr.close()


def cpu_ns_of(pids):
    """CPU time (ns) used so far by every thread of these processes, from
    /proc/PID/task/TID/schedstat (nanosecond resolution, unlike /proc/stat's
    clock ticks); None where /proc cannot tell."""
    total = 0
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            return None
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                continue  # the thread ended
    return total


def wait_until_quiet(pids, max_s, window_s=0.005, busy_fraction=0.1):
    """Waits until the workers' threads together use under busy_fraction of
    one core over a window, or max_s passed. OpenBLAS's threads, for example,
    spin about 0.1 s after NumPy's call returns (2^28 cycles by default):
    timed then, the next implementation's call would share the cores with
    them. Returns (seconds waited, whether it became quiet)."""
    start = time.monotonic()
    before = cpu_ns_of(pids)
    if before is None:
        return 0.0, False
    while True:
        time.sleep(window_s)
        after = cpu_ns_of(pids)
        if after is None:
            return time.monotonic() - start, False
        if after - before < busy_fraction * window_s * 1e9:
            return time.monotonic() - start, True
        if time.monotonic() - start >= max_s:
            return time.monotonic() - start, False
        before = after


class Runner:
    def __init__(self, config):
        self.config = config
        self.workers = {}
        self.impl_info = {}
        self.quiet_waits = {"calls": 0, "waited_s": 0.0, "not_quiet": 0}

    def log(self, text):
        if self.config.log:
            self.config.log(text)

    # --- workers --------------------------------------------------------------------
    def start(self, impls):
        """Start (or restart) workers concurrently; record who answered."""
        started = {impl: WorkerProcess(impl, self.config) for impl in impls}
        for impl, worker in started.items():
            hello = worker.receive(self.config.start_timeout_s)
            worker.status = hello.get("status", "error")
            worker.reason = hello.get("reason", "")
            if worker.status == "ok":
                worker.info = hello.get("info", {})
                self.workers[impl] = worker
                self.impl_info[impl] = {"status": "ok", **worker.info}
            else:
                if impl == "loom" and worker.status in ("unavailable", "error"):
                    worker.status = "pending"  # Loom rows say pending until it imports
                self.impl_info.setdefault(impl, {"status": worker.status,
                                                 "reason": worker.reason})
                self.impl_info[impl].update(status=worker.status, reason=worker.reason)
                worker.close()
            self.log(f"{impl}: {worker.status} {worker.reason or worker.info}")

    def restart_dead(self):
        dead = [impl for impl, w in self.workers.items() if not w.alive]
        for impl in dead:
            self.workers.pop(impl).close()
        if dead:
            self.start(dead)

    def close(self):
        for worker in self.workers.values():
            worker.close()
        self.workers = {}

    # --- one workload ------------------------------------------------------------------
    def run_workload(self, workload):
        cfg = self.config
        records = {}
        for impl in cfg.impls:
            if impl not in self.workers:
                info = self.impl_info.get(impl, {})
                if impl == "loom":
                    records[impl] = {"status": "pending",
                                     "reason": info.get("reason", "loom.core does not import")}
                continue
            records[impl] = {"status": "ok"}

        running = [impl for impl in cfg.impls if impl in self.workers]
        for impl in running:  # inputs are built in all workers at once
            self.workers[impl].send({"cmd": "prepare", "workload": workload.name})
        for impl in running:
            answer = self.workers[impl].receive(cfg.timeout_s)
            if answer["status"] != "ok":
                records[impl] = {"status": answer["status"], "reason": answer.get("reason", "")}
        active = [impl for impl in running if records[impl]["status"] == "ok"]

        times = {impl: [] for impl in active}
        warm = {impl: [] for impl in active}

        def call(impl, memory=False):
            if cfg.pause_s:
                time.sleep(cfg.pause_s)
            if cfg.quiet_max_s:
                pids = [w.proc.pid for w in self.workers.values() if w.proc.poll() is None]
                waited, quiet = wait_until_quiet(pids, cfg.quiet_max_s)
                self.quiet_waits["calls"] += 1
                self.quiet_waits["waited_s"] += waited
                self.quiet_waits["not_quiet"] += not quiet
            answer = self.workers[impl].request({"cmd": "run", "n": 1, "memory": memory},
                                                cfg.timeout_s)
            if answer["status"] != "ok":
                records[impl] = {"status": answer["status"], "reason": answer.get("reason", "")}
                active.remove(impl)
                return None
            if memory:
                records[impl].update(answer.get("memory", {}))
            return answer["times"][0]

        for round_ in range(max(1, cfg.warmup)):
            for impl in stats.rotated(list(active), round_):
                if round_ and warm[impl][0] > cfg.budget_s:
                    continue  # a call this long was warm after the first one
                t = call(impl, memory=(round_ == 0))
                if t is not None:
                    warm[impl].append(t)

        target = {impl: stats.repetitions_for(warm[impl][-1], cfg.budget_s, cfg.min_reps,
                                              cfg.max_reps) for impl in active}
        for impl in active:
            if warm[impl][0] > 2 * cfg.budget_s:
                target[impl] = 1  # a call this slow is timed once: the gap is not subtle
        for round_ in range(max(target.values(), default=0)):
            for impl in stats.rotated(list(active), round_):
                if len(times[impl]) < target[impl]:
                    t = call(impl)
                    if t is not None:
                        times[impl].append(t)

        for impl in running:
            worker = self.workers[impl]
            if worker.alive:
                worker.request({"cmd": "release"}, cfg.timeout_s)
        self.restart_dead()

        out = []
        for impl, rec in records.items():
            record = {
                "workload": workload.name, "group": workload.group, "impl": impl,
                "status": rec["status"], "reason": rec.get("reason", ""),
                "median_ms": None, "min_ms": None, "max_ms": None,
                "bytes": workload.bytes, "flops": workload.flops, "ops": workload.ops,
                "bound": workload.bound, "limit": workload.limit, "note": workload.note,
                "peak_memory_bytes": rec.get("peak_memory_bytes"),
                "process_peak_rss_bytes": rec.get("process_peak_rss_bytes"),
                "process_peak_delta_bytes": rec.get("process_peak_delta_bytes"),
            }
            if rec["status"] == "ok" and times.get(impl):
                record.update(stats.summarize(times[impl]))
                record["times_ms"] = [t * 1e3 for t in times[impl]]
                record["warmup_ms"] = [t * 1e3 for t in warm[impl]]
            elif rec["status"] == "ok":
                record["status"] = "error"
                record["reason"] = "no timed call completed"
            out.append(record)
        return out

    # --- the run ----------------------------------------------------------------------
    def run(self, workloads):
        started = time.monotonic()
        self.start(self.config.impls)
        records = []
        try:
            for i, workload in enumerate(workloads, 1):
                t0 = time.monotonic()
                rows = self.run_workload(workload)
                records += rows
                summary = ", ".join(
                    f"{r['impl']} {report.fmt_ms(r['median_ms'])} ms" if r["status"] == "ok"
                    else f"{r['impl']} {r['status']}" for r in rows)
                self.log(f"[{i}/{len(workloads)}] {workload.name}: {summary} "
                         f"({time.monotonic() - t0:.1f} s)")
        finally:
            self.close()
        limits = stats.finish(records)
        meta = run_meta(self.config, self.impl_info, time.monotonic() - started)
        meta["quiet_waits"] = {**self.quiet_waits,
                               "waited_s": round(self.quiet_waits["waited_s"], 2)}
        return meta, limits, records


def run_meta(config, impl_info, elapsed_s):
    return {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "device": config.device,
        "quick": config.quick,
        "filters": list(config.filters),
        "warmup": config.warmup,
        "max_reps": config.max_reps,
        "min_reps": config.min_reps,
        "budget_s": config.budget_s,
        "elapsed_s": round(elapsed_s, 1),
        "python": platform.python_version(),
        "machine": machine_info(),
        "impls": impl_info,
        "environment": environment(),
        "git_commit": _git_commit(),
    }


def machine_info():
    info = {"os": platform.platform(terse=True), "cores": os.cpu_count(), "cpu": platform.machine()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
            info["memory_gb"] = round(kb / 2**20, 1)
    except OSError:
        pass
    return info


def _git_commit():
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT,
                              capture_output=True, text=True, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None
