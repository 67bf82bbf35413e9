"""Statistics of timed repetitions, rates, limits and ratios (no I/O)."""

from __future__ import annotations

import math
import statistics


def summarize(times_s):
    """Median, min, max, mean and standard deviation in milliseconds."""
    if not times_s:
        raise ValueError("summarize needs at least one time")
    ms = [t * 1e3 for t in times_s]
    return {
        "median_ms": statistics.median(ms),
        "min_ms": min(ms),
        "max_ms": max(ms),
        "mean_ms": statistics.fmean(ms),
        "stdev_ms": statistics.stdev(ms) if len(ms) > 1 else 0.0,
        "repetitions": len(ms),
    }


def repetitions_for(call_s, budget_s, min_reps, max_reps):
    """How many timed calls fit in ``budget_s``, within [min_reps, max_reps]."""
    if call_s <= 0:
        return max_reps
    return max(min_reps, min(max_reps, int(budget_s / call_s)))


def rotated(items, shift):
    """``items`` rotated left by ``shift``: the order of one interleaved round."""
    if not items:
        return []
    shift %= len(items)
    return list(items[shift:]) + list(items[:shift])


def add_rates(record):
    """GB/s, GFLOP/s and µs per op of a timed record, where they apply."""
    median = record.get("median_ms")
    if not median:
        return record
    seconds = median / 1e3
    if record.get("bytes"):
        record["gb_per_s"] = record["bytes"] / seconds / 1e9
    if record.get("flops"):
        record["gflop_per_s"] = record["flops"] / seconds / 1e9
    if record.get("ops"):
        record["us_per_op"] = median * 1e3 / record["ops"]
    return record


def machine_limits(records):
    """The best copy rate (bytes read + written per second) and the best
    single-precision GEMM rate among the rows that measure them."""
    limits = {"copy_gb_per_s": None, "copy_from": None,
              "gemm_gflop_per_s": None, "gemm_from": None}
    for r in records:
        if r.get("status") != "ok":
            continue
        if r.get("limit") == "copy" and r.get("gb_per_s"):
            if limits["copy_gb_per_s"] is None or r["gb_per_s"] > limits["copy_gb_per_s"]:
                limits["copy_gb_per_s"] = r["gb_per_s"]
                limits["copy_from"] = f"{r['impl']}: {r['workload']}"
        if r.get("limit") == "gemm" and r.get("gflop_per_s"):
            if limits["gemm_gflop_per_s"] is None or r["gflop_per_s"] > limits["gemm_gflop_per_s"]:
                limits["gemm_gflop_per_s"] = r["gflop_per_s"]
                limits["gemm_from"] = f"{r['impl']}: {r['workload']}"
    return limits


def fraction_of_limit(record, limits):
    """The row's rate over the machine's limit for what bounds it, or None."""
    if record.get("status") != "ok":
        return None
    if record.get("bound") == "memory" and record.get("gb_per_s") and limits.get("copy_gb_per_s"):
        return record["gb_per_s"] / limits["copy_gb_per_s"]
    if (record.get("bound") == "compute" and record.get("gflop_per_s")
            and limits.get("gemm_gflop_per_s")):
        return record["gflop_per_s"] / limits["gemm_gflop_per_s"]
    return None


def ratio_vs_loom(record, loom_record):
    """Peer median over Loom's median: above 1 means Loom is faster."""
    if not loom_record or record.get("status") != "ok" or loom_record.get("status") != "ok":
        return None
    loom_ms = loom_record.get("median_ms")
    peer_ms = record.get("median_ms")
    if not loom_ms or peer_ms is None or not math.isfinite(loom_ms):
        return None
    return peer_ms / loom_ms


def finish(records):
    """Add rates, limits, fractions and ratios to every record; return limits."""
    for r in records:
        add_rates(r)
    limits = machine_limits(records)
    loom = {r["workload"]: r for r in records if r["impl"] == "loom"}
    for r in records:
        r["fraction_of_limit"] = fraction_of_limit(r, limits)
        r["ratio_vs_loom"] = ratio_vs_loom(r, loom.get(r["workload"]))
    return limits
