"""Bounds of a memory's fields as msgspec types, shared by the API's wire schemas and the
import's lines (the store's own rules, not the web layer's)."""

from __future__ import annotations

from typing import Annotated

import msgspec

from app.config import Scope

Content = Annotated[str, msgspec.Meta(min_length=1, max_length=100_000)]
SessionId = Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
Speaker = Annotated[str, msgspec.Meta(min_length=1, max_length=256)]

__all__ = ["Content", "Scope", "SessionId", "Speaker"]
