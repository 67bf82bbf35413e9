import math

import pytest

from benchmarks import stats


def test_summarize_odd_count_takes_the_middle_value():
    s = stats.summarize([0.003, 0.001, 0.002])
    assert s["median_ms"] == pytest.approx(2.0)
    assert s["min_ms"] == pytest.approx(1.0)
    assert s["max_ms"] == pytest.approx(3.0)
    assert s["mean_ms"] == pytest.approx(2.0)
    assert s["stdev_ms"] == pytest.approx(1.0)
    assert s["repetitions"] == 3


def test_summarize_even_count_averages_the_middle_pair():
    s = stats.summarize([0.004, 0.001, 0.002, 0.100])
    assert s["median_ms"] == pytest.approx(3.0)
    assert s["max_ms"] == pytest.approx(100.0)


def test_summarize_single_time_has_zero_spread():
    s = stats.summarize([0.5])
    assert s["median_ms"] == s["min_ms"] == s["max_ms"] == pytest.approx(500.0)
    assert s["stdev_ms"] == 0.0


def test_summarize_rejects_no_times():
    with pytest.raises(ValueError):
        stats.summarize([])


@pytest.mark.parametrize("call_s, expected", [(0.001, 10), (0.5, 4), (3.0, 3), (0.0, 10)])
def test_repetitions_fit_the_budget_within_bounds(call_s, expected):
    assert stats.repetitions_for(call_s, budget_s=2.0, min_reps=3, max_reps=10) == expected


def test_rotated_gives_each_implementation_each_position():
    impls = ["loom", "mlx", "numpy"]
    firsts = [stats.rotated(impls, r)[0] for r in range(3)]
    assert sorted(firsts) == sorted(impls)
    assert stats.rotated(impls, 4) == ["mlx", "numpy", "loom"]
    assert stats.rotated([], 2) == []


def test_rates_from_the_median():
    r = stats.add_rates({"median_ms": 2.0, "bytes": 4_000_000, "flops": 8_000_000, "ops": 1000})
    assert r["gb_per_s"] == pytest.approx(2.0)
    assert r["gflop_per_s"] == pytest.approx(4.0)
    assert r["us_per_op"] == pytest.approx(2.0)


def _row(impl, workload, median, **kw):
    r = {"impl": impl, "workload": workload, "status": "ok", "median_ms": median}
    r.update(kw)
    return r


def test_limits_take_the_best_row_of_each_kind():
    records = [
        _row("numpy", "copy", 10.0, bytes=1e9, limit="copy"),
        _row("torch", "copy", 5.0, bytes=1e9, limit="copy"),
        _row("numpy", "mm", 10.0, flops=1e9, limit="gemm"),
        _row("jax", "mm", 20.0, flops=1e9, limit="gemm"),
        _row("loom", "mm", None, flops=1e9, limit="gemm", status="pending"),
    ]
    for r in records:
        stats.add_rates(r)
    limits = stats.machine_limits(records)
    assert limits["copy_gb_per_s"] == pytest.approx(200.0)
    assert limits["copy_from"] == "torch: copy"
    assert limits["gemm_gflop_per_s"] == pytest.approx(100.0)
    assert limits["gemm_from"] == "numpy: mm"


def test_limits_are_none_when_nothing_measured_them():
    limits = stats.machine_limits([_row("numpy", "add", 1.0, bytes=10)])
    assert limits["copy_gb_per_s"] is None and limits["gemm_gflop_per_s"] is None


def test_fraction_uses_the_limit_of_what_bounds_the_row():
    limits = {"copy_gb_per_s": 10.0, "gemm_gflop_per_s": 100.0}
    memory = {"status": "ok", "bound": "memory", "gb_per_s": 5.0}
    compute = {"status": "ok", "bound": "compute", "gflop_per_s": 25.0}
    dispatch = {"status": "ok", "bound": None, "us_per_op": 1.0}
    assert stats.fraction_of_limit(memory, limits) == pytest.approx(0.5)
    assert stats.fraction_of_limit(compute, limits) == pytest.approx(0.25)
    assert stats.fraction_of_limit(dispatch, limits) is None
    assert stats.fraction_of_limit({**memory, "status": "pending"}, limits) is None
    assert stats.fraction_of_limit(memory, {"copy_gb_per_s": None}) is None


def test_ratio_is_peer_over_loom():
    loom = {"status": "ok", "median_ms": 2.0}
    assert stats.ratio_vs_loom({"status": "ok", "median_ms": 6.0}, loom) == pytest.approx(3.0)
    assert stats.ratio_vs_loom({"status": "ok", "median_ms": 1.0}, loom) == pytest.approx(0.5)
    assert stats.ratio_vs_loom({"status": "ok", "median_ms": 1.0}, None) is None
    assert stats.ratio_vs_loom({"status": "ok", "median_ms": 1.0},
                               {"status": "pending", "median_ms": None}) is None


def test_finish_fills_rates_fractions_and_ratios():
    records = [
        _row("loom", "copy", 4.0, bytes=8e6, limit="copy", bound="memory"),
        _row("numpy", "copy", 2.0, bytes=8e6, limit="copy", bound="memory"),
    ]
    limits = stats.finish(records)
    assert limits["copy_gb_per_s"] == pytest.approx(4.0)
    loom, numpy = records
    assert loom["ratio_vs_loom"] == pytest.approx(1.0)
    assert numpy["ratio_vs_loom"] == pytest.approx(0.5)
    assert loom["fraction_of_limit"] == pytest.approx(0.5)
    assert numpy["fraction_of_limit"] == pytest.approx(1.0)
    assert all(math.isfinite(r["gb_per_s"]) for r in records)
