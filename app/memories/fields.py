"""Field types shared by several areas' wire schemas."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

Content = Annotated[str, msgspec.Meta(min_length=1, max_length=100_000)]
SessionId = Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
Speaker = Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
Scope = Literal["USER", "CONTEXT"]
