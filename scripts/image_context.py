"""The image's Docker build context as a reproducible tarball, for `make dist` where no Docker
engine runs (this machine, CI without one): exactly what `docker build .` would send, the
allowlist of .dockerignore applied to the working tree's files (git's tracked and untracked, not
ignored), with the Dockerfile checked against it: every COPY source from the context is in it.

    python scripts/image_context.py OUT.tar.gz

`docker build - < OUT.tar.gz` (or `docker build` of the unpacked folder) builds the image
elsewhere. Entries are sorted, owned by 0:0 and dated 0, so the same tree gives the same bytes.
"""

from __future__ import annotations

import fnmatch
import gzip
import io
import shlex
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def dockerignore_allowlist(text: str) -> tuple[list[str], list[str]]:
    """The `!path` entries (kept, below a `*` that drops everything) and the patterns that
    drop again within them (`**/__pycache__`, ...): the only shapes this project's file uses."""
    kept, dropped = [], []
    lines = [line.strip() for line in text.splitlines()]
    entries = [line for line in lines if line and not line.startswith("#")]
    if entries[:1] != ["*"]:
        raise SystemExit(".dockerignore no longer starts with `*`: teach image_context.py it")
    for entry in entries[1:]:
        if entry.startswith("!"):
            kept.append(entry[1:].rstrip("/"))
        else:
            dropped.append(entry.removeprefix("**/"))
    return kept, dropped


def context_files() -> list[str]:
    kept, dropped = dockerignore_allowlist((ROOT / ".dockerignore").read_text())
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],  # noqa: S607
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    files = {"Dockerfile", ".dockerignore"}
    for path in filter(None, listed.split("\0")):
        if not (ROOT / path).is_file():
            continue  # deleted in the working tree
        parts = path.split("/")
        if any(fnmatch.fnmatch(part, pattern) for part in parts for pattern in dropped):
            continue
        if any(path == keep or path.startswith(keep + "/") for keep in kept):
            files.add(path)
    return sorted(files)


def copy_sources(dockerfile: str) -> list[str]:
    """The context paths the Dockerfile's COPY instructions read (not those --from a stage)."""
    sources = []
    for line in dockerfile.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True) if line.strip() else []
        if not words or words[0].upper() != "COPY":
            continue
        args = [w for w in words[1:] if not w.startswith("--")]
        if any(w.startswith("--from") for w in words[1:]):
            continue
        sources.extend(args[:-1])
    return sources


def main(out: Path) -> int:
    files = context_files()
    missing = [
        source
        for source in copy_sources((ROOT / "Dockerfile").read_text())
        if not any(f == source.rstrip("/") or f.startswith(source.rstrip("/") + "/") for f in files)
    ]
    if missing:
        print(f"Dockerfile COPYs what the context lacks: {missing}", file=sys.stderr)
        return 1
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in files:
            info = tar.gettarinfo(str(ROOT / path), arcname=path)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            with (ROOT / path).open("rb") as handle:
                tar.addfile(info, handle)
    out.parent.mkdir(parents=True, exist_ok=True)
    with (
        out.open("wb") as raw,
        gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0) as packed,
    ):
        packed.write(buffer.getvalue())
    print(f"{out}: {len(files)} files, every COPY source present")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    raise SystemExit(main(Path(sys.argv[1])))
