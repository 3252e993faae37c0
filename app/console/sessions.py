"""Console sessions: the browser holds a random session secret, never the API key.

Logging in stores the key in `console_sessions` (0027), sealed with AES-GCM under a key
derived from the session's secret, and the row is found by the secret's SHA-256. So the cookie
alone is no API key (it opens this console until logout or COGNIS_CONSOLE_SESSION_HOURS, and
nothing else: the REST API, MCP and another deployment refuse it), and the table alone opens
nothing (no row is unsealed without its cookie, and a backup holds no usable key). Logging out
deletes the row; the retention job deletes expired ones. A revoked key ends its sessions at
their next request, which checks the key as every API request does.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from sqlalchemy import delete, func, insert, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.db.models import ConsoleSession

NONCE_BYTES = 12


def _session_id(secret: str) -> bytes:
    return hashlib.sha256(b"cognis-console-session:" + secret.encode()).digest()


def _cipher(secret: str) -> AESGCM:
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"cognis-console-seal")
    return AESGCM(key.derive(secret.encode()))


async def open_session(
    sessionmaker: async_sessionmaker[AsyncSession], api_key: str, lifetime_s: float
) -> str:
    """A new session for `api_key` (already checked): the secret its cookie carries."""
    secret = secrets.token_urlsafe(32)
    session_id = _session_id(secret)
    nonce = secrets.token_bytes(NONCE_BYTES)
    sealed = nonce + _cipher(secret).encrypt(nonce, api_key.encode(), session_id)
    async with sessionmaker() as session, session.begin():
        await session.execute(
            insert(ConsoleSession).values(
                id=session_id,
                sealed_key=sealed,
                expires_at=func.now() + timedelta(seconds=lifetime_s),
            )
        )
    return secret


async def session_key(sessionmaker: async_sessionmaker[AsyncSession], secret: str) -> str | None:
    """The API key of the unexpired session `secret` opens, else None."""
    session_id = _session_id(secret)
    async with sessionmaker() as session:
        sealed = await session.scalar(
            select(ConsoleSession.sealed_key).where(
                ConsoleSession.id == session_id, ConsoleSession.expires_at > func.now()
            )
        )
    if sealed is None:
        return None
    try:
        opened = _cipher(secret).decrypt(sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], session_id)
    except InvalidTag:  # a row altered in the table: no key comes out of it
        return None
    return opened.decode()


async def close_session(sessionmaker: async_sessionmaker[AsyncSession], secret: str) -> None:
    """Log out: the session's row goes, so its cookie opens nothing, wherever it is kept."""
    session_id = _session_id(secret)
    async with sessionmaker() as session, session.begin():
        await session.execute(delete(ConsoleSession).where(ConsoleSession.id == session_id))
