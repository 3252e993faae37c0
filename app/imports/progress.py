"""Plain-text progress of an import on a terminal (or a log), and the summary as JSON."""

from __future__ import annotations

import json
import time
from typing import TextIO

from app.imports.service import ImportSummary


def summary_json(summary: ImportSummary) -> str:
    return json.dumps(
        {
            "imported": summary.imported,
            "skipped": summary.skipped,
            "failed": summary.failed,
            "errors": [
                {"line": e.line, "field": e.field, "detail": e.detail} for e in summary.errors
            ],
        },
        indent=2,
    )


class ProgressReport:
    """One status line, rewritten in place on a terminal, one line per batch elsewhere."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._started = time.perf_counter()
        self._tty = stream.isatty()
        self._last: ImportSummary | None = None

    def _line(self, summary: ImportSummary) -> str:
        elapsed = max(time.perf_counter() - self._started, 1e-9)
        return (
            f"read {summary.lines} lines: imported {summary.imported}, skipped "
            f"{summary.skipped}, failed {summary.failed} ({summary.lines / elapsed:,.0f} lines/s, "
            f"{summary.imported / elapsed:,.0f} imported/s)"
        )

    def update(self, summary: ImportSummary) -> None:
        self._last = summary
        end = "\r" if self._tty else "\n"
        print(self._line(summary), end=end, file=self._stream, flush=True)

    def index_built(self, name: str, seconds: float) -> None:
        print(f"built {name} in {seconds:.1f} s", file=self._stream, flush=True)

    def finish(self, summary: ImportSummary) -> None:
        print(
            f"done in {time.perf_counter() - self._started:.1f} s: " + self._line(summary),
            file=self._stream,
            flush=True,
        )

    def interrupted(self) -> None:
        done = self._line(self._last) if self._last else "nothing committed yet"
        print(
            f"\ninterrupted: {done}; the same command resumes (it skips what is in)",
            file=self._stream,
            flush=True,
        )
