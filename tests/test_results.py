"""attention_lab.measure.results: one reader for the committed benchmark CSVs, found from the package's own checkout
(not the working folder), with the machine line a lesson prints; and a benchmark script's CSV read back by it."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

from attention_lab.measure.results import RESULTS_DIR, read_results, write_results

ROOT = Path(__file__).resolve().parent.parent
COMMITTED = sorted((ROOT / "benchmarks" / "results").glob("*.csv"))


def _write(path: Path, rows: list[dict[str, object]]) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def _row(**changes: object) -> dict[str, object]:
    return {"n": 1024, "variant": "dense", "machine": "AMD EPYC, 2 logical cores", "threads": 2,
            "torch": "2.13.0+cpu", "date": "2026-12-01", "load": "0.7", **changes}


def test_the_results_folder_is_this_checkouts():
    assert RESULTS_DIR == ROOT / "benchmarks" / "results"


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: p.name)
def test_every_committed_csv_reads_from_any_working_folder(path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a lesson of notebooks/zh-CN/ runs one folder deeper: the cwd must not matter
    results = read_results(path.name)
    with open(path, newline="", encoding="utf-8") as handle:
        assert results.rows == list(csv.DictReader(handle))
    first = results.rows[0]
    assert results.path == path and results.missing == ""
    assert results.machine.startswith(f"{first['machine']}, {first['threads']} thread")
    assert f"torch {first['torch']}, {first['date']}, load average up to " in results.machine


def test_the_label_names_the_highest_load_and_says_when_the_cores_were_shared(tmp_path):
    quiet = read_results(_write(tmp_path / "quiet.csv", [_row(load="0.7"), _row(load="1.8")]))
    assert quiet.machine == "AMD EPYC, 2 logical cores, 2 threads, torch 2.13.0+cpu, 2026-12-01, load average up to 1.8"
    assert not quiet.busy
    start_end = read_results(_write(tmp_path / "busy.csv", [_row(load="3.86 -> 4.11", threads=1)]))
    assert start_end.machine.endswith("1 thread, torch 2.13.0+cpu, 2026-12-01, load average up to 4.1")
    assert start_end.busy  # 4.11 > 1 thread: other work shared the cores
    old_column = read_results(_write(tmp_path / "old.csv", [{**_row(), "load": None, "load_average": "15.6"}]))
    assert old_column.machine.endswith("load average up to 15.6") and old_column.busy


def test_rows_from_two_runs_name_both(tmp_path):
    results = read_results(_write(tmp_path / "two.csv", [_row(), _row(date="2026-12-02")]))
    assert "2026-12-01 / 2026-12-02" in results.machine


def test_a_missing_file_says_what_to_run(tmp_path, monkeypatch):
    results = read_results("no_such_benchmark.csv")
    assert results.rows == [] and results.machine == ""
    assert results.path == RESULTS_DIR / "no_such_benchmark.csv"
    assert "run python benchmarks/no_such_benchmark.py to make it" in results.missing
    (tmp_path / "empty.csv").write_text("n,variant\n", encoding="utf-8")
    assert "holds no rows" in read_results(tmp_path / "empty.csv").missing


def test_a_file_that_is_not_a_benchmark_csv_is_refused(tmp_path):
    path = _write(tmp_path / "plain.csv", [{"n": 1, "variant": "a"}])
    with pytest.raises(ValueError, match=r"read_results\(\): expected a benchmark CSV whose rows name .*without "
                                         r"\['machine', 'threads', 'torch', 'date'\]"):
        read_results(path)
    with pytest.raises(TypeError, match=r"read_results\(\): name must be a CSV file name"):
        read_results(3)


@pytest.mark.slow
def test_the_cost_benchmark_writes_a_csv_the_reader_reads(tmp_path):
    path = tmp_path / "cost.csv"
    script = ROOT / "benchmarks" / "cost_of_attention.py"
    done = subprocess.run([sys.executable, str(script), "--lengths", "16", "32", "--heads", "1", "--head-dim", "4",
                           "--rounds", "1", "--threads", "1", "--csv", str(path)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "1 torch thread(s)" in done.stdout
    assert "'s time goes as n^" in done.stdout  # the fitted slopes, of two lengths
    results = read_results(path)
    assert [(r["n"], r["variant"]) for r in results.rows] == [
        (n, name) for n in ("16", "32")
        for name in ("naive (attention_lab)", "blockwise (attention_lab)", "F.scaled_dot_product_attention")]
    assert all(float(r["fastest_ms"]) > 0 and int(r["peak_bytes"]) > 0 for r in results.rows)
    assert results.machine.startswith(results.rows[0]["machine"] + ", 1 thread, torch ")


def test_series_gives_one_value_per_length_for_each_complete_variant(tmp_path):
    path = tmp_path / "bench.csv"
    path.write_text("machine,threads,torch,date,n,variant,ms\n"
                    + "".join(f"M,2,t,d,{n},{name},{value}\n" for n, name, value in
                              [(2048, "a", 4.0), (1024, "a", 1.0), (1024, "b", 2.0), (1024, "c", 3.0),
                               (2048, "c", 5.0)]), encoding="utf-8")
    lengths, series = read_results(path).series("ms")
    assert lengths == [1024, 2048] and series == {"a": [1.0, 4.0], "c": [3.0, 5.0]}  # b lacks n = 2048
    with pytest.raises(ValueError, match="expected a column of bench.csv"):
        read_results(path).series("seconds")
    assert read_results(tmp_path / "none.csv").series("ms") == ([], {})


def test_the_writer_keeps_the_column_order_leaves_missing_cells_empty_and_the_reader_reads_it(tmp_path):
    rows = [{"n": 1024, "variant": "a", "machine": "m", "threads": 2, "torch": "2.13.0+cpu", "date": "2026-12-01",
             "load": 0.7, "note": "quiet"},
            {"variant": "b", "n": 2048, "machine": "m", "threads": 2, "torch": "2.13.0+cpu", "date": "2026-12-01",
             "load": 0.9}]
    fields = ["n", "variant", "machine", "threads", "torch", "date", "load", "note"]
    path = tmp_path / "new" / "folder" / "run.csv"
    write_results(rows, path, fields)
    with open(path, newline="", encoding="utf-8") as file:
        assert next(csv.reader(file)) == fields
    read = read_results(path)
    assert [row["n"] for row in read.rows] == ["1024", "2048"] and read.rows[1]["note"] == ""
    assert read.machine.endswith("load average up to 0.9")
    with pytest.raises(ValueError):  # a column that is not in fields is a mistake, not dropped silently
        write_results([{**rows[0], "extra": 1}], path, fields)
