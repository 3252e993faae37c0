"""Model loading without a hub: a local folder must never trigger a network lookup."""

from __future__ import annotations

import os
from pathlib import Path


def offline_if_local(model_name_or_path: str) -> None:
    """Switch the Hugging Face libraries to offline mode when the model is a local folder."""
    if os.path.isdir(model_name_or_path):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def user_cache_dir(part: str) -> Path:
    """A folder of the per-user cache (~/.cache/cognis-memory/<part>, or under XDG_CACHE_HOME)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "cognis-memory" / part
