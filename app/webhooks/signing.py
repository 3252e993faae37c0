"""Signatures in the Standard Webhooks style: `webhook-signature: v1,<base64 HMAC-SHA256 of
"{id}.{timestamp}.{body}">`, keyed by the secret's bytes (the base64 after `whsec_`)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

PREFIX = "whsec_"


def new_secret() -> str:
    return PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def _key(secret: str) -> bytes:
    return base64.b64decode(secret.removeprefix(PREFIX))


def sign(secret: str, event_id: str, timestamp: int, body: bytes) -> str:
    message = f"{event_id}.{timestamp}.".encode() + body
    digest = hmac.new(_key(secret), message, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def verify(secret: str, event_id: str, timestamp: int, body: bytes, header: str) -> bool:
    """Whether any `v1,` signature of the (space-separated) header matches."""
    expected = sign(secret, event_id, timestamp, body)
    return any(hmac.compare_digest(expected, part) for part in header.split())
