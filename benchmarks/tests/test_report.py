import json

import pytest

from benchmarks import report, stats


def _records():
    records = [
        {"workload": "add", "group": "memory", "impl": "numpy", "status": "ok",
         "median_ms": 2.0, "min_ms": 1.5, "max_ms": 3.0, "bytes": 12e6, "bound": "memory",
         "peak_memory_bytes": 4 * 2**20, "process_peak_delta_bytes": 4 * 2**20},
        {"workload": "add", "group": "memory", "impl": "loom", "status": "ok",
         "median_ms": 1.0, "min_ms": 0.9, "max_ms": 1.1, "bytes": 12e6, "bound": "memory",
         "peak_memory_bytes": None, "process_peak_delta_bytes": None},
        {"workload": "copy", "group": "limits", "impl": "numpy", "status": "ok",
         "median_ms": 1.0, "min_ms": 1.0, "max_ms": 1.0, "bytes": 24e6, "bound": "memory",
         "limit": "copy"},
        {"workload": "copy", "group": "limits", "impl": "loom", "status": "pending",
         "reason": "loom has no copy yet", "median_ms": None},
    ]
    limits = stats.finish(records)
    return records, limits


def test_rows_are_grouped_and_loom_comes_first():
    records, _ = _records()
    order = [(r["workload"], r["impl"]) for r in report.ordered(records)]
    assert order == [("copy", "loom"), ("copy", "numpy"), ("add", "loom"), ("add", "numpy")]


def test_cells_of_a_timed_row():
    records, _ = _records()
    numpy_add = next(r for r in records if r["workload"] == "add" and r["impl"] == "numpy")
    cells = dict(zip(report.COLUMNS, report.row_cells(numpy_add)))
    assert cells["median ms"] == "2.00"
    assert cells["min–max ms"] == "1.50–3.00"
    assert cells["rate"] == "6 GB/s"
    assert cells["peer/Loom"] == "2.00×"
    assert cells["of limit"] == "25%"
    assert cells["peak MB"] == "4"


def test_cells_of_a_pending_row_carry_the_reason():
    records, _ = _records()
    pending = next(r for r in records if r["status"] == "pending")
    cells = dict(zip(report.COLUMNS, report.row_cells(pending)))
    assert cells["median ms"] == "pending"
    assert cells["note"] == "loom has no copy yet"


def test_text_table_has_groups_statuses_and_limits():
    records, limits = _records()
    text = report.text_table(records, limits)
    assert "== Machine limits ==" in text and "== Memory-bound ==" in text
    assert "pending" in text
    assert "Machine limits: copy 24 GB/s (numpy: copy)" in text
    assert "f32 GEMM: not measured" in text


def test_markdown_section_has_one_table_per_group():
    records, limits = _records()
    meta = {"date": "2026-01-01T00:00:00", "quick": True, "device": "cpu",
            "machine": {"cpu": "CPU", "cores": 2, "memory_gb": 4, "os": "Linux"},
            "python": "3.11", "impls": {"numpy": {"status": "ok", "version": "2.0"},
                                        "loom": {"status": "pending", "reason": "not built"}}}
    text = report.markdown_section(meta, limits, records)
    assert text.count("| workload | impl |") == 2
    assert "numpy 2.0" in text and "loom (pending: not built)" in text


def test_update_docs_replaces_only_between_markers(tmp_path):
    doc = tmp_path / "performance.md"
    doc.write_text(f"# Title\n\nbefore\n\n{report.DOCS_BEGIN}\nold table\n{report.DOCS_END}\n\n"
                   "## Analysis\nkept\n")
    report.update_docs(str(doc), "new table\n")
    text = doc.read_text()
    assert "old table" not in text and "new table" in text
    assert text.startswith("# Title\n\nbefore\n") and text.endswith("## Analysis\nkept\n")
    report.update_docs(str(doc), "newer table\n")  # markers survive a rewrite
    assert "newer table" in doc.read_text() and "new table\n" not in doc.read_text()


def test_update_docs_refuses_a_file_without_markers(tmp_path):
    doc = tmp_path / "performance.md"
    doc.write_text("no markers here\n")
    with pytest.raises(ValueError):
        report.update_docs(str(doc), "table\n")
    assert doc.read_text() == "no markers here\n"


def test_json_round_trip(tmp_path):
    records, limits = _records()
    path = tmp_path / "results" / "latest.json"
    report.write_json(str(path), {"quick": True}, limits, records)
    document = json.loads(path.read_text())
    assert document["meta"] == {"quick": True}
    assert document["limits"]["copy_gb_per_s"] == pytest.approx(24.0)
    assert len(document["records"]) == len(records)


def test_a_reason_shared_by_the_whole_implementation_is_said_once():
    records, limits = _records()
    meta = {"impls": {"loom": {"status": "pending", "reason": "loom has no copy yet"}}}
    text = report.text_table(records, limits, meta)
    assert text.count("loom has no copy yet") == 1
    assert "loom: loom has no copy yet" in text
