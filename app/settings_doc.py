"""The settings reference of docs/configuration.md, generated from the groups of app/config/.

`python -m app.settings_doc` rewrites the block between the two markers in docs/configuration.md;
tests/test_config.py fails while that page and the settings disagree.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo

from app.config import GROUPS

BEGIN = "<!-- settings: generated from app/config/ by `python -m app.settings_doc` -->"
END = "<!-- settings: end -->"


def env_name(field: str) -> str:
    return f"COGNIS_{field.upper()}"


def shown_default(field: FieldInfo) -> str:
    """A field's default as the table shows it."""
    if field.is_required():
        return "(required)"
    value = field.default
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return f"`{value}`" if value else "empty"
    if isinstance(value, SecretStr):
        raise TypeError("a secret has no default to publish")
    return str(value)


def group_title(group: type[BaseModel]) -> tuple[str, str]:
    """(title, explanation) from a group's docstring: its first line, then the rest."""
    title, _, body = inspect.cleandoc(group.__doc__ or "").partition("\n")
    if not title or not body.strip():
        raise ValueError(f"{group.__name__} needs a docstring: a title line, then what it covers")
    return title, body.strip()


def settings_reference() -> str:
    """The block between BEGIN and END: one table per settings group."""
    parts = [BEGIN]
    for attribute, group in GROUPS.items():
        title, body = group_title(group)
        module = f"app/config/{group.__module__.rpartition('.')[2]}.py"
        parts += [
            "",
            f"**{title}** {body} In code: `settings.{attribute}` (`{group.__name__}`, `{module}`).",
            "",
            "| Variable | Default | Meaning |",
            "|---|---|---|",
        ]
        for name, field in group.model_fields.items():
            meaning = (field.description or "").replace("|", "\\|")
            parts.append(f"| `{env_name(name)}` | {shown_default(field)} | {meaning} |")
    parts += ["", END]
    return "\n".join(parts)


def replace_block(text: str) -> str:
    start, end = text.index(BEGIN), text.index(END) + len(END)
    return text[:start] + settings_reference() + text[end:]


def main(argv: list[str]) -> int:
    readme = Path(argv[0] if argv else "docs/configuration.md")
    text = readme.read_text()
    updated = replace_block(text)
    if updated != text:
        readme.write_text(updated)
    print(f"{readme}: settings reference {'rewritten' if updated != text else 'unchanged'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
