"""Wire schemas of the import endpoint."""

from __future__ import annotations

import msgspec

from app.imports.service import ImportSummary


class ImportErrorOut(msgspec.Struct):
    line: int
    field: str | None
    detail: str


class ImportSummaryOut(msgspec.Struct):
    imported: int
    skipped: int
    failed: int
    errors: list[ImportErrorOut]

    @classmethod
    def of(cls, summary: ImportSummary) -> ImportSummaryOut:
        return cls(
            imported=summary.imported,
            skipped=summary.skipped,
            failed=summary.failed,
            errors=[ImportErrorOut(e.line, e.field, e.detail) for e in summary.errors],
        )
