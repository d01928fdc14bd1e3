"""Count what learners see when the answers of tests/answers/ go through the lessons' own checks.

    python tools/answer_report.py            # one row per lesson, then the attempts that went wrong
    python tools/answer_report.py --all      # every attempt with its verdict

Verdicts: right answers accepted or "right rejected"; wrong answers rejected with the hint that names their
mistake, or "wrong accepted", "misleading" (a hint about another mistake), "generic" (only the check's general hint
where a specific one was expected); any exception other than the check's one-line hint is a "traceback".
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from answers import lessons, run

COLUMNS = ("attempts", "right", "wrong", "right rejected", "wrong accepted", "traceback", "misleading", "generic",
           "generic seen")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="list every attempt, not only those that went wrong")
    args = parser.parse_args(argv)
    totals: Counter[str] = Counter()
    rows, notes = [], []
    for lesson, attempts in lessons().items():
        counts: Counter[str] = Counter()
        for attempt in attempts:
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                outcome = run(attempt, printed.getvalue)
            verdict = outcome.verdict(attempt)
            counts.update(["attempts", "right" if attempt.right else "wrong"])
            counts["generic seen"] += outcome.kind == "generic"
            if verdict != "ok":
                counts[verdict] += 1
            if verdict != "ok" or args.all:
                notes.append(f"{attempt.exercise:<6} {verdict:<15} {attempt.label}: {outcome.text[:150]}")
        rows.append((lesson, counts))
        totals.update(counts)
    width = max(len(c) for c in COLUMNS)
    print("lesson    " + " ".join(f"{c:>{width}}" for c in COLUMNS))
    for lesson, counts in [*rows, ("total", totals)]:
        print(f"{lesson:<9} " + " ".join(f"{counts[c]:>{width}}" for c in COLUMNS))
    if notes:
        print()
        print("\n".join(notes))
    bad = sum(totals[c] for c in ("right rejected", "wrong accepted", "traceback", "misleading"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
