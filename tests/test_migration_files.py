"""The migration files and what the documentation says about them, without a database.

File names carry a timestamp (alembic.ini's file_template) that orders them like the revision
chain; the docstring's header repeats it and the parent revision; and every revision number
the README, docs/ and the changelog mention is a real one.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from alembic.config import Config
from alembic.script import Script, ScriptDirectory

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]
# `0012`, 0012 or `0012_categories`; not a part of 1.0000 or of a UUID.
REVISION_MENTION = re.compile(r"(?<![\w.-])(?P<number>00\d\d)(?P<slug>_[a-z0-9_]+)?(?![\w-])")
STAMP = re.compile(r"^(\d{4})-(\d{2})-(\d{2})-(\d{2})(\d{2})_")


def _chain() -> list[Script]:
    """Every revision, from the first to the head."""
    config = Config(str(ROOT / "alembic.ini"))
    config.set_main_option("script_location", str(ROOT / "migrations"))
    scripts = ScriptDirectory.from_config(config)
    assert len(scripts.get_heads()) == 1, "the revisions must form one chain"
    return list(reversed(list(scripts.walk_revisions())))


def _stamp(script: Script) -> str:
    match = STAMP.match(Path(script.path).name)
    assert match, f"{script.path}: file name does not start with YYYY-MM-DD-HHMM_"
    year, month, day, hour, minute = match.groups()
    return f"{year}-{month}-{day} {hour}:{minute}:00"


def test_file_timestamps_are_unique_and_ordered_like_the_chain() -> None:
    stamps = [_stamp(script) for script in _chain()]
    assert len(stamps) == len(set(stamps)), f"shared timestamps: {stamps}"
    assert stamps == sorted(stamps), [(Path(s.path).name, s.revision) for s in _chain()]


@pytest.mark.parametrize("script", _chain(), ids=lambda script: script.revision)
def test_a_docstring_header_matches_its_file_and_parent(script: Script) -> None:
    doc = script.module.__doc__ or ""
    assert f"Revision ID: {script.revision}\n" in doc
    assert re.search(rf"^Revises: ?{script.down_revision or ''}$", doc, re.M), doc
    assert f"Create Date: {_stamp(script)}\n" in doc


def test_migration_numbers_in_the_docs_name_real_revisions() -> None:
    revisions = {script.revision for script in _chain()}
    numbers = {revision.split("_", 1)[0] for revision in revisions}
    wrong = []
    for path in DOCS:
        for line_no, line in enumerate(path.read_text().splitlines(), 1):
            for match in REVISION_MENTION.finditer(line):
                known = revisions if match["slug"] else numbers
                if match[0] not in known:
                    wrong.append(f"{path.relative_to(ROOT)}:{line_no}: {match[0]}")
    assert wrong == []


def test_the_deployment_guide_lists_the_unforced_downgrades() -> None:
    guide = (ROOT / "docs" / "deployment.md").read_text()
    bullet = guide[guide.index("- Downgrades that drop stored data") :].split("\n- ", 1)[0]
    forced_part, unforced_part = bullet.split("(everything).", 1)
    unforced_part = unforced_part.split("go down unforced", 1)[0]
    named = {
        part: set(re.findall(r"`(\d{4}_[a-z0-9_]+)`", text))
        for part, text in (("forced", forced_part), ("unforced", unforced_part))
    }
    # A downgrade that drops data calls refuse_data_loss (app/db/migration_safety.py) first.
    actual: dict[str, set[str]] = {"forced": set(), "unforced": set()}
    for script in _chain():
        forced = "refuse_data_loss(" in Path(script.path).read_text()
        actual["forced" if forced else "unforced"].add(script.revision)
    assert named == actual
