"""The runner end to end on the tiny workloads, with NumPy and a stand-in
Loom (both need only NumPy). No assertion depends on how long anything took."""

import json
import sys

import pytest

from benchmarks import cli, report
from benchmarks.runner import Config, Runner
from benchmarks.worker import classify, missing_symbol

TINY = "benchmarks.tests.tiny:workloads"
REQUIRED = ("workload", "impl", "status", "median_ms", "min_ms", "max_ms", "bytes", "flops",
            "peak_memory_bytes", "process_peak_delta_bytes", "fraction_of_limit",
            "ratio_vs_loom")


def _run(loom_path, impls=("loom", "numpy")):
    from benchmarks.worker import load_workloads

    config = Config(impls=impls, workloads=TINY, warmup=1, min_reps=2, max_reps=3,
                    budget_s=0.5, timeout_s=60, pause_s=0.0, loom_python=sys.executable,
                    peer_python=sys.executable,
                    loom_path=loom_path)
    workloads = list(load_workloads(TINY, quick=False).values())
    return Runner(config).run(workloads)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    from benchmarks.tests.conftest import FAKE_LOOM_CORE

    root = tmp_path_factory.mktemp("fake")
    (root / "loom").mkdir()
    (root / "loom" / "__init__.py").write_text("")
    (root / "loom" / "core.py").write_text(FAKE_LOOM_CORE)
    return _run(str(root))


def _find(records, workload, impl):
    return next(r for r in records if r["workload"] == workload and r["impl"] == impl)


def test_one_record_per_workload_and_implementation(tiny_run):
    _, _, records = tiny_run
    pairs = [(r["workload"], r["impl"]) for r in records]
    assert len(pairs) == len(set(pairs)) == 7 * 2
    for r in records:
        for key in REQUIRED:
            assert key in r, (key, r)


def test_timed_rows_carry_consistent_statistics(tiny_run):
    _, _, records = tiny_run
    for impl in ("loom", "numpy"):
        r = _find(records, "tiny add", impl)
        assert r["status"] == "ok"
        assert 2 <= r["repetitions"] <= 3 and len(r["times_ms"]) == r["repetitions"]
        assert r["min_ms"] <= r["median_ms"] <= r["max_ms"]
        assert r["bytes"] == 3 * 256 * 4 and r["gb_per_s"] > 0
        assert r["fraction_of_limit"] > 0
        assert r["process_peak_delta_bytes"] is not None
    assert _find(records, "tiny add", "loom")["ratio_vs_loom"] == pytest.approx(1.0)
    assert _find(records, "tiny add", "numpy")["ratio_vs_loom"] > 0
    assert _find(records, "tiny dispatch", "numpy")["us_per_op"] > 0


def test_missing_features_and_failures_become_rows(tiny_run):
    _, _, records = tiny_run
    assert _find(records, "tiny erf", "loom")["status"] == "pending"
    assert _find(records, "tiny erf", "numpy")["status"] == "n/a"
    error = _find(records, "tiny error", "numpy")
    assert error["status"] == "error" and "on purpose" in error["reason"]
    crash = _find(records, "tiny crash", "numpy")
    assert crash["status"] == "error" and "exit 3" in crash["reason"]
    # the worker was restarted: the workload after the crash ran
    assert _find(records, "tiny matmul", "numpy")["status"] == "ok"


def test_limits_come_from_the_limit_rows(tiny_run):
    _, limits, records = tiny_run
    best = max(r["gb_per_s"] for r in records if r["workload"] == "tiny copy")
    assert limits["copy_gb_per_s"] == pytest.approx(best)
    assert limits["gemm_gflop_per_s"] > 0


def test_meta_names_the_implementations(tiny_run):
    meta, _, _ = tiny_run
    assert meta["impls"]["numpy"]["status"] == "ok"
    assert meta["impls"]["loom"]["status"] == "ok"
    assert meta["machine"]["cores"] >= 1


def test_loom_rows_are_pending_until_loom_imports(no_loom):
    _, _, records = _run(no_loom)
    loom = [r for r in records if r["impl"] == "loom"]
    assert len(loom) == 7 and all(r["status"] == "pending" for r in loom)
    assert "not built here" in loom[0]["reason"]
    assert _find(records, "tiny add", "numpy")["ratio_vs_loom"] is None


