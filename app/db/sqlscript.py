"""Split a SQL script into statements (asyncpg prepares each statement, one at a time)."""

from __future__ import annotations

from pathlib import Path

# The analysts' views and functions, installed by migrations.
SQL_DIR = Path(__file__).resolve().parents[2] / "sql"


def split_statements(script: str) -> list[str]:
    """Split on semicolons outside dollar-quoted bodies; drop full-line `--` comments."""
    lines = [ln for ln in script.splitlines() if not ln.lstrip().startswith("--")]
    statements: list[str] = []
    current: list[str] = []
    in_dollar = False
    for char_index, char in enumerate(text := "\n".join(lines)):
        current.append(char)
        if text.startswith("$$", char_index) and not text.startswith("$$", char_index - 1):
            in_dollar = not in_dollar
        elif char == ";" and not in_dollar:
            statement = "".join(current).strip()
            if statement != ";":
                statements.append(statement)
            current = []
    tail = "".join(current).strip()
    if tail:
        statements.append(tail)
    return statements


def run_sql_file(name: str) -> None:
    """Run one of sql/'s scripts in a migration, statement by statement."""
    from alembic import op

    for statement in split_statements((SQL_DIR / name).read_text()):
        op.execute(statement)
