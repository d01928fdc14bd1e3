"""The committed benchmark results: one reader for every CSV in ``benchmarks/results/``.

Each benchmark script (``benchmarks/*.py``) writes one CSV whose rows name the machine, the torch threads, the torch
version, the date and the load average while it ran. A lesson plots those full-size figures beside the learner's own
small run, labelled with the machine they came from: :func:`read_results` returns the rows and that label.

The folder is found from this package's own location (the checkout the package is installed from in editable mode,
as ``make lab`` does), never from the working folder: a lesson finds it from ``notebooks/``, from
``notebooks/zh-CN/`` or from a student's own folder. Where the package runs without its checkout there are no
results, and the reader says what to run instead of failing.
"""

from __future__ import annotations

import csv
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from .._validation import fail

__all__ = ["RESULTS_DIR", "BenchmarkResults", "read_results", "write_results"]

RESULTS_DIR = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
"""``benchmarks/results/`` of the checkout this package belongs to: attention_lab/measure/<this file> -> the root."""

_LABEL_COLUMNS = ("machine", "threads", "torch", "date")
_LOAD_COLUMNS = ("load_average", "load")  # the 1-minute load average while a row was measured ("3.9 -> 4.1" too)


def _distinct(rows: list[dict[str, str]], column: str) -> str:
    """The column's values in order of first appearance, joined: one value when every row agrees."""
    return " / ".join(dict.fromkeys(row[column] for row in rows))


def _loads(rows: list[dict[str, str]]) -> list[float]:
    column = next((name for name in _LOAD_COLUMNS if name in rows[0]), None)
    if column is None:
        return []
    return [float(x) for row in rows for x in re.findall(r"\d+(?:\.\d+)?", row[column] or "")]


@dataclass(frozen=True)
class BenchmarkResults:
    """The rows of one committed benchmark CSV (each a dict of column -> text, as :mod:`csv` reads them) and the line
    a lesson prints as their label.

    ``machine`` is the label: "AMD EPYC, 2 logical cores, 2 threads, torch 2.13.0+cpu, 2026-12-01, load average up
    to 1.8" (empty when the file is missing). ``busy`` says that the load average rose above the thread count while
    it ran: other programs shared the cores, so its timings are noisy. ``missing`` says what to run to make the file
    ("" when it was read).

    Shape: no tensors; ``rows`` is a list with one dict per CSV row.
    """

    path: Path
    rows: list[dict[str, str]] = field(default_factory=list)
    machine: str = ""
    busy: bool = False
    missing: str = ""

    def series(self, column: str, *, length: str = "n", variant: str = "variant",
               ) -> tuple[list[int], dict[str, list[float]]]:
        """One column of the rows as series to plot or to conclude from: the lengths, increasing, and for each
        variant (in order of first appearance) its value at each of them. A variant without a row at some length
        (a run that failed there) is left out. Empty when the file is missing.

        Shape: ``lengths`` (n,), each series (n,).
        """
        for name in (column, length, variant):
            if self.rows and name not in self.rows[0]:
                fail("BenchmarkResults.series", f"expected a column of {self.path.name} ({list(self.rows[0])}), "
                                                f"got {name!r}")
        lengths = sorted({int(row[length]) for row in self.rows})
        table: dict[str, dict[int, float]] = {}
        for row in self.rows:
            table.setdefault(row[variant], {})[int(row[length])] = float(row[column])
        return lengths, {name: [values[n] for n in lengths] for name, values in table.items()
                         if set(values) == set(lengths)}


def read_results(name: str | os.PathLike) -> BenchmarkResults:
    """The rows of ``benchmarks/results/<name>`` and their machine label; a path (not a bare file name) is read as
    given, e.g. the ``--csv`` file of a benchmark run of your own.

    Every row must hold ``machine``, ``threads``, ``torch`` and ``date``, as every benchmark script writes them.

    Shape: no tensors in or out.
    """
    fn = "read_results"
    if not isinstance(name, (str, os.PathLike)) or not str(name):
        fail(fn, f"name must be a CSV file name such as 'block_sparse.csv' or a path, got {name!r}", TypeError)
    path = Path(name)
    if path.name == str(name):  # a bare name: the committed results of this checkout
        path = RESULTS_DIR / path.name
    if not path.is_file():
        script = f"benchmarks/{path.stem}.py"
        return BenchmarkResults(path, missing=f"{path} is not there (the benchmark results live in a checkout of "
                                              f"attention-lab): run python {script} to make it")
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    if not rows:
        return BenchmarkResults(path, missing=f"{path} holds no rows: run python benchmarks/{path.stem}.py again")
    lacking = [column for column in _LABEL_COLUMNS if column not in rows[0]]
    if lacking:
        fail(fn, f"expected a benchmark CSV whose rows name {list(_LABEL_COLUMNS)}, got {path.name} without "
                 f"{lacking}; read a file written by a script in benchmarks/")
    machine, threads, torch_version, date = (_distinct(rows, column) for column in _LABEL_COLUMNS)
    most_threads = max(int(row["threads"]) for row in rows)
    loads = _loads(rows)
    label = f"{machine}, {threads} thread{'s' * (most_threads != 1)}, torch {torch_version}, {date}"
    if loads:
        label += f", load average up to {max(loads):.1f}"
    return BenchmarkResults(path, rows, label, busy=bool(loads) and max(loads) > most_threads)


def write_results(rows: list[dict[str, object]], path: str | os.PathLike, fields: list[str]) -> None:
    """Write a benchmark's rows to ``path`` (its folder made if missing), one column per name of ``fields`` in that
    order; a row without some column leaves it empty. The one writer of every benchmark script's CSV.

    Shape: no tensors; ``rows`` is a list with one dict per CSV row.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as file:
        writer = csv.DictWriter(file, fieldnames=fields, restval="")
        writer.writeheader()
        writer.writerows(rows)