def test_cli_writes_json_table_and_docs(tmp_path, fake_loom, capsys):
    output = tmp_path / "latest.json"
    docs = tmp_path / "performance.md"
    docs.write_text(f"intro\n{report.DOCS_BEGIN}\n{report.DOCS_END}\nanalysis\n")
    common = ["--workloads", TINY, "--impl", "loom,numpy", "--loom-path", fake_loom,
              "--loom-python", sys.executable, "--peers-python", sys.executable,
              "--pause", "0", "--warmup", "1", "--reps", "2", "--min-reps", "1", "-q",
              "--output", str(output), "--docs", str(docs)]
    assert cli.main(common + ["--filter", "tiny add"]) == 0
    document = json.loads(output.read_text())
    names = {r["workload"] for r in document["records"]}
    assert names == {"tiny add", "tiny copy"}  # the filter, plus the limit row
    out = capsys.readouterr().out
    assert "tiny add" in out and "Machine limits" in out

    # a filtered run would leave a partial table in the docs
    assert cli.main(common + ["--filter", "tiny add", "--update-docs"]) == 2
    assert cli.main(common + ["--update-docs"]) == 0
    text = docs.read_text()
    assert "| tiny add | loom |" in text and "| tiny matmul | loom |" in text
    assert text.startswith("intro\n") and text.endswith("analysis\n")


def test_cli_list_applies_the_filter(capsys):
    assert cli.main(["--workloads", TINY, "--list", "--filter", "matmul"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert [line.split(None, 1)[1] for line in listed] == ["tiny copy", "tiny matmul"]


def test_missing_symbol_names_the_function():
    text = ("python: symbol lookup error: /x/core.so: undefined symbol: "
            "_ZN4loom3erfERKNS_5arrayESt7variantIJSt9monostateNS_6StreamENS_6DeviceEEE\n")
    reason = missing_symbol(text)
    assert reason.startswith("not built yet: ")
    assert "loom::erf" in reason or "_ZN4loom3erf" in reason


def test_classify_missing_features_of_loom_as_pending():
    assert classify(AttributeError("module 'loom.core' has no attribute 'erf'"), "loom")[0] \
        == "pending"
    assert classify(RuntimeError("vmap not implemented for Sort"), "loom")[0] == "pending"
    assert classify(ImportError("core.so: undefined symbol: _ZN4loom3expERKNS_5arrayE"),
                    "loom")[0] == "pending"
    assert classify(ValueError("[matmul] shapes differ"), "loom")[0] == "error"
    assert classify(AttributeError("module 'mlx.core' has no attribute 'x'"), "mlx")[0] \
        == "error"


def test_gpu_run_stops_while_loom_has_no_cuda_backend(no_loom, tmp_path, capsys):
    output = tmp_path / "latest.json"
    code = cli.main(["--workloads", TINY, "--device", "gpu", "--loom-path", no_loom,
                     "--loom-python", sys.executable, "--output", str(output), "-q"])
    assert code == 0
    assert "no CUDA backend" in capsys.readouterr().out
    assert not output.exists()


def test_wait_until_quiet_waits_for_spinning_threads():
    import subprocess

    from benchmarks.runner import cpu_ns_of, wait_until_quiet

    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        waited, quiet = wait_until_quiet([spinner.pid], max_s=0.2, window_s=0.05,
                                         busy_fraction=0.01)
        assert not quiet  # the cap ends the wait; the run goes on
        assert cpu_ns_of([spinner.pid]) > 0
        _, quiet = wait_until_quiet([sleeper.pid], max_s=5.0)
        assert quiet
    finally:
        spinner.kill()
        sleeper.kill()
        spinner.wait()
        sleeper.wait()
    assert cpu_ns_of([spinner.pid]) is None  # a process that is gone: /proc cannot tell


def test_meta_counts_the_quiet_waits(tiny_run):
    meta = tiny_run[0]
    waits = meta["quiet_waits"]
    assert waits["calls"] > 0 and 0 <= waits["not_quiet"] <= waits["calls"]
