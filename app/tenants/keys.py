"""API keys of tenants: `cgm_<prefix>_<secret>`. The prefix is public (it names the key in
lists and logs, and finds its row); only the SHA-256 of the whole key is stored. The secret has
256 random bits, so a fast hash is enough: there is nothing to brute-force."""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass

KEY_PATTERN = re.compile(r"cgm_([0-9a-f]{12})_[A-Za-z0-9_-]{43}\Z")


@dataclass(frozen=True, slots=True)
class NewKey:
    prefix: str
    plaintext: str  # shown once, never stored
    key_hash: str


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def generate_key() -> NewKey:
    prefix = secrets.token_hex(6)
    plaintext = f"cgm_{prefix}_{secrets.token_urlsafe(32)}"
    return NewKey(prefix=prefix, plaintext=plaintext, key_hash=hash_key(plaintext))


def key_prefix(key: str) -> str | None:
    """The prefix of a tenant key; None for anything else (e.g. a key from the settings)."""
    match = KEY_PATTERN.match(key)
    return match.group(1) if match else None
